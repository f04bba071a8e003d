package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"skillfs/skills"
)

func chainSlug(i int) string { return fmt.Sprintf("c%d", i) }

// lookupIn returns a lookup over a catalog.
func lookupIn(c Catalog) func(string) *skills.Skill {
	return func(slug string) *skills.Skill { return c.Skills[slug] }
}

// visibleTo returns the visibility test of a session acting for u.
func visibleTo(u skills.User) func(*skills.Skill) bool {
	return func(s *skills.Skill) bool { return Visible(u, s) }
}

func TestClosure(t *testing.T) {
	g := scope("global")
	disabled := func(s *skills.Skill) *skills.Skill { s.Enabled = false; return s }
	tests := []struct {
		name    string
		skills  []*skills.Skill
		user    skills.User
		roots   []string
		want    []string
		skipped []Skipped
	}{
		{
			name: "old cycle, repeated root, missing and repeated dependency",
			skills: []*skills.Skill{
				sk("alpha", "adm", g, "beta", "missing", "beta"),
				sk("beta", "adm", g, "alpha"),
			},
			user: eve, roots: []string{"alpha", "alpha"},
			want:    []string{"alpha", "beta"},
			skipped: []Skipped{{Slug: "missing", Reason: SkipMissing, Via: "alpha"}},
		},
		{
			name: "depth-first pre-order, roots in order",
			skills: []*skills.Skill{
				sk("alpha", "adm", g, "beta", "gamma"),
				sk("beta", "adm", g, "delta"),
				sk("gamma", "adm", g),
				sk("delta", "adm", g),
				sk("zeta", "adm", g, "gamma"),
			},
			user: eve, roots: []string{"zeta", "alpha"},
			want: []string{"zeta", "gamma", "alpha", "beta", "delta"},
		},
		{
			name: "diamond",
			skills: []*skills.Skill{
				sk("top", "adm", g, "left", "right"),
				sk("left", "adm", g, "bottom"),
				sk("right", "adm", g, "bottom"),
				sk("bottom", "adm", g),
			},
			user: eve, roots: []string{"top"},
			want: []string{"top", "left", "bottom", "right"},
		},
		{
			name: "first occurrence wins over a later root",
			skills: []*skills.Skill{
				sk("a", "adm", g, "b"),
				sk("b", "adm", g),
			},
			user: eve, roots: []string{"a", "b"},
			want: []string{"a", "b"},
		},
		{
			name: "unreadable dependency left out, its dependencies not followed",
			skills: []*skills.Skill{
				sk("app", "adm", g, "secret", "lib"),
				sk("secret", "bob", scope("user", "bob"), "leak"),
				sk("leak", "adm", g),
				sk("lib", "adm", g),
			},
			user: eve, roots: []string{"app"},
			want:    []string{"app", "lib"},
			skipped: []Skipped{{Slug: "secret", Reason: SkipNotReadable, Via: "app"}},
		},
		{
			name: "unreadable dependency reached again later is reported once",
			skills: []*skills.Skill{
				sk("app", "adm", g, "secret", "lib"),
				sk("lib", "adm", g, "secret"),
				sk("secret", "bob", scope("user", "bob")),
			},
			user: eve, roots: []string{"app", "secret"},
			want:    []string{"app", "lib"},
			skipped: []Skipped{{Slug: "secret", Reason: SkipNotReadable, Via: "app"}},
		},
		{
			name: "roots skipped",
			skills: []*skills.Skill{
				sk("secret", "bob", scope("user", "bob")),
				disabled(sk("mine-off", "eve", scope("user", "eve"))),
				disabled(sk("theirs-off", "bob", scope("user", "bob"))),
				sk("ok", "adm", g),
			},
			user: eve, roots: []string{"nope", "secret", "mine-off", "theirs-off", "ok"},
			want: []string{"ok"},
			skipped: []Skipped{
				{Slug: "nope", Reason: SkipMissing},
				{Slug: "secret", Reason: SkipNotReadable},
				{Slug: "mine-off", Reason: SkipDisabled},
				{Slug: "theirs-off", Reason: SkipNotReadable},
			},
		},
		{
			name: "disabled dependency",
			skills: []*skills.Skill{
				sk("app", "adm", g, "off", "lib"),
				disabled(sk("off", "adm", g, "lib2")),
				sk("lib", "adm", g),
				sk("lib2", "adm", g),
			},
			user: eve, roots: []string{"app"},
			want:    []string{"app", "lib"},
			skipped: []Skipped{{Slug: "off", Reason: SkipDisabled, Via: "app"}},
		},
		{
			name: "self dependency",
			skills: []*skills.Skill{
				sk("me", "adm", g, "me"),
			},
			user: eve, roots: []string{"me"},
			want: []string{"me"},
		},
		{
			name:   "no roots",
			skills: []*skills.Skill{sk("a", "adm", g)},
			user:   eve,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testCatalog(t, tc.skills...)
			got, skipped := Closure(tc.roots, lookupIn(c), visibleTo(tc.user))
			if !slices.Equal(got, tc.want) {
				t.Errorf("readable = %q, want %q", got, tc.want)
			}
			if !slices.Equal(skipped, tc.skipped) {
				t.Errorf("skipped = %+v, want %+v", skipped, tc.skipped)
			}
		})
	}
}

