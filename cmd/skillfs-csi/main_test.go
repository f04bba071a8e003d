package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestFlagDefaults(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := config{endpoint: "unix:///csi/csi.sock", socket: "/var/lib/skillfs/skillfs.sock", nodeID: host,
		driver: "csi.skillfs", policy: "/etc/skillfs-csi/policy.yaml"}
	if c != want {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	for _, args := range [][]string{{"--endpoint"}, {"extra"}, {"--driver-name", ""}, {"--node-id", ""}, {"--bogus"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"--version"}, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "skillfs-csi ") {
		t.Fatalf("--version: %q, %v", out.String(), err)
	}
}

// TestBinary builds the plugin without cgo, starts it on an endpoint
// where a stale socket file lies, asks who it is, and stops it with
// SIGTERM.
func TestBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "skillfs-csi")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=1.2.3", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	ep := filepath.Join(dir, "csi.sock")
	// A socket file a killed run left (Close would remove it: unlink off).
	l, err := net.Listen("unix", ep)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--endpoint", "unix://"+ep, "--skillfs-socket", filepath.Join(dir, "none.sock"),
		"--node-id", "node-a", "--policy", filepath.Join(dir, "policy.yaml"))
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	conn, err := grpc.NewClient("unix://"+ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var info *csi.GetPluginInfoResponse
	for {
		if info, err = csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true)); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil || info.GetName() != "csi.skillfs" || info.GetVendorVersion() != "1.2.3" {
		t.Fatalf("GetPluginInfo: %v, %v\n%s", info, err, logs.String())
	}
	ni, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || ni.GetNodeId() != "node-a" {
		t.Fatalf("NodeGetInfo: %v, %v", ni, err)
	}
	if fi, err := os.Stat(ep); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("endpoint socket: %v, %v; want mode 0600", fi, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
	if !strings.Contains(logs.String(), "no policy file") {
		t.Errorf("a missing policy file was not logged:\n%s", logs.String())
	}
}
