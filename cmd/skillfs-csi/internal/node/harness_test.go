package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"skillfs/cmd/skillfs-csi/internal/claims"
	"skillfs/fs/fusetest"
	"skillfs/skills/skilltest"
)

// skillfsBinary is the daemon, built once for the package's tests.
var skillfsBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "csi-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	skillfsBinary = filepath.Join(dir, "skillfs")
	build := exec.Command("go", "build", "-o", skillfsBinary, "skillfs/cmd/skillfs")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build skillfs:", err)
		os.Exit(1)
	}
	// Every test's folders are below dir, so that a mount left behind is
	// found there (and dir is removed only when none is).
	os.Setenv("TMPDIR", dir)
	os.Chmod(dir, 0o755) // tests that act as another user open the way to their folders below
	fusetest.Main(m, func() ([]string, error) {
		left, err := mountsBelow(dir)
		if err == nil && len(left) == 0 {
			os.RemoveAll(dir)
		}
		return left, err
	})
}

// mountsBelow lists the mounts at or below dir.
func mountsBelow(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			out = append(out, f[1])
		}
	}
	return out, nil
}

// node is one test's daemon and plugin.
type testNode struct {
	t      testing.TB
	home   string
	socket string // the daemon's
	mount  string
	policy string
	cmd    *exec.Cmd
	done   chan struct{}
	logMu  sync.Mutex
	log    strings.Builder

	conn   *grpc.ClientConn
	srv    *grpc.Server
	driver *Driver
	ep     string
}

// The skill the tests read, and its files' bytes.
const (
	testSkill    = "csi-probe"
	testFileBody = "exactly these bytes\n"
)

// startNode starts a daemon with a home of its own (user alice, bob;
// skill csi-probe shared with all) and the plugin on a socket, with a
// policy file allowing namespace agents / service account runner to claim
// alice.
func startNode(t testing.TB) *testNode {
	t.Helper()
	fusetest.Require(t)
	// A short folder, not t.TempDir (named after the test): the daemon's
	// socket path must fit a unix socket address (108 bytes).
	dir, err := os.MkdirTemp("", "n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &testNode{t: t, home: filepath.Join(dir, "home"), policy: filepath.Join(dir, "policy.yaml")}
	n.socket = filepath.Join(n.home, "skillfs.sock")
	writePolicy(t, n.policy, "claims:\n  - namespace: agents\n    serviceAccounts: [runner]\n    users: [alice]\n")
	n.startDaemon()
	src := filepath.Join(dir, "src")
	skilltest.WriteDir(t, src, skilltest.Skill("name: "+testSkill+"\ndescription: what the CSI tests read", "\n# Probe\n",
		map[string]string{"references/data.txt": testFileBody}))
	n.cli("user", "add", "alice")
	n.cli("user", "add", "bob")
	n.cli("skill", "import", src, "--share", "global")
	n.startPlugin()
	return n
}

func writePolicy(t testing.TB, path, text string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (n *testNode) cli(args ...string) string {
	n.t.Helper()
	out, err := exec.Command(skillfsBinary, append([]string{"--home", n.home}, args...)...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("skillfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (n *testNode) startDaemon() {
	n.t.Helper()
	cmd := exec.Command(skillfsBinary, "--home", n.home, "serve")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		n.logMu.Lock()
		defer n.logMu.Unlock()
		return n.log.Write(p)
	})
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); strings.HasPrefix(sc.Text(), "skillfs ready: mount ") && len(f) > 3 {
				ready <- f[3]
			}
		}
	}()
	done := n.done
	go func() { cmd.Wait(); close(done) }()
	n.t.Cleanup(n.stopDaemon)
	select {
	case n.mount = <-ready:
	case <-done:
		n.t.Fatalf("skillfs serve exited before ready\n%s", n.daemonLog())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		n.t.Fatalf("skillfs serve not ready after 60s\n%s", n.daemonLog())
	}
}

func (n *testNode) daemonLog() string {
	n.logMu.Lock()
	defer n.logMu.Unlock()
	return n.log.String()
}

// stopDaemon stops the daemon cleanly (SIGTERM), once.
func (n *testNode) stopDaemon() {
	select {
	case <-n.done:
		return
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		n.cmd.Process.Kill()
		<-n.done
		n.t.Errorf("skillfs serve did not stop within 30s of SIGTERM\n%s", n.daemonLog())
	}
}

// startPlugin serves a new Driver on a socket of its own and dials it.
func (n *testNode) startPlugin() {
	n.t.Helper()
	n.ep = filepath.Join(n.t.TempDir(), "csi.sock")
	l, err := Listen("unix://" + n.ep)
	if err != nil {
		n.t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{n.t}, nil))
	n.driver = &Driver{Name: "csi.skillfs", Version: "test", NodeID: "node-1", Socket: n.socket, Policy: claims.Open(n.policy, log), Log: log}
	n.srv = n.driver.Server()
	go n.srv.Serve(l)
	n.conn, err = grpc.NewClient("unix://"+n.ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatal(err)
	}
	conn, srv := n.conn, n.srv
	n.t.Cleanup(func() { conn.Close(); srv.Stop() })
}

// restartPlugin stops the plugin and starts a new one (nothing kept).
func (n *testNode) restartPlugin() {
	n.conn.Close()
	n.srv.Stop()
	n.startPlugin()
}

func (n *testNode) node() csi.NodeClient { return csi.NewNodeClient(n.conn) }

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

var _ io.Writer = writerFunc(nil)

// podContext is the volume context a kubelet sends for an inline volume of
// pod name in namespace ns with service account sa, plus attrs.
func podContext(ns, name, uid, sa string, attrs map[string]string) map[string]string {
	ctx := map[string]string{AttrEphemeral: "true", AttrPodName: name, AttrPodNamespace: ns, AttrPodUID: uid, AttrServiceAcct: sa}
	for k, v := range attrs {
		ctx[k] = v
	}
	return ctx
}

// publishReq is a kubelet's publish of an inline volume.
func publishReq(id, target string, vc map[string]string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, Readonly: true, VolumeContext: vc,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}}
}

func ctxOf(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
