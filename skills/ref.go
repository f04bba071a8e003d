package skills

import (
	"fmt"
	"strings"
)

// MinVersionPrefix is the fewest hex digits of a tree hash that name a
// version: fewer would match too much by chance to be worth accepting.
const MinVersionPrefix = 4

// hashLen is the length of a tree hash in hex digits.
const hashLen = 64

// SkillRef is a skill as a session or a command names it: a slug and,
// pinned, a version (a prefix of its tree hash, lowercase hex).
type SkillRef struct {
	Slug    string
	Version string // "" for the current version
}

// String is the ref as ParseSkillRef reads it.
func (r SkillRef) String() string {
	if r.Version == "" {
		return r.Slug
	}
	return r.Slug + "@" + r.Version
}

// ParseSkillRef reads "slug" or "slug@version", where version is a prefix
// of a version's tree hash (see CleanVersion). The slug is not checked
// against the slug rules: a name no skill can have is reported as missing
// by whoever looks it up, as any other unknown slug. Session creation and
// changing a session's skills both read their lists with it.
func ParseSkillRef(s string) (SkillRef, error) {
	slug, version, pinned := strings.Cut(s, "@")
	if slug == "" {
		return SkillRef{}, fmt.Errorf("skill %q: no slug before the @ (write SLUG or SLUG@VERSION): %w", s, ErrInvalid)
	}
	if strings.ContainsAny(slug, "/\x00") {
		return SkillRef{}, fmt.Errorf("skill %q: a slug holds no / or NUL: %w", s, ErrInvalid)
	}
	if !pinned {
		return SkillRef{Slug: slug}, nil
	}
	v, err := CleanVersion(version)
	if err != nil {
		return SkillRef{}, fmt.Errorf("skill %q: %w", s, err)
	}
	return SkillRef{Slug: slug, Version: v}, nil
}

// CleanVersion checks a VERSION argument: from MinVersionPrefix to 64 hex
// digits of a tree hash, returned in lowercase.
func CleanVersion(v string) (string, error) {
	if len(v) < MinVersionPrefix || len(v) > hashLen {
		return "", fmt.Errorf("version %q: give %d to %d hex digits of its hash (see `skillfs skill versions SLUG`): %w", v, MinVersionPrefix, hashLen, ErrInvalid)
	}
	for i := 0; i < len(v); i++ {
		if !isHex(v[i]) {
			return "", fmt.Errorf("version %q: %q is not a hex digit (see `skillfs skill versions SLUG`): %w", v, v[i], ErrInvalid)
		}
	}
	return strings.ToLower(v), nil
}