func TestClosureDeepChain(t *testing.T) {
	const depth = 10000
	c := Catalog{Skills: make(map[string]*skills.Skill, depth)}
	for i := range depth {
		// The last one points back at the first: a cycle of the whole chain.
		c.Skills[chainSlug(i)] = sk(chainSlug(i), "adm", scope("global"), chainSlug((i+1)%depth))
	}
	got, skipped := Closure([]string{chainSlug(0)}, lookupIn(c), visibleTo(eve))
	if len(got) != depth || len(skipped) != 0 {
		t.Fatalf("got %d readable and %d skipped, want %d and 0", len(got), len(skipped), depth)
	}
	for i, slug := range got {
		if slug != chainSlug(i) {
			t.Fatalf("readable[%d] = %q, want %q", i, slug, chainSlug(i))
		}
	}
}

// preorder is the textbook recursive definition Closure must agree with.
func preorder(roots []string, lookup func(string) *skills.Skill, visible func(*skills.Skill) bool) []string {
	seen := map[string]bool{}
	var out []string
	var visit func(string)
	visit = func(slug string) {
		if seen[slug] {
			return
		}
		seen[slug] = true
		s := lookup(slug)
		if s == nil || !visible(s) {
			return
		}
		out = append(out, slug)
		for _, d := range s.SkillDependencies {
			visit(d)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return out
}

// fuzzCatalog decodes a small catalog with cycles, missing slugs and random
// visibility: a node count, then per node a flags byte (bit 0 exists, bit 1
// enabled, bit 2 readable) and a dependency count with that many targets,
// then roots. Target n names a slug that has no skill.
func fuzzCatalog(data []byte) (c Catalog, readable map[string]bool, roots []string) {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	n := 1 + next()%8
	name := func(i int) string { return fmt.Sprintf("s%d", i%(n+1)) }
	c.Skills = make(map[string]*skills.Skill)
	readable = make(map[string]bool)
	for i := range n {
		flags := next()
		deps := make([]string, next()%5)
		for j := range deps {
			deps[j] = name(next())
		}
		if flags&1 == 0 {
			continue
		}
		c.Skills[name(i)] = &skills.Skill{Slug: name(i), Enabled: flags&2 != 0, SkillDependencies: deps}
		readable[name(i)] = flags&4 != 0
	}
	for len(data) > 0 {
		roots = append(roots, name(next()))
	}
	return c, readable, roots
}

func FuzzClosure(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 7, 1, 1, 7, 1, 0, 0})                // two visible nodes in a cycle
	f.Add([]byte{2, 7, 3, 1, 3, 1, 7, 1, 0, 3, 0, 0, 0}) // missing and repeated deps, repeated root
	f.Add([]byte{3, 7, 2, 1, 2, 5, 1, 3, 7, 0, 0, 2})    // an invisible node in the middle
	f.Add([]byte{7, 7, 1, 1, 7, 1, 2, 7, 1, 3, 3, 1, 4, 7, 1, 5, 7, 1, 6, 7, 1, 7, 7, 1, 0, 0, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, readable, roots := fuzzCatalog(data)
		lookup := lookupIn(c)
		calls := 0
		visible := func(s *skills.Skill) bool {
			calls++
			return s.Enabled && readable[s.Slug]
		}
		got, skipped := Closure(roots, lookup, visible)
		if calls > 2*(len(c.Skills)+len(roots)) {
			t.Fatalf("visible called %d times for %d skills", calls, len(c.Skills))
		}
		if want := preorder(roots, lookup, visible); !slices.Equal(got, want) {
			t.Fatalf("Closure = %q, recursive pre-order = %q", got, want)
		}
		in := make(map[string]bool)
		for _, slug := range got {
			if in[slug] {
				t.Fatalf("%q appears twice in %q", slug, got)
			}
			in[slug] = true
			s := lookup(slug)
			if s == nil || !visible(s) {
				t.Fatalf("%q is in the readable set but not visible", slug)
			}
		}
		for _, slug := range got {
			for _, d := range lookup(slug).SkillDependencies {
				if ds := lookup(d); ds != nil && visible(ds) && !in[d] {
					t.Fatalf("%q depends on visible %q, which is missing from %q", slug, d, got)
				}
			}
		}
		for _, r := range roots {
			if s := lookup(r); s != nil && visible(s) && !in[r] {
				t.Fatalf("visible root %q missing from %q", r, got)
			}
		}
		reported := make(map[string]bool)
		for _, sk := range skipped {
			if reported[sk.Slug] || in[sk.Slug] {
				t.Fatalf("skipped %q twice or also included: %+v, %q", sk.Slug, skipped, got)
			}
			reported[sk.Slug] = true
			s := lookup(sk.Slug)
			if s != nil && visible(s) {
				t.Fatalf("visible %q reported as skipped", sk.Slug)
			}
			if sk.Via != "" && !in[sk.Via] {
				t.Fatalf("%q skipped via %q, which is not readable", sk.Slug, sk.Via)
			}
			if sk.Via == "" && !slices.Contains(roots, sk.Slug) {
				t.Fatalf("%q skipped as a root but is none", sk.Slug)
			}
		}
	})
}

