package fs

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// TestJournal: what the journal is told comes back on reading it; drops
// remove owners; a rewrite keeps the live ones and the highest id.
func TestJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), journalName)
	next := uint64(0)
	j, err := openJournal(path, journalState{}, func() uint64 { return next }, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	j.add(journalRec{Op: recSession, ID: 1, Gen: 7, Session: "s1"})
	j.add(journalRec{Op: recGrant, ID: 2, Gen: 8, Session: "s1", Slug: "alpha", Dir: "/store/alpha/a1", Version: "a1"})
	j.add(journalRec{Op: recGrant, ID: 3, Gen: 9, Session: "s1", Slug: "beta", Dir: "/store/beta/b1", Version: "b1"})
	j.node(1, 0, true)
	j.node(3, 1, true)
	j.node(3, 4, true)
	j.node(3, 4, true) // once is enough
	j.node(3, 1, false)
	j.node(2, 2, true)
	j.node(2, 2, false)
	j.drop(2)
	next = 3
	read := func() journalState {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, err := readJournal(f)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := read()
	if ids := slices.Sorted(maps.Keys(st.owners)); !slices.Equal(ids, []uint64{1, 3}) || st.maxID != 3 {
		t.Fatalf("owners %v, max %d", ids, st.maxID)
	}
	if g := st.owners[3]; g.Slug != "beta" || g.Gen != 9 || g.Dir != "/store/beta/b1" {
		t.Errorf("grant read back as %+v", g)
	}
	wantSeen := map[uint64]map[uint64]bool{1: {0: true}, 3: {4: true}}
	if !maps.EqualFunc(st.seen, wantSeen, maps.Equal) || st.held() != 2 {
		t.Errorf("nodes held %v, want %v", st.seen, wantSeen)
	}
	// A rewrite (as a resumed server makes) keeps them, and the counter.
	next = 40
	j.close()
	j, err = openJournal(path, st, func() uint64 { return next }, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.close()
	if st2 := read(); !maps.Equal(st2.owners, st.owners) || st2.maxID != 40 || !maps.EqualFunc(st2.seen, wantSeen, maps.Equal) {
		t.Errorf("after a rewrite: %v %v max %d, want %v %v max 40", st2.owners, st2.seen, st2.maxID, st.owners, wantSeen)
	}
}

// TestJournalCompacts: many owners made and dropped leave a journal of
// about the live ones.
func TestJournalCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), journalName)
	var next uint64
	j, err := openJournal(path, journalState{}, func() uint64 { return next }, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	for range 20000 {
		next++
		j.add(journalRec{Op: recSession, ID: next, Gen: 1, Session: "s"})
		if next%10 != 0 {
			j.drop(next)
		}
	}
	j.close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Count(b, []byte("\n"))
	if lines > 2*2000+4096+2 {
		t.Errorf("%d lines for 2000 owners", lines)
	}
	st, err := readJournal(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.owners) != 2000 || st.maxID != 20000 {
		t.Errorf("%d owners, max %d; want 2000, 20000", len(st.owners), st.maxID)
	}
}

// TestJournalRefuses: a journal that cannot be trusted is refused with the
// line at fault; a last line cut short is not one.
func TestJournalRefuses(t *testing.T) {
	cases := map[string]string{
		"not json":      "nope\n",
		"unknown field": `{"op":"session","id":1,"gen":1,"session":"s","x":1}` + "\n",
		"no generation": `{"op":"session","id":1,"session":"s"}` + "\n",
		"id zero":       `{"op":"session","id":0,"gen":1,"session":"s"}` + "\n",
		"id too large":  `{"op":"drop","id":1099511627776}` + "\n",
		"made twice":    `{"op":"session","id":1,"gen":1,"session":"s"}` + "\n" + `{"op":"session","id":1,"gen":1,"session":"s"}` + "\n",
		"drop unknown":  `{"op":"drop","id":5}` + "\n",
		"bad slug":      `{"op":"grant","id":2,"gen":1,"session":"s","slug":"a/b","dir":"/d","version":"v"}` + "\n",
		"relative dir":  `{"op":"grant","id":2,"gen":1,"session":"s","slug":"a","dir":"d","version":"v"}` + "\n",
		"long line":     strings.Repeat(" ", maxJournalLine+1) + "\n",
		"unknown op":    `{"op":"what","id":2}` + "\n",
		"seen unknown":  `{"op":"seen","id":2,"entry":1}` + "\n",
		"seen too far":  `{"op":"session","id":1,"gen":1,"session":"s"}` + "\n" + `{"op":"seen","id":1,"entry":16777216}` + "\n",
		"session entry": `{"op":"session","id":1,"gen":1,"session":"s"}` + "\n" + `{"op":"seen","id":1,"entry":3}` + "\n",
	}
	for name, in := range cases {
		_, err := readJournal(strings.NewReader(in))
		if !errors.Is(err, skills.ErrInvalid) && !errors.Is(err, skills.ErrLimit) {
			t.Errorf("%s: %v", name, err)
		} else if !strings.Contains(err.Error(), "line") {
			t.Errorf("%s: %v does not name the line", name, err)
		}
	}
	st, err := readJournal(strings.NewReader(`{"op":"session","id":1,"gen":1,"session":"s"}` + "\n" + `{"op":"drop","i`))
	if err != nil || len(st.owners) != 1 {
		t.Errorf("a line cut short: %v %v", st.owners, err)
	}
}

