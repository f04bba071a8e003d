package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"skillfs/skills"
)

var carol = skills.User{UID: "carol", Role: skills.RoleUser, Department: "eng"}

// sk builds an enabled uploaded skill.
func sk(slug, creator string, read skills.Scope, deps ...string) *skills.Skill {
	return &skills.Skill{
		Slug: slug, SourceType: skills.SourceUpload, Enabled: true, Creator: creator,
		Share: skills.Share{Read: read}, SkillDependencies: deps,
	}
}

// testCatalog returns a catalog holding the given skills with the cast, one
// registered tool and one registered MCP server.
func testCatalog(t testing.TB, list ...*skills.Skill) Catalog {
	t.Helper()
	c := Catalog{
		Skills: make(map[string]*skills.Skill),
		Tools:  map[string]bool{"pdftotext": true},
		MCPs:   map[string]bool{"github": true},
		Users:  append(slices.Clone(cast), carol),
	}
	for _, s := range list {
		if _, dup := c.Skills[s.Slug]; dup {
			t.Fatalf("catalog fixture names %q twice", s.Slug)
		}
		c.Skills[s.Slug] = s
	}
	return c
}

func depFixture(t testing.TB) Catalog {
	t.Helper()
	sys := sk("sys", "", skills.Scope{})
	sys.SourceType = skills.SourceBuiltin
	off := sk("off", "adm", scope("global"))
	off.Enabled = false
	offCycle := sk("off-cycle", "adm", scope("global"), "q")
	offCycle.Enabled = false
	return testCatalog(t,
		sk("base", "adm", scope("global")),
		sys,
		sk("eng-only", "alice", scope("department", "eng")),
		sk("bob-only", "bob", scope("user", "bob")),
		off, offCycle,
		sk("b", "adm", scope("global"), "a"),
		sk("x", "adm", scope("global"), "y"),
		sk("y", "adm", scope("global"), "z"),
		sk("old1", "adm", scope("global"), "old2"),
		sk("old2", "adm", scope("global"), "old1"),
		sk("p", "adm", scope("global"), "r"),
		sk("r", "adm", scope("global"), "p"),
	)
}

