package daemon

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/server"
	"skillfs/skills"
	"skillfs/skills/manifest"
)

// maxGlobCost bounds the steps of one globs request (manifest.Glob.Cost:
// byte comparisons, rune decodings, class tests and cells of the segment
// tables), counted before any matching from the lengths of its paths and
// of the session's globs: under a tenth of a second of one core at the
// worst (BenchmarkGlobsWorst). A thousand paths of five segments against
// a hundred globs like **/*.ts cost some 7,000,000.
const maxGlobCost = 50_000_000

// Concurrent globs requests: at most globsPerSession of one session and
// its sub-agents' together, and globsPerDaemon in all (the daemon's cores,
// at least 2); one more is answered busy, to retry after globsRetry.
const (
	globsPerSession = 2
	globsRetry      = time.Second
)

var globsPerDaemon = max(2, runtime.GOMAXPROCS(0))

// globsGate counts the globs requests running, by top-level session.
type globsGate struct {
	mu      sync.Mutex
	running map[string]int
	all     int
}

// enter takes a place for a request of the session tree root, or refuses
// with a server.BusyError; leave gives it back.
func (g *globsGate) enter(root string) (leave func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.running[root] >= globsPerSession:
		return nil, &server.BusyError{RetryAfter: globsRetry, Msg: fmt.Sprintf(
			"globs: session %s and its sub-agents run %d globs requests already, as many as they may at once: try again later", root, globsPerSession)}
	case g.all >= globsPerDaemon:
		return nil, &server.BusyError{RetryAfter: globsRetry, Msg: fmt.Sprintf(
			"globs: the daemon runs %d globs requests already, as many as it may at once: try again later", globsPerDaemon)}
	}
	if g.running == nil {
		g.running = map[string]int{}
	}
	g.running[root]++
	g.all++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.all--
		if g.running[root]--; g.running[root] == 0 {
			delete(g.running, root)
		}
	}, nil
}

// Globs answers which of a session's readable skills apply to each of
// paths (api.Globs): those whose SKILL.md globs match it (manifest.MatchGlob).
// A path longer than api.MaxGlobPathLen, or with a segment longer than
// api.MaxGlobSegmentLen, and a request whose matching would cost over
// maxGlobCost steps, are refused before any matching is done; a request
// over the concurrency limits (globsGate) is answered busy; one whose
// client went away stops between two paths.
func (d *Daemon) Globs(ctx context.Context, id string, paths []string) (*api.Globs, error) {
	if len(paths) > api.MaxGlobPaths {
		return nil, fmt.Errorf("globs: %d paths, over the %d a request may ask about: %w", len(paths), api.MaxGlobPaths, skills.ErrInvalid)
	}
	segs := make([][]string, len(paths))
	var cells, bytes int64
	for i, p := range paths {
		if len(p) > api.MaxGlobPathLen {
			return nil, fmt.Errorf("globs: path %d is %d bytes long, over %d: %w", i+1, len(p), api.MaxGlobPathLen, skills.ErrInvalid)
		}
		segs[i] = skills.SplitSlash(p)
		for k, seg := range segs[i] {
			if len(seg) > api.MaxGlobSegmentLen {
				return nil, fmt.Errorf("globs: path %d: segment %d is %d bytes long, over %d: %w", i+1, k+1, len(seg), api.MaxGlobSegmentLen, skills.ErrInvalid)
			}
			bytes += int64(len(seg))
		}
		cells += int64(len(segs[i]) + 1)
	}
	s, err := d.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	root := s.ID
	if s.IsChild() {
		root = s.Parent
	}
	leave, err := d.globs.enter(root)
	if err != nil {
		d.metrics.http.Refused(server.LimitGlobs)
		return nil, err
	}
	defer leave()
	entries, err := d.promptEntries(ctx, s, d.viewFS(s), true)
	if err != nil {
		return nil, err
	}
	compiled := make([][]*manifest.Glob, len(entries))
	for i, e := range entries {
		for _, g := range e.m.Globs {
			if c, err := manifest.CompileGlob(g); err == nil { // a stored SKILL.md's globs were checked as it was parsed
				compiled[i] = append(compiled[i], c)
			}
		}
	}
	if _, ok := globsCost(compiled, cells, bytes); !ok {
		return nil, fmt.Errorf("globs: matching %d paths (%d bytes) against the globs of this session's skills would cost over %d steps: ask about fewer or shorter paths: %w",
			len(paths), bytes, maxGlobCost, skills.ErrInvalid)
	}
	out := &api.Globs{Paths: make([]api.PathSkills, len(paths))}
	for i, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ps := api.PathSkills{Path: p, Skills: []api.GlobMatch{}}
		for j, e := range entries {
			var hit []string
			for _, c := range compiled[j] {
				if c.Match(segs[i]) {
					hit = append(hit, c.Text)
				}
			}
			if len(hit) > 0 {
				ps.Skills = append(ps.Skills, api.GlobMatch{Slug: e.slug, Name: e.name, Globs: hit})
			}
		}
		out.Paths[i] = ps
	}
	return out, nil
}

// globsCost is what matching paths of cells segments (one more for each
// path) and bytes bytes in all against globs costs at most
// (manifest.Glob.Cost), and whether that is within maxGlobCost; it stops
// counting past it.
func globsCost(globs [][]*manifest.Glob, cells, bytes int64) (int64, bool) {
	var cost int64
	for _, gs := range globs {
		for _, g := range gs {
			// A glob costs under 2^24 a cell or a byte, and a request
			// has under 2^22 cells and bytes: the sum stops far from
			// overflowing.
			if cost += g.Cost(cells, bytes); cost > maxGlobCost {
				return cost, false
			}
		}
	}
	return cost, true
}
