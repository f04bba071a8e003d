package skills

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSkillRef(t *testing.T) {
	for _, c := range []struct {
		in, slug, version string
		bad               bool
	}{
		{in: "pdf", slug: "pdf"},
		{in: "pdf@abcd", slug: "pdf", version: "abcd"},
		{in: "pdf@ABCDEF12", slug: "pdf", version: "abcdef12"},
		{in: "pdf@" + strings.Repeat("0", 64), slug: "pdf", version: strings.Repeat("0", 64)},
		{in: "pdf@abc", bad: true},
		{in: "pdf@" + strings.Repeat("0", 65), bad: true},
		{in: "pdf@abcg", bad: true},
		{in: "pdf@", bad: true},
		{in: "@abcd", bad: true},
		{in: "pdf@ab@cd", bad: true},
		{in: "a/b@abcd", bad: true},
	} {
		r, err := ParseSkillRef(c.in)
		if c.bad {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%q: got %+v, %v; want ErrInvalid", c.in, r, err)
			}
			continue
		}
		if err != nil || r.Slug != c.slug || r.Version != c.version {
			t.Errorf("%q: got %+v, %v", c.in, r, err)
		}
	}
}

func FuzzParseSkillRef(f *testing.F) {
	for _, s := range []string{"pdf", "pdf@abcd", "x@", "@", "a@B0c1D2", "a@b@c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseSkillRef(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error of another kind: %v", s, err)
			}
			return
		}
		if r.Slug == "" || strings.ContainsAny(r.Slug, "@/\x00") {
			t.Fatalf("%q: slug %q", s, r.Slug)
		}
		if r.Version != "" {
			if len(r.Version) < MinVersionPrefix || len(r.Version) > 64 || strings.ToLower(r.Version) != r.Version {
				t.Fatalf("%q: version %q", s, r.Version)
			}
		}
		// What it reads, written back, reads the same.
		again, err := ParseSkillRef(r.String())
		if err != nil || again != r {
			t.Fatalf("%q: %+v does not round-trip: %+v, %v", s, r, again, err)
		}
	})
}