func TestValidateDependencies(t *testing.T) {
	builtin := sk("bi", "", skills.Scope{}, "eng-only")
	builtin.SourceType = skills.SourceBuiltin
	withTools := sk("n", "adm", scope("global"), "base", "sys")
	withTools.ToolDependencies = []string{"pdftotext"}
	withTools.MCPDependencies = []string{"github"}
	badTools := sk("n", "adm", scope("global"))
	badTools.ToolDependencies = []string{"pdftotext", "ocr", "ocr"}
	badTools.MCPDependencies = []string{"slack", "github"}
	everything := sk("a", "adm", scope("global"), "a", "nope", "off", "b", "b")
	everything.ToolDependencies = []string{"ocr"}
	everything.MCPDependencies = []string{"slack"}

	tests := []struct {
		name string
		s    *skills.Skill
		want []string // problems; nil when valid
	}{
		{"valid", withTools, nil},
		{"no dependencies", sk("n", "adm", scope("global")), nil},
		{"self", sk("n", "adm", scope("global"), "n"), []string{`skill "n" depends on itself`}},
		{"missing", sk("n", "adm", scope("global"), "nope"), []string{`skill dependency "nope" does not exist`}},
		{"disabled", sk("n", "adm", scope("global"), "off"), []string{`skill dependency "off" is disabled`}},
		{"unregistered tools and servers", badTools, []string{
			`tool "ocr" is not registered`, `MCP server "slack" is not registered`,
		}},
		{"global on department", sk("n", "adm", scope("global"), "eng-only"), []string{
			`skill dependency "eng-only" is not readable by everyone who can read "n" (not by everyone)`,
		}},
		{"department inside department", sk("n", "alice", scope("department", "eng"), "eng-only"), nil},
		{"department wider than department", sk("n", "alice", scope("department", "eng", "hr"), "eng-only"), []string{
			`skill dependency "eng-only" is not readable by everyone who can read "n" (not by department hr)`,
		}},
		{"users inside department by membership", sk("n", "alice", scope("user", "alice", "dave"), "eng-only"), nil},
		{"user outside department", sk("n", "alice", scope("user", "alice", "bob"), "eng-only"), []string{
			`skill dependency "eng-only" is not readable by everyone who can read "n" (not by user bob)`,
		}},
		{"unknown user", sk("n", "alice", scope("user", "alice", "ghost"), "eng-only"), []string{
			`skill dependency "eng-only" is not readable by everyone who can read "n" (not by user ghost)`,
		}},
		{"user inside user", sk("n", "bob", scope("user", "bob"), "bob-only"), nil},
		{"creator cannot read it", sk("n", "eve", scope("user", "bob"), "bob-only"), []string{
			`skill dependency "bob-only" is not readable by everyone who can read "n" (not by user eve)`,
		}},
		// A role gives no session reads: the sessions of an admin or a
		// superadmin who read n would not read bob's private skill.
		{"superadmin reads by share", sk("n", "root", scope("user", "root"), "bob-only"), []string{
			`skill dependency "bob-only" is not readable by everyone who can read "n" (not by user root)`,
		}},
		{"admin reads by share", sk("n", "adm", scope("user", "adm"), "bob-only"), []string{
			`skill dependency "bob-only" is not readable by everyone who can read "n" (not by user adm)`,
		}},
		{"manage scope readers count", &skills.Skill{
			Slug: "n", SourceType: skills.SourceUpload, Enabled: true, Creator: "alice",
			Share:             skills.Share{Read: scope("global"), Manage: scope("department", "eng")},
			SkillDependencies: []string{"eng-only"},
		}, []string{`skill dependency "eng-only" is not readable by everyone who can read "n" (not by everyone)`}},
		{"builtin dependency always readable", sk("n", "eve", scope("user", "eve"), "sys"), nil},
		{"builtin on private", builtin, []string{
			`skill dependency "eng-only" is not readable by everyone who can read "bi" (not by everyone, as builtin skills are readable by all)`,
		}},
		{"two-cycle", sk("a", "adm", scope("global"), "b"), []string{`cycle: a -> b -> a`}},
		{"three-cycle", sk("z", "adm", scope("global"), "x"), []string{`cycle: z -> x -> y -> z`}},
		{"cycle through a disabled skill", sk("q", "adm", scope("global"), "off-cycle"), []string{
			`skill dependency "off-cycle" is disabled`, `cycle: q -> off-cycle -> q`,
		}},
		{"old cycle elsewhere is not ours", sk("n", "adm", scope("global"), "old1"), nil},
		{"candidate replaces its catalog entry", sk("p", "adm", scope("global")), nil},
		{"candidate keeps the cycle", sk("p", "adm", scope("global"), "base", "r"), []string{`cycle: p -> r -> p`}},
		{"every problem at once", everything, []string{
			`skill "a" depends on itself`,
			`skill dependency "nope" does not exist`,
			`skill dependency "off" is disabled`,
			`cycle: a -> b -> a`,
			`tool "ocr" is not registered`,
			`MCP server "slack" is not registered`,
		}},
	}
	for _, byLookup := range []bool{false, true} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/lookup=%v", tc.name, byLookup), func(t *testing.T) {
				c := depFixture(t)
				if byLookup { // users found one by one, as the catalog does
					users := c.Users
					c.Users = nil
					c.LookupUser = func(uid string) (skills.User, bool) {
						i := slices.IndexFunc(users, func(u skills.User) bool { return u.UID == uid })
						if i < 0 {
							return skills.User{}, false
						}
						return users[i], true
					}
				}
				err := ValidateDependencies(c, tc.s)
				if tc.want == nil {
					if err != nil {
						t.Fatalf("ValidateDependencies: %v", err)
					}
					return
				}
				var de *DependencyError
				if !errors.As(err, &de) {
					t.Fatalf("ValidateDependencies = %v, want a *DependencyError", err)
				}
				if !errors.Is(err, skills.ErrDependency) {
					t.Errorf("error does not wrap ErrDependency")
				}
				if de.Slug != tc.s.Slug {
					t.Errorf("Slug = %q, want %q", de.Slug, tc.s.Slug)
				}
				if !slices.Equal(de.Problems, tc.want) {
					t.Errorf("problems:\n got %q\nwant %q", de.Problems, tc.want)
				}
			})
		}
	}
	if err := ValidateDependencies(depFixture(t), nil); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("nil skill: err = %v, want ErrInvalid", err)
	}
}

// TestValidateDependenciesCycleChoosesShortest checks that the named cycle is
// the shortest way back, not the first one a depth-first walk would find.
func TestValidateDependenciesCycleChoosesShortest(t *testing.T) {
	c := testCatalog(t,
		sk("b", "adm", scope("global"), "long1", "a"),
		sk("long1", "adm", scope("global"), "long2"),
		sk("long2", "adm", scope("global"), "a"),
	)
	var de *DependencyError
	if !errors.As(ValidateDependencies(c, sk("a", "adm", scope("global"), "b")), &de) {
		t.Fatal("no DependencyError")
	}
	if want := []string{"cycle: a -> b -> a"}; !slices.Equal(de.Problems, want) {
		t.Errorf("problems = %q, want %q", de.Problems, want)
	}
}

