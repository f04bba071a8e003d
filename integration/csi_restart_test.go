package integration

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"
)

// firstActivation waits until session id's csiProbe is activated and
// returns when it first was.
func (n *csiNode) firstActivation(id string) time.Time {
	n.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, r := range n.activations(id).Activated {
			if r.Slug == csiProbe {
				return r.FirstAt
			}
		}
	}
	n.t.Fatalf("session %s: %s not activated within 10s", id, csiProbe)
	return time.Time{}
}

// TestCSIDaemonRestartsUnderKeeper: with the daemon's FUSE connection held
// by a keeper, a pod's agent reading in a loop goes on through a kill -9 of
// the daemon, a kill -9 of the plugin and the daemon together, and a
// SIGTERM of the daemon, each followed by a restart: every read returns the
// right bytes (none fails, none answers ENOTCONN), the api volume's socket
// answers again, the activations are exactly what they were, and nothing
// is bound again. The agent's longest pause across each restart is logged.
func TestCSIDaemonRestartsUnderKeeper(t *testing.T) {
	n := startKeptCSINode(t)
	p, s, c := n.podReading()
	c.assertNoFailure("before the restarts")
	first := n.firstActivation(s.ID)

	var restarting time.Time // when the restart of a daemon down for a while began
	for _, r := range []struct {
		name    string
		restart func() (down, up time.Time) // stops and starts again: when it went down, when it was ready
		// waited: the agent surely waited on the daemon while it was down,
		// with a read under way when it came back.
		waited bool
	}{
		{"kill -9 of the daemon", func() (time.Time, time.Time) {
			n.d.kill()
			down := time.Now()
			n.restartDaemon()
			return down, time.Now()
		}, false},
		{"kill -9 of the daemon, down for a second", func() (time.Time, time.Time) {
			n.d.kill()
			down := time.Now()
			time.Sleep(time.Second) // as a service manager's restart delay
			restarting = time.Now()
			n.restartDaemon()
			return down, time.Now()
		}, true},
		{"kill -9 of the plugin and the daemon", func() (time.Time, time.Time) {
			n.plugin.kill()
			n.d.kill()
			down := time.Now()
			n.restartDaemon()
			up := time.Now()
			n.restartPlugin()
			return down, up
		}, false},
		{"SIGTERM of the daemon", func() (time.Time, time.Time) {
			down := time.Now()
			if code := n.d.stop(); code != 0 {
				t.Fatalf("SIGTERM: exit %d\n%s", code, n.d.logs())
			}
			n.restartDaemon()
			return down, time.Now()
		}, false},
	} {
		down, up := r.restart()
		c.waitReads(300, 60*time.Second)
		c.assertNoFailure("after " + r.name)
		t.Logf("%s: the agent's longest pause %v (the daemon ready again %v after it went down; reads under way when it went down: %d, each answered right)",
			r.name, c.longestPause(down, time.Now()).Round(time.Millisecond), up.Sub(down).Round(time.Millisecond), c.across(down))
		if r.waited && c.across(restarting) == 0 {
			t.Fatalf("%s: no read of the agent was under way when the daemon started again: it read without the daemon", r.name)
		}
		var who struct{ Session string }
		if code, body := c.curl("/v1/whoami"); code != 200 || json.Unmarshal([]byte(body), &who) != nil || who.Session != s.ID {
			t.Fatalf("after %s: whoami on the pod's socket: %d %s", r.name, code, body)
		}
		a := n.activations(s.ID)
		if !slices.Equal(a.slugs(), []string{csiProbe}) || !a.Activated[0].FirstAt.Equal(first) {
			t.Fatalf("after %s: activations %+v, want %s alone, first at %v", r.name, a.Activated, csiProbe, first)
		}
		// The kubelet's publish again (after a plugin restart, its
		// reconciler's) finds the session as it was, nothing bound anew.
		n.publishPod(p, true)
		if again := n.sessionOf(p); again.ID != s.ID || !slices.Equal(bindTargets(again), bindTargets(s)) {
			t.Fatalf("after %s: the pod's session %+v, want %s bound at %q", r.name, again, s.ID, bindTargets(s))
		}
	}
	c.stop()
	c.assertNoFailure("after the restarts")
	if a := n.activations(s.ID); a.opens(csiProbe) < 1 || a.opens(csiProbe) > c.opened(probeManifest) {
		t.Fatalf("activations %+v: %s read %d times by the agent; more counted than read, or none", a.Activated, probeManifest, c.opened(probeManifest))
	}
	n.unpublishPod(p, true)
	n.assertClean("after unpublish")
	// A real stop (SIGINT) ends the mount, with the keeper's duplicate of
	// its connection.
	n.d.cmd.Process.Signal(os.Interrupt)
	<-n.d.done
	if code := n.d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("SIGINT: exit %d\n%s", code, n.d.logs())
	}
	if m := mountedUnder(t, n.e.home); len(m) > 0 {
		t.Fatalf("after the daemon's SIGINT (a real stop, keeper or not) still mounted: %v\n%s", m, n.d.logs())
	}
}
