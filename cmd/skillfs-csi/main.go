// Command skillfs-csi is skillfs's CSI node plugin: it gives Kubernetes
// pods a skillfs session as an ephemeral inline volume (see package node
// for what it does and decides, package claims for the policy file).
//
//	skillfs-csi [--endpoint unix:///csi/csi.sock] [--skillfs-socket /var/lib/skillfs/skillfs.sock]
//	            [--node-id NAME] [--driver-name csi.skillfs] [--policy /etc/skillfs-csi/policy.yaml]
//	skillfs-csi --version
//
// It serves the CSI Identity and Node services on the endpoint (a Unix
// socket, made 0600; a stale socket file there is replaced) until SIGTERM
// or SIGINT, then stops taking calls and lets those in flight finish.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"skillfs/cmd/skillfs-csi/internal/claims"
	"skillfs/cmd/skillfs-csi/internal/node"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

// policyInterval is how often the policy file is checked for a change.
const policyInterval = 5 * time.Second

// stopGrace is how long calls in flight may take after SIGTERM.
const stopGrace = 30 * time.Second

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "skillfs-csi:", err)
		os.Exit(2)
	}
}

// config is what the flags say.
type config struct {
	endpoint, socket, nodeID, driver, policy string
	version                                  bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	host, _ := os.Hostname()
	var c config
	fs := flag.NewFlagSet("skillfs-csi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.endpoint, "endpoint", "unix:///csi/csi.sock", "the CSI endpoint to serve: unix://PATH (or a bare path)")
	fs.StringVar(&c.socket, "skillfs-socket", "/var/lib/skillfs/skillfs.sock", "the node daemon's operator API socket")
	fs.StringVar(&c.nodeID, "node-id", host, "this node's id, as NodeGetInfo answers it (the Kubernetes node name)")
	fs.StringVar(&c.driver, "driver-name", "csi.skillfs", "the driver's name (the CSIDriver object's)")
	fs.StringVar(&c.policy, "policy", "/etc/skillfs-csi/policy.yaml", "the claims policy file (re-read when it changes)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.nodeID == "" {
		return c, errors.New("--node-id: no host name to default to; give one")
	}
	if c.driver == "" {
		return c, errors.New("--driver-name: must not be empty")
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if c.version {
		fmt.Fprintln(stdout, "skillfs-csi", version)
		return nil
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	l, err := node.Listen(c.endpoint)
	if err != nil {
		return err
	}
	store := claims.Open(c.policy, log)
	go store.Watch(ctx, policyInterval)
	d := &node.Driver{Name: c.driver, Version: version, NodeID: c.nodeID, Socket: c.socket, Policy: store, Log: log}
	srv := d.Server()
	go func() {
		<-ctx.Done()
		// Calls in flight finish (each is bounded); then the rest is cut.
		t := time.AfterFunc(stopGrace, srv.Stop)
		srv.GracefulStop()
		t.Stop()
	}()
	log.Info("serving", "endpoint", c.endpoint, "driver", c.driver, "node", c.nodeID, "skillfs_socket", c.socket, "version", version)
	return srv.Serve(l)
}