// What a user is told about the skills left out of her session: a skill she
// may not read, and a disabled one she only reads, look exactly like one that
// does not exist; a disabled one she manages is reported as disabled.
func TestDisclose(t *testing.T) {
	g := scope("global")
	off := func(s *skills.Skill) *skills.Skill { s.Enabled = false; return s }
	c := testCatalog(t,
		sk("secret", "bob", scope("user", "bob")),
		off(sk("mine-off", "eve", scope("user", "eve"))),
		off(sk("shared-off", "adm", g)),
		off(sk("theirs-off", "bob", scope("user", "bob"))),
		sk("app", "adm", g, "secret", "shared-off"),
		sk("ok", "adm", g),
	)
	roots := []string{"nope", "secret", "mine-off", "shared-off", "theirs-off", "app"}
	for _, tc := range []struct {
		user skills.User
		want []Skipped
	}{
		{eve, []Skipped{
			{Slug: "nope", Reason: SkipMissing},
			{Slug: "secret", Reason: SkipMissing},
			{Slug: "mine-off", Reason: SkipDisabled},
			{Slug: "shared-off", Reason: SkipMissing},
			{Slug: "theirs-off", Reason: SkipMissing},
		}},
		// An admin manages all of them in the catalog, but her sessions read
		// by share: the private skills of others are not readable (she knows
		// they exist, so they are not answered as missing); the disabled one
		// shared with her is disabled.
		{adm, []Skipped{
			{Slug: "nope", Reason: SkipMissing},
			{Slug: "secret", Reason: SkipNotReadable},
			{Slug: "mine-off", Reason: SkipNotReadable},
			{Slug: "shared-off", Reason: SkipDisabled},
			{Slug: "theirs-off", Reason: SkipNotReadable},
		}},
	} {
		users := []skills.User{tc.user}
		if tc.user == adm {
			users = append(users, root) // a superadmin likewise
		}
		for _, u := range users {
			t.Run(u.UID, func(t *testing.T) {
				_, skipped := Closure(roots, lookupIn(c), visibleTo(u))
				got := Disclose(u, lookupIn(c), skipped)
				if !slices.Equal(got, tc.want) {
					t.Errorf("disclosed = %+v, want %+v", got, tc.want)
				}
			})
		}
	}
	// A dependency keeps the skill that named it.
	_, skipped := Closure([]string{"app"}, lookupIn(c), visibleTo(eve))
	want := []Skipped{{Slug: "secret", Reason: SkipMissing, Via: "app"}, {Slug: "shared-off", Reason: SkipMissing, Via: "app"}}
	if got := Disclose(eve, lookupIn(c), skipped); !slices.Equal(got, want) {
		t.Errorf("disclosed = %+v, want %+v", got, want)
	}
}

func TestCheckRoots(t *testing.T) {
	miss := []Skipped{{Slug: "nope", Reason: SkipMissing}, {Slug: "off", Reason: SkipDisabled}, {Slug: "dep", Reason: SkipMissing, Via: "x"}}
	for _, tc := range []struct {
		name     string
		roots    []string
		readable []string
		want     []string // substrings of the error; nil for none
	}{
		{"no roots", nil, nil, nil},
		{"one readable root", []string{"nope", "ok"}, []string{"ok"}, nil},
		{"none readable", []string{"nope", "off"}, nil, []string{`"nope" (missing)`, `"off" (disabled)`, "skill list"}},
		{"only dependencies readable is still none", []string{"nope"}, []string{"lib"}, []string{`"nope" (missing)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRoots(tc.roots, tc.readable, miss)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckRoots: %v", err)
				}
				return
			}
			if !errors.Is(err, skills.ErrNotFound) {
				t.Fatalf("CheckRoots = %v, want ErrNotFound", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
