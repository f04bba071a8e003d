package node

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"skillfs/skills"
)

// place is a path in the daemon's namespace in the forms a bind of it may
// be recorded in: as the kubelet gave it, and with the symlinks of its
// parent resolved (as the daemon records a bind: a kubelet root behind a
// symlink). Only the parent is resolved, never the path itself: that may
// be a bind of the FUSE mount, which a stat would wait on.
type place []string

// placeOf is target's place. Of a parent not made yet, the deepest
// folder above it that is there is resolved (the daemon makes the rest,
// resolved the same way); one that cannot be resolved for another reason
// leaves the form given alone.
func placeOf(target string) place {
	t := filepath.Clean(target)
	p := place{t}
	dir, rest := filepath.Dir(t), filepath.Base(t)
	for {
		r, err := filepath.EvalSymlinks(dir)
		if err == nil {
			if r = filepath.Join(r, rest); r != t {
				p = append(p, r)
			}
			return p
		}
		up := filepath.Dir(dir)
		if !errors.Is(err, fs.ErrNotExist) || up == dir {
			return p
		}
		dir, rest = up, filepath.Join(filepath.Base(dir), rest)
	}
}

// join is the place of name below p.
func (p place) join(name string) place {
	out := make(place, len(p))
	for i, f := range p {
		out[i] = filepath.Join(f, name)
	}
	return out
}

// up is the place n folders above p.
func (p place) up(n int) place {
	out := make(place, len(p))
	for i, f := range p {
		for range n {
			f = filepath.Dir(f)
		}
		out[i] = f
	}
	return out
}

// is reports whether path is one of p's forms.
func (p place) is(path string) bool { return slices.Contains(p, path) }

// bound reports whether a bind of binds (in the daemon's namespace) is at
// one of places.
func bound(binds []skills.Bind, places ...place) bool {
	return slices.ContainsFunc(binds, func(b skills.Bind) bool {
		return b.PID == 0 && slices.ContainsFunc(places, func(p place) bool { return p.is(b.Target) })
	})
}

// podUIDOf is the pod uid in a kubelet's target path,
// <root>/pods/<uid>/volumes/<plugin>/<volume>/mount (the last such part of
// it), when it has one that is a label's value.
func podUIDOf(target string) (string, bool) {
	parts := strings.Split(filepath.Clean(target), "/")
	for i := len(parts) - 3; i >= 0; i-- {
		if parts[i] == "pods" && parts[i+2] == "volumes" && parts[i+1] != "" && skills.CheckLabel(LabelPodUID, parts[i+1]) == nil {
			return parts[i+1], true
		}
	}
	return "", false
}
