package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
	"skillfs/skills/manifest"
)

// attackDaemon is a daemon with a session whose one skill has the most
// globs a SKILL.md may have, each made of the glob of the form given with
// a count of 'a' in it from 0 up, all distinct; the glob's form is that
// count's string in the glob.
func attackDaemon(t testing.TB, form func(n int) string) (*Daemon, *api.SessionInfo, []string) {
	t.Helper()
	d := newTestDaemon(t)
	globs := make([]string, manifest.MaxGlobs)
	for i := range globs {
		globs[i] = form(i)
		if err := manifest.CheckGlob(globs[i]); err != nil {
			t.Fatalf("glob %d: %v", i, err)
		}
	}
	install(t, d, "name: attack\ndescription: many long globs\nglobs: ['"+strings.Join(globs, "', '")+"']", skills.ScopeGlobal)
	info, err := d.CreateSession(context.Background(), api.CreateRequest{User: catalog.Operator, All: true})
	if err != nil {
		t.Fatal(err)
	}
	return d, info, globs
}

// lastChunkGlob is a glob of 64 alternatives ending in a literal after a
// star, n+1 bytes short of the longest: path.Match tries that literal at
// every offset of a segment.
func lastChunkGlob(n int) string {
	return "*" + strings.Repeat("{a,b}", 6) + strings.Repeat("a", manifest.MaxGlobLen-33-n) + "c"
}

// middleClassGlob is a glob with classes between two stars: tried at every
// offset.
func middleClassGlob(n int) string {
	return "*" + strings.Repeat("[a]", 80-n) + "c*"
}

// sessionCost is what the globs of the session's skills cost for paths.
func sessionCost(t testing.TB, d *Daemon, id string, paths []string) int64 {
	t.Helper()
	s, err := d.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := d.promptEntries(context.Background(), s, d.viewFS(s), true)
	if err != nil {
		t.Fatal(err)
	}
	var globs [][]*manifest.Glob
	for _, e := range entries {
		var gs []*manifest.Glob
		for _, g := range e.m.Globs {
			c, err := manifest.CompileGlob(g)
			if err != nil {
				t.Fatal(err)
			}
			gs = append(gs, c)
		}
		globs = append(globs, gs)
	}
	var cells, bytes int64
	for _, p := range paths {
		segs := skills.SplitSlash(p)
		cells += int64(len(segs) + 1)
		bytes += int64(len(strings.Join(segs, "")))
	}
	cost, _ := globsCost(globs, cells, bytes)
	return cost
}

// TestGlobsAttack: the attack of 64 globs of 64 alternatives each against
// 255 paths of 4,096 'a' (under the body's cap) is refused before any
// matching, as a path segment over 255 bytes; the same bytes cut into
// segments of 255 are refused for their cost; a path of them that fits
// is answered, within the budget.
func TestGlobsAttack(t *testing.T) {
	ctx := context.Background()
	d, info, globs := attackDaemon(t, lastChunkGlob)
	if n := len(globs); n != manifest.MaxGlobs {
		t.Fatalf("%d globs", n)
	}
	long := make([]string, 255)
	for i := range long {
		long[i] = strings.Repeat("a", api.MaxGlobPathLen)
	}
	if _, err := d.Globs(ctx, info.ID, long); !errors.Is(err, skills.ErrInvalid) || !strings.Contains(err.Error(), "path 1: segment 1 is 4096 bytes long, over 255") {
		t.Fatalf("the attack: %v, want refused for its segment", err)
	}
	cut := make([]string, 255)
	for i := range cut {
		cut[i] = strings.Repeat(strings.Repeat("a", api.MaxGlobSegmentLen)+"/", 16)
	}
	if cost := sessionCost(t, d, info.ID, cut); cost <= maxGlobCost {
		t.Fatalf("255 paths of 16 segments cost %d, within the budget", cost)
	}
	if _, err := d.Globs(ctx, info.ID, cut); !errors.Is(err, skills.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("over %d steps", maxGlobCost)) {
		t.Fatalf("255 paths of 16 segments: %v, want refused for their cost", err)
	}
	one := cut[:1]
	if cost := sessionCost(t, d, info.ID, one); cost > maxGlobCost || cost > 64*64*(manifest.MaxGlobLen+8)*17 {
		t.Fatalf("one path of 16 segments costs %d, over the budget %d or the globs' size times its 17 cells", cost, maxGlobCost)
	}
	g, err := d.Globs(ctx, info.ID, one)
	if err != nil || len(g.Paths) != 1 || len(g.Paths[0].Skills) != 0 {
		t.Fatalf("one path of 16 segments: %+v, %v; want answered, no skill", g, err)
	}
	// a^200 c matches the globs of 194 'a' or fewer (with the six of the
	// braces), and only those.
	want := 0
	for _, g := range globs {
		if strings.Count(g, "a") <= 200 {
			want++
		}
	}
	hit := strings.Repeat("a", 200) + "c"
	if g, err := d.Globs(ctx, info.ID, []string{hit}); err != nil || len(g.Paths[0].Skills) != 1 || len(g.Paths[0].Skills[0].Globs) != want || want == 0 || want == len(globs) {
		t.Fatalf("a^200 c: %v, %d skills; want the %d globs of 194 'a' or fewer", err, len(g.Paths[0].Skills), want)
	}

	// Classes between stars cost for each byte they are tried on.
	d, info, _ = attackDaemon(t, middleClassGlob)
	two := []string{cut[0], cut[0]}
	if cost := sessionCost(t, d, info.ID, two); cost <= maxGlobCost {
		t.Fatalf("two paths of 16 segments against classes cost %d, within the budget", cost)
	}
	if _, err := d.Globs(ctx, info.ID, two); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("two paths of 16 segments against classes: %v, want refused for their cost", err)
	}
	if cost := sessionCost(t, d, info.ID, one); cost > maxGlobCost {
		t.Fatalf("one path of 16 segments against classes costs %d, over the budget", cost)
	}
	if g, err := d.Globs(ctx, info.ID, one); err != nil || len(g.Paths[0].Skills) != 0 {
		t.Fatalf("one path of 16 segments against classes: %+v, %v; want answered, no skill", g, err)
	}
}

