package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// maxConns is the daemon's default cap on TCP connections (daemon.DefaultMaxConns).
const maxConns = 256

// writeTokenFile writes a token file with the given mode.
func writeTokenFile(t testing.TB, token string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitLog waits for the daemon's log to match re and returns the match:
// its stderr is copied in by another goroutine, behind what it printed on
// stdout.
func waitLog(t testing.TB, d *daemon, re string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := regexp.MustCompile(re).FindStringSubmatch(d.logs()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not log %q:\n%s", re, d.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listenAddr is the TCP address the daemon reported it listens on.
func listenAddr(t testing.TB, d *daemon) string {
	t.Helper()
	return waitLog(t, d, `msg=serving .*listen=(\S+)`)[1]
}

// fdCount is the number of descriptors process pid holds.
func fdCount(t testing.TB, pid int) int {
	t.Helper()
	names, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// within runs fn and fails the test if it has not returned after limit: a
// hang, not slowness, is what it catches.
func within(t testing.TB, limit time.Duration, what string, fn func() error) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	case <-time.After(limit):
		t.Fatalf("%s did not finish within %v", what, limit)
	}
}

// TestTCPFloodLeavesSocketAndMountServing: thousands of clients without the
// token cannot take the daemon's descriptors: each unauthorised request is
// answered and its connection closed, idle connections beyond the cap wait
// in the kernel (or, idle for a second, make room for them), and meanwhile
// the Unix socket and the mount serve as usual.
func TestTCPFloodLeavesSocketAndMountServing(t *testing.T) {
	e := newEnv(t)
	d := e.serve("--listen", "127.0.0.1:0", "--token-file", writeTokenFile(t, "s3cret", 0o600))
	addr := listenAddr(t, d)
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "commit-messages")
	manifest := filepath.Join(s.Path, "commit-messages", "SKILL.md")
	want, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	pid := d.cmd.Process.Pid
	base := fdCount(t, pid)
	const clients = 2000

	// Unauthorised requests, all at once: each gets its 401, then EOF.
	var closed, answered atomic.Int32
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			fmt.Fprint(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode == http.StatusUnauthorized {
				answered.Add(1)
			}
			if _, err := br.ReadByte(); err == io.EOF {
				closed.Add(1)
			}
		}()
	}
	wg.Wait()
	if answered.Load() != clients || closed.Load() != clients {
		t.Fatalf("of %d unauthorised clients %d got a 401 and %d had their connection closed", clients, answered.Load(), closed.Load())
	}

	// Idle connections: the daemon holds at most the cap of them.
	conns := make([]net.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range clients {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial after %d idle connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	most := 0
	for range 20 { // the daemon accepts what it will within this second
		most = max(most, fdCount(t, pid))
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("descriptors held by the daemon: %d before, at most %d with %d idle clients (cap %d)", base, most, clients, maxConns)
	if most > base+maxConns+16 {
		t.Fatalf("the daemon holds %d descriptors with %d idle TCP clients, %d before: the cap of %d did not hold", most, clients, base, maxConns)
	}

	// Meanwhile the socket and the mount serve.
	within(t, 30*time.Second, "session show over the Unix socket while the TCP listener is saturated", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := e.command(ctx, "session", "show", s.ID).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	within(t, 30*time.Second, "read through the mount while the TCP listener is saturated", func() error {
		got, err := os.ReadFile(manifest)
		if err == nil && string(got) != string(want) {
			err = errors.New("wrong content")
		}
		return err
	})

	// Once the idle clients leave, a client with the token is served.
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	within(t, 60*time.Second, "authorised request after the flood", func() error {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/health", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	// And the descriptors went back.
	deadline := time.Now().Add(30 * time.Second)
	for fdCount(t, pid) > base+16 {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon still holds %d descriptors after the clients left, %d before", fdCount(t, pid), base)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
