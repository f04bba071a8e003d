package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/server"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// TestDiffGate: comparisons are granted their bytes while the whole holds
// them; one that does not fit waits, then is refused busy with a
// Retry-After; one larger than the whole runs alone.
func TestDiffGate(t *testing.T) {
	refused := 0
	g := newDiffGate(10<<20, func() { refused++ })
	g.wait = 100 * time.Millisecond
	ctx := context.Background()
	first, err := g.Acquire(ctx, 6<<20)
	if err != nil || g.held.Load() != 6<<20 {
		t.Fatalf("a first comparison: %v, %d bytes held", err, g.held.Load())
	}
	_, err = g.Acquire(ctx, 6<<20)
	var b *server.BusyError
	if !errors.Is(err, skills.ErrBusy) || !errors.As(err, &b) || b.RetryAfter != diffRetry || refused != 1 {
		t.Fatalf("a second one past the whole: %v (refused %d); want busy", err, refused)
	}
	small, err := g.Acquire(ctx, 4<<20)
	if err != nil {
		t.Fatalf("one that fits beside it: %v", err)
	}
	small()
	granted := make(chan func(), 1)
	go func() {
		release, err := g.Acquire(context.Background(), 1<<30) // more than the whole: runs alone
		if err != nil {
			t.Error(err)
		}
		granted <- release
	}()
	select {
	case <-granted:
		t.Fatal("a comparison larger than the whole ran beside another")
	case <-time.After(50 * time.Millisecond):
	}
	first()
	select {
	case release := <-granted:
		if g.held.Load() != 10<<20 {
			t.Errorf("%d bytes held by the one alone, want the whole", g.held.Load())
		}
		release()
	case <-time.After(hang):
		t.Fatal("the large comparison never ran")
	}
	if g.held.Load() != 0 {
		t.Errorf("%d bytes held once all were released", g.held.Load())
	}
}

// TestDiffAnswer: the diff route answers, a file at a time, what
// Catalog.Diff gives, by the document; while the comparisons' memory is
// taken, it is answered 503 busy with Retry-After and counted.
func TestDiffAnswer(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	d.diffs = newDiffGate(64<<20, func() { d.metrics.http.Refused(server.LimitDiffs) })
	d.diffs.wait = 100 * time.Millisecond
	d.cat.LimitDiffs(d.diffs)
	src := filepath.Join(t.TempDir(), "notes")
	write := func(notes string) {
		skilltest.WriteDir(t, src, skilltest.Skill("name: notes\ndescription: x", "body\n", map[string]string{"notes.txt": notes}))
	}
	write(strings.Repeat("one\n", 100))
	if _, err := d.cat.Import(ctx, catalog.ImportRequest{Source: src}); err != nil {
		t.Fatal(err)
	}
	write(strings.Repeat("one\n", 50) + "two\n" + strings.Repeat("one\n", 49) + "<&>\x01\n")
	if _, err := d.cat.Import(ctx, catalog.ImportRequest{Source: src}); err != nil {
		t.Fatal(err)
	}
	want, err := d.cat.Diff(ctx, "", "notes", "", "")
	if err != nil {
		t.Fatal(err)
	}
	client := apitest.NewChecked(t, d.http.Handler(""))
	code, hdr, body := client.Send("GET", "/v1/skills/notes/diff", nil, nil)
	var got catalog.Diff
	if err := json.Unmarshal(body, &got); code != http.StatusOK || hdr.Get("Content-Type") != "application/json" || err != nil {
		t.Fatalf("GET diff: %d %s %v: %s", code, hdr.Get("Content-Type"), err, body)
	}
	if !reflect.DeepEqual(&got, want) || len(got.Files) != 1 || got.Files[0].Diff == "" {
		t.Fatalf("GET diff answered %+v, want %+v", got, want)
	}
	if held := d.diffs.held.Load(); held != 0 {
		t.Errorf("%d bytes still held after the answer", held)
	}

	release, err := d.diffs.Acquire(ctx, 64<<20) // every byte taken
	if err != nil {
		t.Fatal(err)
	}
	code, hdr, body = client.Send("GET", "/v1/skills/notes/diff", nil, nil)
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "3" || apitest.ErrorCode(body) != "busy" {
		t.Fatalf("GET diff with the memory taken: %d, Retry-After %q, %s; want 503 busy", code, hdr.Get("Retry-After"), body)
	}
	// A listing's diffstats wait the same way, and say why they are missing.
	vs, err := d.cat.Versions(ctx, "", "notes")
	if err != nil || len(vs) != 2 || vs[0].DiffStat != nil || !strings.Contains(vs[0].DiffStatError, "--diff-memory") {
		t.Fatalf("versions with the memory taken: %v %+v", err, vs)
	}
	release()
	if got := series(t, d.metrics)["skillfs_api_busy_total{limit=diff_memory}"]; got < 1 {
		t.Errorf("busy diffs counted: %v", got)
	}
	if code, _, _ = client.Send("GET", "/v1/skills/notes/diff", nil, nil); code != http.StatusOK {
		t.Errorf("GET diff once the memory is free: %d", code)
	}
}