func FuzzJournal(f *testing.F) {
	f.Add([]byte(`{"op":"next","id":4}` + "\n" + `{"op":"session","id":1,"gen":1,"session":"s"}` + "\n" +
		`{"op":"grant","id":2,"gen":3,"session":"s","slug":"a","dir":"/d","version":"v"}` + "\n" + `{"op":"drop","id":1}` + "\n"))
	f.Add([]byte(`{"op":"session","id":1,"gen":1,"session":"s"}` + "\n" + `{"op":"seen","id":1}` + "\n" +
		`{"op":"unseen","id":1}` + "\n" + `{"op":"seen","id":1}` + "\n"))
	f.Add([]byte("{}\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := readJournal(bytes.NewReader(data))
		if err != nil {
			return
		}
		// What was read is written back as a journal reading the same.
		var b bytes.Buffer
		for _, rec := range st.owners {
			if rec.ID > st.maxID {
				t.Fatalf("owner %d above the highest id %d", rec.ID, st.maxID)
			}
			line, _ := json.Marshal(rec)
			b.Write(append(line, '\n'))
			for slot := range st.seen[rec.ID] {
				line, _ := json.Marshal(journalRec{Op: recSeen, ID: rec.ID, Entry: slot})
				b.Write(append(line, '\n'))
			}
		}
		for id := range st.seen {
			if _, ok := st.owners[id]; !ok {
				t.Fatalf("nodes held of owner %d, not in the table", id)
			}
		}
		again, err := readJournal(&b)
		if err != nil || !maps.Equal(again.owners, st.owners) || again.held() != st.held() {
			t.Fatalf("round trip: %v, %v", again.owners, err)
		}
	})
}

func FuzzParseState(f *testing.F) {
	init := make([]byte, inHeaderSize+64)
	init[0], init[4] = byte(len(init)), opInit
	reply := make([]byte, outHeaderSize+64)
	reply[0] = byte(len(reply))
	good, _ := json.Marshal(mountState{Format: stateFormat, Mountpoint: "/m", Dev: "0:42", Options: "o",
		InitRequest: init, InitReply: reply, Timeout: 60e9})
	f.Add(good)
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`{}{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseState(data)
		if err != nil {
			return
		}
		// Whatever parses holds an INIT exchange of the right shape.
		if checkInitRequest(st.InitRequest) != nil || checkInitReply(st.InitReply) != nil || !filepath.IsAbs(st.Mountpoint) {
			t.Fatalf("accepted %+v", st)
		}
	})
}

// TestTreeIndexStable: a version tree's indices, which node ids carry
// across processes (a resumed server serves the ids the previous one
// handed out), depend only on the directory's content: entries are
// numbered breadth first, each directory's children in name order
// (os.ReadDir sorts), whatever order the files were made in. Versions are
// immutable, so every process walking one numbers it alike.
func TestTreeIndexStable(t *testing.T) {
	files := fstest.MapFS{
		"z.txt": skilltest.File("z"), "a.txt": skilltest.File("a"), "m/b.txt": skilltest.File("b"),
		"m/a/x": skilltest.File("x"), "SKILL.md": skilltest.File(manifest("t", "t")), "b/c": skilltest.File("c"),
	}
	dir1 := writeVersion(t, filepath.Join(t.TempDir(), "v"), files)
	dir2 := writeVersion(t, filepath.Join(t.TempDir(), "v"), files)
	t1, _, err := buildTree(dir1)
	if err != nil {
		t.Fatal(err)
	}
	t2, _, err := buildTree(dir2)
	if err != nil {
		t.Fatal(err)
	}
	var rels1, rels2 []string
	for i := range t1.entries {
		rels1 = append(rels1, t1.entries[i].rel)
	}
	for i := range t2.entries {
		rels2 = append(rels2, t2.entries[i].rel)
	}
	want := []string{"", "SKILL.md", "a.txt", "b", "m", "z.txt", "b/c", "m/a", "m/b.txt", "m/a/x"}
	if !slices.Equal(rels1, want) || !slices.Equal(rels2, want) {
		t.Errorf("indices %q and %q, want %q", rels1, rels2, want)
	}
}
