package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// indexSessions reads the session ids of the index file at p with the
// sqlite3 command, as an operator looking at the index would, and so with
// a client that on closing checkpoints and deletes the write-ahead log
// when it believes itself alone (as SQLite 3.40's does; newer ones also
// look at -shm's lock first): the one that deleted it under the daemon.
func indexSessions(t testing.TB, p string) []string {
	t.Helper()
	out, err := exec.Command(requireCommand(t, "sqlite3"), p, "SELECT id FROM sessions ORDER BY id").CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3 %s: %v\n%s", p, err, out)
	}
	return strings.Fields(string(out))
}

// inode is the inode of the file at p.
func inode(t testing.TB, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	return st.Ino
}

// The original failure: naming the index (or a file beside it, or the data
// directory) as a source made the daemon open and close the index file
// itself, which drops its POSIX locks; the next SQLite client to close the
// index (the sqlite3 command) deleted the write-ahead log under it, and
// the sessions it created afterwards were missing from the file. Every such
// source is refused, by the drafts API (as the operator, a superadmin) and
// by the CLI, and after each attempt — followed by `skillfs user list` and
// sqlite3 opening and closing the index — a session the daemon creates is
// in the index file, and the -wal is still the one the daemon opened.
func TestIndexNamedAsSourceKeepsWrites(t *testing.T) {
	ownIndexOnly(t, "the data directory's own SQLite file is what is named")
	e := newCatalogEnv(t)
	// The data directory lies in an import root, so that the drafts API
	// reads it, as far as the roots go: what refuses it is the fence.
	e.serve("--examples=false", "--import-root", filepath.Dir(e.home))
	e.ok("user", "add", "alice")
	notes := filepath.Join(t.TempDir(), "notes")
	writeSkill(t, notes, "name: notes\ndescription: alice's notes", map[string]string{"tips.md": "one\n"})
	e.ok("skill", "import", notes, "--as", "alice")
	idx := filepath.Join(e.home, "index.db")
	walIno := inode(t, idx+"-wal")
	link := filepath.Join(t.TempDir(), "index-link")
	if err := os.Symlink(idx, link); err != nil {
		t.Fatal(err)
	}
	api := newHostileAPI(e.home)

	var sessions []string
	newSession := func(t *testing.T) {
		var s sessionJSON
		e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "notes")
		sessions = append(sessions, s.ID)
	}
	draft := func(src string) func(t *testing.T) (int, string) {
		return func(t *testing.T) (int, string) {
			body, _ := json.Marshal(map[string]string{"source": src})
			a := api.send(t, "POST", "/v1/drafts", "operator", "application/json", nil, bytes.NewReader(body))
			return a.status, a.err.Error
		}
	}
	cli := func(args ...string) func(t *testing.T) (int, string) {
		return func(t *testing.T) (int, string) {
			r, _ := e.runBounded(hostileTimeout, nil, args...)
			return r.code, r.stdout + r.stderr
		}
	}
	for _, tc := range []struct {
		name, source string
		try          func(t *testing.T) (int, string)
		code         int
	}{
		{"POST /v1/drafts index.db", idx, draft(idx), 400},
		{"POST /v1/drafts index.db-wal", idx + "-wal", draft(idx + "-wal"), 400},
		{"POST /v1/drafts through a symlink", link, draft(link), 400},
		{"POST /v1/drafts the data directory", e.home, draft(e.home), 400},
		{"skill import index.db", idx, cli("skill", "import", idx), 5},
		{"skill import index.db-shm", idx + "-shm", cli("skill", "import", idx+"-shm"), 5},
		{"skill prepare index.db", idx, cli("skill", "prepare", idx), 5},
		{"skill validate index.db", idx, cli("skill", "validate", idx), 1},
		{"skill edit --from index.db", idx, cli("skill", "edit", "notes", "tips.md", "--from", idx, "--as", "alice"), 5},
		{"skill import the data directory's parent", filepath.Dir(e.home), cli("skill", "import", filepath.Dir(e.home), "--all"), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newSession(t)
			code, msg := tc.try(t)
			if code != tc.code {
				t.Errorf("answer %d, want %d:\n%s", code, tc.code, msg)
			}
			if !strings.Contains(msg, tc.source) || !strings.Contains(msg, "never") {
				t.Errorf("the refusal does not name the source and the rule:\n%s", msg)
			}
			if strings.Contains(msg, "SQLite format 3") {
				t.Errorf("the answer holds the index's bytes:\n%s", msg)
			}
			// Clients that open and close the index, as the one that deleted
			// the write-ahead log did; then a write of the daemon's.
			e.ok("user", "list")
			indexSessions(t, idx)
			newSession(t)
			if got := indexSessions(t, idx); !slices.Equal(got, sortedCopy(sessions)) {
				t.Fatalf("the index file holds sessions %q, want %q: the daemon's writes were lost", got, sessions)
			}
			if got := inode(t, idx+"-wal"); got != walIno {
				t.Fatalf("index.db-wal was replaced (inode %d, the daemon opened %d)", got, walIno)
			}
		})
	}
	var ready struct {
		Ready bool `json:"ready"`
	}
	if code := newAPIClient(e.home).do(t, "GET", "/v1/ready", "", nil, &ready); code != 200 || !ready.Ready {
		t.Errorf("ready after the attempts: %d %+v", code, ready)
	}
	t.Logf("index and data directory as sources: 10 tried (4 by the drafts API, 6 by the CLI), all refused; %d sessions created between them, all in the index file as sqlite3 reads it after each attempt, index.db-wal never replaced", len(sessions))
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// An index whose -wal is removed under a running daemon (as an operator
// tidying the data directory might) is reported: /v1/ready and `skillfs
// status` say the daemon is not ready, naming the file and what to do, and
// the watchdog, still pinging (an abort would lose what the daemon holds),
// tells the service manager. The clean stop the answer asks for writes the
// sessions the daemon created since into index.db.
func TestIndexFilesRemovedUnderTheDaemon(t *testing.T) {
	ownIndexOnly(t, "the data directory's own SQLite file is what is removed")
	e := newCatalogEnv(t)
	read := serviceManager(t)
	t.Setenv("WATCHDOG_USEC", "200000")
	d := e.serve("--examples=false")
	if got := read(10 * time.Second); !strings.HasPrefix(got, "READY=1\n") {
		t.Fatalf("first notification %q, want READY=1\n%s", got, d.logs())
	}
	var before sessionJSON
	e.okJSON(&before, "session", "create", "--user", "operator", "--all")
	idx := filepath.Join(e.home, "index.db")
	if err := os.Remove(idx + "-wal"); err != nil {
		t.Fatal(err)
	}

	a := newHostileAPI(e.home).send(t, "GET", "/v1/ready", "", "", nil, nil)
	for _, want := range []string{"index: ", idx + "-wal removed", "Restart the daemon with a clean stop", "Never delete or move"} {
		if a.status != 503 || !strings.Contains(a.err.Error, want) {
			t.Errorf("ready after -wal was removed: %s, want 503 saying %q", a, want)
		}
	}
	if out := e.ok("status"); !strings.Contains(out, "ready           NO (index: ") || !strings.Contains(out, "-wal removed") {
		t.Errorf("status does not say the daemon is not ready because of the index:\n%s", out)
	}
	told := ""
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && told == ""; {
		got := read(time.Second)
		if !strings.HasPrefix(got, "WATCHDOG=1") {
			continue
		}
		if _, status, ok := strings.Cut(got, "\nSTATUS="); ok {
			told = status
		}
	}
	if !strings.HasPrefix(told, "NOT READY: index: ") || !strings.Contains(told, "-wal removed") {
		t.Errorf("the watchdog told the service manager %q, want the index named", told)
	}
	if got := read(5 * time.Second); got != "WATCHDOG=1" {
		t.Errorf("after telling, the watchdog sends %q, want it to go on pinging", got)
	}
	if !strings.Contains(d.logs(), "not those the daemon has open") {
		t.Errorf("the log does not say it:\n%s", d.logs())
	}

	var after sessionJSON
	e.okJSON(&after, "session", "create", "--user", "operator", "--all")
	if code := d.stop(); code != 0 {
		t.Fatalf("clean stop: exit %d\n%s", code, d.logs())
	}
	got := indexSessions(t, idx)
	if !slices.Contains(got, before.ID) || !slices.Contains(got, after.ID) {
		t.Errorf("after the clean stop the index holds sessions %q, want %s (before the removal) and %s (after)", got, before.ID, after.ID)
	}
	t.Logf("-wal removed under a running daemon: ready 503 and status NOT ready naming it, the watchdog kept pinging with STATUS=%q; after a clean stop both sessions (before and after the removal) are in index.db", told)
}