func TestValidateDependenciesDeepChain(t *testing.T) {
	const depth = 10000
	list := make([]*skills.Skill, depth)
	for i := range depth {
		var deps []string
		if i+1 < depth {
			deps = []string{chainSlug(i + 1)}
		}
		list[i] = sk(chainSlug(i), "adm", scope("global"), deps...)
	}
	c := testCatalog(t, list...)
	last := sk(chainSlug(depth-1), "adm", scope("global"), chainSlug(0))
	var de *DependencyError
	if !errors.As(ValidateDependencies(c, last), &de) || len(de.Problems) != 1 {
		t.Fatalf("closing a %d-long chain: want one cycle problem, got %v", depth, de)
	}
}

func TestDependents(t *testing.T) {
	c := testCatalog(t,
		sk("b", "adm", scope("global"), "b"),
		sk("c", "adm", scope("global"), "b", "b"),
		sk("a", "adm", scope("global"), "x", "b"),
		sk("d", "adm", scope("global"), "a"),
	)
	if got, want := Dependents(c, "b"), []string{"a", "c"}; !slices.Equal(got, want) {
		t.Errorf("Dependents(b) = %q, want %q", got, want)
	}
	if got := Dependents(c, "nobody"); len(got) != 0 {
		t.Errorf("Dependents(nobody) = %q, want none", got)
	}
}

func TestCheckDependents(t *testing.T) {
	c := testCatalog(t,
		sk("base", "adm", scope("global")),
		sk("wide", "adm", scope("global"), "base"),
		sk("mine", "alice", scope("user", "alice"), "base"),
		sk("free", "adm", scope("global")),
	)
	narrower := *c.Skills["base"]
	narrower.Share = skills.Share{Read: scope("user", "adm", "alice")}
	disabled := *c.Skills["base"]
	disabled.Enabled = false
	tests := []struct {
		name string
		slug string
		next *skills.Skill
		want []string
	}{
		{"delete needed", "base", nil, []string{`needed by "mine"`, `needed by "wide"`}},
		{"delete unneeded", "free", nil, nil},
		{"narrower share", "base", &narrower, []string{
			`needed by "wide": skill dependency "base" is not readable by everyone who can read "wide" (not by everyone)`,
		}},
		{"disable", "base", &disabled, []string{
			`needed by "mine": skill dependency "base" is disabled`,
			`needed by "wide": skill dependency "base" is disabled`,
		}},
		{"unchanged", "base", c.Skills["base"], nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckDependents(c, tc.slug, tc.next)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckDependents: %v", err)
				}
				return
			}
			var de *DependencyError
			if !errors.As(err, &de) || !errors.Is(err, skills.ErrDependency) {
				t.Fatalf("CheckDependents = %v, want a *DependencyError", err)
			}
			if de.Slug != tc.slug || !slices.Equal(de.Problems, tc.want) {
				t.Errorf("got %q %q, want %q %q", de.Slug, de.Problems, tc.slug, tc.want)
			}
		})
	}
}

// mapSource is a SkillSource over a map.
type mapSource map[string]*skills.Skill

func (m mapSource) Get(slug string) *skills.Skill { return m[slug] }

func (m mapSource) All() []*skills.Skill {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b *skills.Skill) int { return strings.Compare(a.Slug, b.Slug) })
	return out
}

// TestCatalogOverABase: skills laid over a base answer as one catalog
// would: an entry hides the base's skill of its slug (nil: deleted), and a
// new one joins it, for every check.
func TestCatalogOverABase(t *testing.T) {
	base := mapSource{
		"base": sk("base", "adm", scope("global")),
		"old":  sk("old", "adm", scope("global"), "base"),
		"gone": sk("gone", "adm", scope("global"), "base"),
		"loop": sk("loop", "adm", scope("global"), "new"),
	}
	c := testCatalog(t)
	c.Base = base
	off := *base["base"]
	off.Enabled = false
	c.Skills["base"] = &off                                            // hides the base's enabled one
	c.Skills["gone"] = nil                                             // deleted
	c.Skills["new"] = sk("new", "adm", scope("global"), "old", "gone") // planned

	if got, want := Dependents(c, "base"), []string{"old"}; !slices.Equal(got, want) {
		t.Errorf("Dependents(base) = %q, want %q (gone is deleted)", got, want)
	}
	err := ValidateDependencies(c, sk("x", "adm", scope("global"), "base", "gone", "new"))
	var de *DependencyError
	if !errors.As(err, &de) {
		t.Fatalf("ValidateDependencies = %v, want a *DependencyError", err)
	}
	want := []string{`skill dependency "base" is disabled`, `skill dependency "gone" does not exist`}
	if !slices.Equal(de.Problems, want) {
		t.Errorf("problems %q, want %q", de.Problems, want)
	}
	// loop (in the base) depends on new (laid over it): a cycle through both.
	err = ValidateDependencies(c, sk("old", "adm", scope("global"), "loop"))
	if !errors.As(err, &de) || !slices.Equal(de.Problems, []string{"cycle: old -> loop -> new -> old"}) {
		t.Errorf("cycle through base and overlay: %v", err)
	}
}