// TestGlobsBusy: a session and its sub-agents run at most globsPerSession
// globs requests at once; one more is answered 503 busy with Retry-After,
// and counted; once one ends, the next is answered. A cancelled request
// stops.
func TestGlobsBusy(t *testing.T) {
	ctx := context.Background()
	d, info := turnDaemon(t)
	child, err := d.CreateSession(ctx, api.CreateRequest{Parent: info.ID})
	if err != nil {
		t.Fatal(err)
	}
	var leaves []func()
	for range globsPerSession {
		leave, err := d.globs.enter(info.ID)
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, leave)
	}
	client := apitest.NewChecked(t, d.http.Handler(""))
	js := apitest.Header("Content-Type", "application/json")
	for _, id := range []string{info.ID, child.ID} {
		code, hdr, body := client.Send("POST", "/v1/sessions/"+id+"/globs", js, []byte(`{"paths":["a.ts"]}`))
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "1" || apitest.ErrorCode(body) != "busy" {
			t.Fatalf("globs of %s with its tree's places taken: %d, Retry-After %q, %s; want 503 busy", id, code, hdr.Get("Retry-After"), body)
		}
	}
	if _, err := d.Globs(ctx, child.ID, []string{"a.ts"}); !errors.Is(err, skills.ErrBusy) {
		t.Fatalf("the child's globs: %v, want busy", err)
	}
	leaves[0]()
	if g, err := d.Globs(ctx, child.ID, []string{"a.ts"}); err != nil || len(g.Paths[0].Skills) != 1 {
		t.Fatalf("the child's globs with a place free: %+v, %v", g, err)
	}
	leaves[1]()
	if n := len(d.globs.running); n != 0 || d.globs.all != 0 {
		t.Errorf("%d trees, %d requests still counted", n, d.globs.all)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Globs(cancelled, info.ID, []string{"a.ts"}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled request: %v", err)
	}
}

// BenchmarkGlobsWorst runs the costliest globs request the budget lets
// through: 64 globs of classes between stars against as many segments of
// 255 'a' as fit in it. It reports their cost (at most maxGlobCost).
func BenchmarkGlobsWorst(b *testing.B) {
	ctx := context.Background()
	d, info, _ := attackDaemon(b, middleClassGlob)
	seg := strings.Repeat("a", api.MaxGlobSegmentLen)
	var paths []string
	for {
		more := append(paths, seg)
		if sessionCost(b, d, info.ID, more) > maxGlobCost {
			break
		}
		paths = more
	}
	for b.Loop() {
		if _, err := d.Globs(ctx, info.ID, paths); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(sessionCost(b, d, info.ID, paths)), "cost/op")
	b.ReportMetric(float64(len(paths)), "paths/op")
}
