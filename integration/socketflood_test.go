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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The daemon's default limits on its socket (daemon.DefaultSocketConns,
// DefaultMaxStreams, DefaultFDReserve).
const (
	socketConns = 1024
	maxStreams  = 512
	fdReserve   = 1024
)

// TestSocketFloodLeavesHealthAndReadsServing: a local client holding far
// more idle connections and event streams on the Unix socket than its caps
// cannot take the daemon's descriptors. The daemon runs with an open file
// limit of 2,048 (the caps, fitted into it, leave the reserve to the
// mount and the store): streams over the cap are answered 503 busy with
// Retry-After, idle connections beyond the cap make room for new clients,
// /v1/health answers, and a first read of a SKILL.md through a session's
// mount works.
func TestSocketFloodLeavesHealthAndReadsServing(t *testing.T) {
	const fileLimit = 2048
	e := newEnv(t)
	d := e.serveWithFileLimit(fileLimit)
	waitLog(t, d, `msg=serving .*socket_conns=`+strconv.Itoa(fileLimit-fdReserve)+` socket_streams=`+strconv.Itoa(maxStreams))
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "commit-messages")
	manifest := filepath.Join(s.Path, "commit-messages", "SKILL.md")
	sock := filepath.Join(e.home, "skillfs.sock")
	pid := d.cmd.Process.Pid
	baseFDs, baseRSS := fdCount(t, pid), vmKB(pid, "VmRSS")

	var mu sync.Mutex
	var conns []net.Conn
	hold := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func() (net.Conn, error) {
		c, err := net.DialTimeout("unix", sock, 30*time.Second)
		if err == nil {
			hold(c)
		}
		return c, err
	}

	// Event streams, more than the cap: each is answered 200 and held, or
	// 503 busy with Retry-After.
	const streams = 2 * maxStreams
	var open, busy, other atomic.Int32
	var wg sync.WaitGroup
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial()
			if err != nil {
				other.Add(1)
				return
			}
			c.SetDeadline(time.Now().Add(60 * time.Second))
			fmt.Fprint(c, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			switch {
			case err != nil:
				other.Add(1)
			case resp.StatusCode == http.StatusOK:
				open.Add(1)
				c.SetDeadline(time.Time{})
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
				busy.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	streamsRSS := vmKB(pid, "VmRSS")
	t.Logf("%d event streams asked for: %d open, %d answered 503 busy with Retry-After, %d otherwise; daemon RSS %d MiB before, %d MiB with the streams open",
		streams, open.Load(), busy.Load(), other.Load(), baseRSS>>10, streamsRSS>>10)
	if open.Load() != maxStreams || busy.Load() != streams-maxStreams || other.Load() != 0 {
		t.Fatalf("of %d streams %d opened, %d were busy, %d failed otherwise; want %d, %d, 0",
			streams, open.Load(), busy.Load(), other.Load(), maxStreams, streams-maxStreams)
	}

	// Idle connections, far more than the cap: some silent, some kept
	// alive after a request.
	const idle = 3000
	mostFDs := 0
	for i := range idle {
		c, err := dial()
		if err != nil {
			t.Fatalf("dial after %d idle connections: %v", i, err)
		}
		if i%4 == 0 {
			c.SetDeadline(time.Now().Add(60 * time.Second))
			fmt.Fprint(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				io.Copy(io.Discard, resp.Body)
			}
		}
		if i%100 == 0 {
			mostFDs = max(mostFDs, fdCount(t, pid))
		}
	}
	mostFDs = max(mostFDs, fdCount(t, pid))

	// Meanwhile: health, a stream over the cap, and a first read.
	c := newAPIClient(e.home)
	within(t, 30*time.Second, "GET /v1/health with the socket flooded", func() error {
		var h struct{ OK bool }
		c.get(t, "/v1/health", &h)
		if !h.OK {
			return errors.New("not ok")
		}
		return nil
	})
	within(t, 30*time.Second, "a stream over the cap", func() error {
		resp, err := c.hc.Get("http://skillfs/v1/events")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		c.conform(t)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"busy"`) {
			return fmt.Errorf("%s, Retry-After %q: %s; want 503 busy with Retry-After", resp.Status, resp.Header.Get("Retry-After"), body)
		}
		return nil
	})
	within(t, 30*time.Second, "a first read of SKILL.md through the session's mount", func() error {
		got, err := os.ReadFile(manifest)
		if err == nil && !strings.Contains(string(got), "slug: commit-messages") {
			err = fmt.Errorf("wrong content %q", got)
		}
		return err
	})
	if a := e.activationsOf(s.ID); a.opens("commit-messages") != 1 {
		t.Errorf("the first read was not recorded: %+v", a)
	}
	scrape := c.scrape(t)
	closedIdle := scrape[`skillfs_api_idle_connections_closed_total{listener="socket"}`]
	t.Logf("daemon (open file limit %d): %d descriptors before, at most %d during %d idle connections and %d streams (cap %d); "+
		"%d idle connections closed to make room; RSS %d MiB now (VmHWM %d MiB)",
		fileLimit, baseFDs, mostFDs, idle, maxStreams, fileLimit-fdReserve, int(closedIdle),
		vmKB(pid, "VmRSS")>>10, vmKB(pid, "VmHWM")>>10)
	if mostFDs > baseFDs+(fileLimit-fdReserve)+16 {
		t.Fatalf("the daemon held %d descriptors, %d before: the cap of %d connections did not hold", mostFDs, baseFDs, fileLimit-fdReserve)
	}
	if closedIdle == 0 {
		t.Errorf("no idle connection was closed to make room: %v", scrape)
	}
	if got := scrape[`skillfs_event_streams{listener="socket"}`]; got != maxStreams {
		t.Errorf("skillfs_event_streams = %v, want %d", got, maxStreams)
	}

	// Everything let go: the daemon is back where it was.
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	mu.Unlock()
	c.hc.CloseIdleConnections()
	var after int
	within(t, 30*time.Second, "the connections let go", func() error {
		for {
			names, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
			if err != nil {
				return err
			}
			if after = len(names); after <= baseFDs+16 {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Logf("once the clients left: %d descriptors", after)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := e.command(ctx, "session", "show", s.ID).CombinedOutput(); err != nil {
		t.Fatalf("session show after the flood: %v: %s", err, out)
	}
}
