package source

import (
	"path/filepath"
	"strings"
)

// SkillKey is the provenance key of the skill cand of a source whose key
// is key (Tree.Key): same key, same source, so that reading it again makes
// a new version of the same skill. A skill of the agents' folders (agents),
// each its own root, is keyed by its folder's real path; any other by its
// folder in the source, as key//REL.
func SkillKey(key string, cand Candidate, agents bool) string {
	switch {
	case agents:
		return key + cand.Rel // the agent folder's real path
	case cand.Rel != ".":
		return key + "//" + cand.Rel
	}
	return key
}

// Recorded is a source as a skill's provenance key records it (see
// ParseSkillKey).
type Recorded struct {
	Kind string // "git" or "local"
	Base string // the URL or the absolute path
	Rel  string // the skill's folder, "" for the root
}

// ParseSkillKey reads a skill's provenance key (see SkillKey): ok is false
// for a source there is nothing to read again from (an upload, an
// archive, a lone SKILL.md, an agent's folder).
func ParseSkillKey(key string) (Recorded, bool) {
	kind, rest, found := strings.Cut(key, ":")
	if !found || (kind != "git" && kind != "local") || rest == "" {
		return Recorded{}, false
	}
	start := 0
	if i := strings.Index(rest, "://"); i >= 0 {
		start = i + 3
	}
	base, rel := rest, ""
	if j := strings.Index(rest[start:], "//"); j >= 0 {
		base, rel = rest[:start+j], rest[start+j+2:]
	}
	if base == "" || (kind == "local" && !filepath.IsAbs(base)) {
		return Recorded{}, false
	}
	return Recorded{Kind: kind, Base: base, Rel: rel}, true
}
