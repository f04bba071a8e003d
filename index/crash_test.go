package index

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"skillfs/index/pgtest"
	"skillfs/skills"
)

// The crash tests run this test binary again as a child process that plays
// a second daemon: it does its part against the index and then dies, by
// SIGKILL, in the middle of its work.
const (
	childModeEnv = "SKILLFS_INDEX_TEST_CHILD"
	childDBEnv   = "SKILLFS_INDEX_TEST_DB"
	childArgEnv  = "SKILLFS_INDEX_TEST_ARG"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		if err := runChild(mode, os.Getenv(childDBEnv), os.Getenv(childArgEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	pgtest.Main(m)
}

// runChild is the child side of the crash and multi-process tests.
func runChild(mode, path, arg string) error {
	ctx := context.Background()
	db, err := Open(path)
	if err != nil {
		return err
	}
	switch mode {
	case "crash-mid-write":
		// A small page cache makes SQLite spill the uncommitted pages into
		// the WAL before the commit, so the crash leaves them on disk.
		if _, err := db.w.Exec("PRAGMA cache_size = -64"); err != nil {
			return err
		}
		tx, err := db.w.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO skills (`+skillColumns+`)
			VALUES ('partial', 'Partial', ?, 'upload', '', '{}', 1, '[]', '[]', '[]', 'h', '', NULL, NULL, '')`,
			strings.Repeat("x", 4<<20)); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO versions (slug, hash, path, source_type, source, installer, files, bytes)
			VALUES ('partial', 'h', 'store/partial', 'upload', '', '', 1, 1)`); err != nil {
			return err
		}
		for i := range 2000 {
			if _, err := tx.Exec("INSERT INTO activations (session, slug, first_at, last_at, opens, seq) VALUES ('s1', ?, 1, 1, 1, ?)",
				fmt.Sprintf("partial-%d", i), 1000+i); err != nil {
				return err
			}
		}
		fmt.Println("written")
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "record-loop":
		// Report each activation once RecordActivation has returned; the
		// parent kills this process at an arbitrary point.
		for i := 0; ; i++ {
			if _, err := db.RecordActivation(ctx, "s1", fmt.Sprintf("k%06d", i), time.Now()); err != nil {
				return err
			}
			fmt.Println(i)
		}
	case "insert-race":
		// Wait for the parent's go signal so the children start together.
		for {
			if _, err := os.Stat(arg); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		s, v := testSkill("contested"), testVersion("contested", fmt.Sprintf("h-%d", os.Getpid()))
		s.Creator = v.Hash
		err := db.InsertSkill(ctx, s, v)
		switch {
		case err == nil:
			fmt.Println("won", v.Hash)
		case errors.Is(err, skills.ErrExists):
			fmt.Println("exists")
		default:
			return err
		}
		return db.Close()
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// startChild starts this test binary as a child in mode against the index
// at path and returns it with a reader of its standard output.
func startChild(t testing.TB, mode, path, arg string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childDBEnv+"="+path, childArgEnv+"="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, bufio.NewScanner(out)
}

// wantKilled fails the test unless cmd died of SIGKILL.
func wantKilled(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child exited with %v, want SIGKILL", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child exited with %v, want SIGKILL", err)
	}
}

// checkIntegrity fails the test unless the index passes its check and, on
// SQLite, the integrity and foreign key checks of the whole file.
func checkIntegrity(t testing.TB, db *DB) {
	t.Helper()
	if err := db.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if db.Backend() != "sqlite" {
		return
	}
	var res string
	if err := db.r.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	if res != "ok" {
		t.Fatalf("integrity_check: %s", res)
	}
	rows, err := db.r.Query("PRAGMA foreign_key_check")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if rows.Next() {
		t.Fatal("foreign key violations after crash")
	}
}

// TestCrashMidTransaction kills a writer after it has written a large
// uncommitted transaction into the WAL; reopening must roll it back and
// keep everything committed before. SQLite only: it is about the file.
func TestCrashMidTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	ctx := context.Background()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	insertSkill(t, db, "kept", "h1")
	addSessionUsers(t, db)
	createSessions(t, db, "s1")
	if _, err := db.RecordActivation(ctx, "s1", "kept", t0); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	cmd, out := startChild(t, "crash-mid-write", path, "")
	if !out.Scan() || out.Text() != "written" {
		t.Fatalf("child did not write: %q %v", out.Text(), out.Err())
	}
	wantKilled(t, cmd)
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 1<<20 {
		t.Fatalf("WAL is %d bytes: the uncommitted transaction never reached the disk, so the crash tested nothing", st.Size())
	}

	db = openAt(t, path)
	checkIntegrity(t, db)
	_, err = db.Skill(ctx, "partial")
	wantErr(t, "partial skill", err, skills.ErrNotFound)
	if _, err := db.Skill(ctx, "kept"); err != nil {
		t.Fatalf("committed skill lost: %v", err)
	}
	acts, err := db.Activations(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "activations", acts, []skills.Activation{{Session: "s1", Slug: "kept", FirstAt: t0, LastAt: t0, Opens: 1}})
	// And it still takes writes.
	insertSkill(t, db, "partial", "h2")
}

// TestCrashDuringActivations kills a process that records activations as
// fast as it can. Every activation it reported (RecordActivation returned)
// must be in the index, and the commits are whole: the recorded slugs are
// exactly k000000..kN with no gap.
func TestCrashDuringActivations(t *testing.T) { forEachBackend(t, testCrashDuringActivations) }

func testCrashDuringActivations(t *testing.T, b backend) {
	path := b.target(t)
	ctx := context.Background()
	db := openAt(t, path)
	createSessions(t, db, "s1")

	cmd, out := startChild(t, "record-loop", path, "")
	reported := -1
	for reported < 200 && out.Scan() {
		n, err := strconv.Atoi(out.Text())
		if err != nil {
			t.Fatalf("child said %q", out.Text())
		}
		reported = n
	}
	if reported < 200 {
		t.Fatalf("child stopped after %d activations: %v", reported, out.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantKilled(t, cmd)

	checkIntegrity(t, db)
	acts, err := db.Activations(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) <= reported {
		t.Fatalf("%d activations in the index, but the child reported %d as recorded", len(acts), reported+1)
	}
	for i, a := range acts {
		if want := fmt.Sprintf("k%06d", i); a.Slug != want || a.Opens != 1 {
			t.Fatalf("activation %d is %s with %d opens, want %s once", i, a.Slug, a.Opens, want)
		}
	}
	t.Logf("child reported %d activations, index holds %d", reported+1, len(acts))
}

// TestInsertSkillRaceAcrossProcesses races InsertSkill for one slug from
// several processes: exactly one wins, the others get ErrExists.
func TestInsertSkillRaceAcrossProcesses(t *testing.T) {
	forEachBackend(t, testInsertSkillRaceAcrossProcesses)
}

func testInsertSkillRaceAcrossProcesses(t *testing.T, b backend) {
	path := b.target(t)
	goFile := filepath.Join(t.TempDir(), "go")
	openAt(t, path) // migrated before the children start
	const children = 4
	type child struct {
		cmd *exec.Cmd
		out *bufio.Scanner
	}
	var cs []child
	for range children {
		cmd, out := startChild(t, "insert-race", path, goFile)
		cs = append(cs, child{cmd, out})
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	winner := ""
	for i, c := range cs {
		if !c.out.Scan() {
			t.Fatalf("child %d said nothing: %v", i, c.out.Err())
		}
		line := c.out.Text()
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		switch {
		case strings.HasPrefix(line, "won ") && winner == "":
			winner = strings.TrimPrefix(line, "won ")
		case line == "exists":
		default:
			t.Fatalf("child %d said %q (winner so far %q)", i, line, winner)
		}
	}
	if winner == "" {
		t.Fatal("no child won")
	}
	db := openAt(t, path)
	s, err := db.Skill(context.Background(), "contested")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := db.Versions(context.Background(), "contested")
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != winner || s.Creator != winner || len(vs) != 1 {
		t.Fatalf("stored %s by %s with %d versions, want only the winner %s", s.Version, s.Creator, len(vs), winner)
	}
}
