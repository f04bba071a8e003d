package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestResumeChurn: sessions come and go across several resumes; once they
// are gone and the kernel forgot their nodes, neither the journal nor the
// node table of the next server holds any of their owners: what a resumed
// server holds follows what the kernel holds, not how many restarts the
// connection lived through.
func TestResumeChurn(t *testing.T) {
	st := newStore(t)
	keep := map[string]View{"s1": {st.alpha1, st.beta1}}
	s := newServers(t, keep)
	s.start()
	mnt := s.cfg.Mnt
	journal := func() journalState {
		t.Helper()
		f, err := os.Open(filepath.Join(s.cfg.StateDir, journalName))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		js, err := readJournal(f)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	// others counts the owners of the journal of sessions other than s1,
	// and the nodes held of them.
	others := func(js journalState) (owners, held int) {
		for id, rec := range js.owners {
			if rec.Session != "s1" {
				owners++
				held += len(js.seen[id])
			}
		}
		return owners, held
	}
	v, _ := json.Marshal(View{st.alpha1, st.gamma1})
	const rounds = 4
	var prev string
	for i := range rounds {
		id := fmt.Sprintf("c%d", i)
		s.command("set " + id + " " + string(v))
		for _, p := range []string{id + "/alpha/SKILL.md", id + "/gamma/SKILL.md", "s1/beta/notes.txt"} {
			if _, err := os.ReadFile(filepath.Join(mnt, p)); err != nil {
				t.Fatal(err)
			}
		}
		if o, h := others(journal()); o == 0 || h == 0 {
			t.Fatalf("round %d: the journal holds %d owners of other sessions, %d nodes of them, after reading some", i, o, h)
		}
		s.kill()
		// The session of the round before does not come back.
		s.cfg.Sessions = map[string]View{"s1": keep["s1"], id: {st.alpha1, st.gamma1}}
		if c := s.start(); !c.resumed {
			t.Fatalf("round %d: not resumed", i)
		}
		prev = id
	}
	s.command("remove " + prev)
	// Forgotten: the kernel sends FORGETs of what it drops.
	dropCaches(t)
	var o, h int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if o, h = others(journal()); o == 0 {
			break
		}
	}
	js := journal()
	t.Logf("after %d rounds: %d owners in the journal (%d of other sessions, %d nodes of them held), %d nodes held in all: %v",
		rounds, len(js.owners), o, h, js.held(), js.owners)
	if o != 0 {
		t.Errorf("%d owners of sessions gone stay in the journal, %d nodes of them held: %v", o, h, js.owners)
	}
	s.kill()
	s.cfg.Sessions = keep
	c := s.start()
	if !c.resumed {
		t.Fatal("not resumed")
	}
	m := regexp.MustCompile(`resumed node ids".*owners=(\d+)`).FindStringSubmatch(c.log())
	if m == nil {
		t.Fatalf("the resumed server did not log its owners:\n%s", c.log())
	}
	if m[1] != fmt.Sprint(len(js.owners)) {
		t.Errorf("the resumed server holds %s owners, the journal %d", m[1], len(js.owners))
	}
	if len(js.owners) > 3 {
		t.Errorf("%d owners for one session of two skills", len(js.owners))
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "s1/beta/notes.txt")); err != nil {
		t.Error(err)
	}
	s.command("unmount")
}

// dropCaches makes the kernel drop the dentries and inodes it can, sending
// FORGETs of the nodes it held.
func dropCaches(t *testing.T) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Fatalf("drop caches: %v", err)
	}
}

// TestResumeBadGrantDir: a grant of the journal whose version directory is
// not an absolute clean path of a directory is revoked at once, no tree
// walked of it; the skill is served anew from the view.
func TestResumeBadGrantDir(t *testing.T) {
	st := newStore(t)
	s := newServers(t, map[string]View{"s1": {st.alpha1, st.beta1}})
	s.start()
	want, err := os.ReadFile(filepath.Join(s.cfg.Mnt, "s1/beta/notes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s.kill()
	path := filepath.Join(s.cfg.StateDir, journalName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(st.beta1.Dir)
	bad, _ := json.Marshal(st.beta1.Dir + "/../" + filepath.Base(st.beta1.Dir))
	if !bytes.Contains(b, old) {
		t.Fatalf("the journal does not name %s:\n%s", old, b)
	}
	if err := os.WriteFile(path, bytes.ReplaceAll(b, old, bad), 0o600); err != nil {
		t.Fatal(err)
	}
	c := s.start()
	if !c.resumed {
		t.Fatal("not resumed")
	}
	if got, err := os.ReadFile(filepath.Join(s.cfg.Mnt, "s1/beta/notes.txt")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("read after the resume: %q, %v; want %q", got, err, want)
	}
	if !strings.Contains(c.log(), "names no version directory") {
		t.Errorf("the bad grant was not reported:\n%s", c.log())
	}
	s.command("unmount")
}
