package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type sessionJSON struct {
	ID       string   `json:"id"`
	Readable []string `json:"readable"`
	Path     string   `json:"path"`
	Skipped  []struct {
		Slug   string `json:"slug"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

// TestAccessPolicyLive: shares, departments and role changes decide who
// reads what, and a change takes effect in live sessions at once.
func TestAccessPolicyLive(t *testing.T) {
	e := newEnv(t)
	e.serve("--examples=false")
	e.ok("user", "add", "alice", "--department", "eng")
	e.ok("user", "add", "dave", "--department", "eng")
	e.ok("user", "add", "bob", "--department", "sales")
	e.ok("user", "add", "carol", "--role", "admin", "--department", "eng")

	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "eng-notes"), "name: eng-notes\ndescription: notes for engineers", map[string]string{"ref/a.txt": "A"})
	e.ok("skill", "import", filepath.Join(src, "eng-notes"), "--as", "alice")

	// A user may only share with themselves.
	if r := e.run("skill", "share", "eng-notes", "--read", "department:eng", "--as", "alice"); r.code != 4 {
		t.Fatalf("alice shares with a department: exit %d, want 4\n%s", r.code, r.stderr)
	}
	// Nobody else sees alice's private skill, and existence is not disclosed.
	if r := e.run("skill", "show", "eng-notes", "--as", "bob"); r.code != 3 {
		t.Fatalf("bob shows alice's private skill: exit %d, want 3", r.code)
	}
	// Admins, like superadmins, manage every skill that is not builtin: carol
	// shares alice's private skill with the department, but may not hand its
	// management to everyone (a superadmin's call).
	if r := e.run("skill", "share", "eng-notes", "--read", "global", "--manage", "global", "--as", "carol"); r.code != 4 {
		t.Fatalf("an admin hands management to everyone: exit %d, want 4\n%s", r.code, r.stderr)
	}
	e.ok("skill", "share", "eng-notes", "--read", "department:eng", "--as", "carol")

	var dave, bob sessionJSON
	e.okJSON(&dave, "session", "create", "--user", "dave", "--all")
	e.okJSON(&bob, "session", "create", "--user", "bob", "--all")
	if strings.Join(dave.Readable, ",") != "eng-notes" {
		t.Fatalf("dave reads %v, want [eng-notes]", dave.Readable)
	}
	if len(bob.Readable) != 0 {
		t.Fatalf("bob reads %v, want nothing", bob.Readable)
	}
	f, err := os.Open(filepath.Join(dave.Path, "eng-notes", "ref", "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// dave moves to sales: the skill leaves his live session at once.
	e.ok("user", "set", "dave", "--department", "sales")
	if _, err := os.Stat(filepath.Join(dave.Path, "eng-notes")); !os.IsNotExist(err) {
		t.Fatalf("after dave left eng, stat = %v, want not exist", err)
	}
	if _, err := f.Read(make([]byte, 1)); err == nil {
		t.Fatal("an open handle still reads after revocation")
	}
	// Back in eng: it returns at the next refresh, not before.
	e.ok("user", "set", "dave", "--department", "eng")
	if _, err := os.Stat(filepath.Join(dave.Path, "eng-notes")); !os.IsNotExist(err) {
		t.Fatalf("grant visible before refresh: %v", err)
	}
	e.ok("session", "refresh", dave.ID)
	if _, err := os.Stat(filepath.Join(dave.Path, "eng-notes", "SKILL.md")); err != nil {
		t.Fatalf("grant after refresh: %v", err)
	}
}

// TestDependencyRules: dependencies are validated on every write path.
func TestDependencyRules(t *testing.T) {
	e := newEnv(t)
	src := t.TempDir()
	e.ok("user", "add", "alice")
	writeSkill(t, filepath.Join(src, "a"), "name: a\ndescription: a", nil)
	writeSkill(t, filepath.Join(src, "b"), "name: b\ndescription: b\nskill_dependencies: [a]", nil)
	writeSkill(t, filepath.Join(src, "private"), "name: private\ndescription: p", nil)
	writeSkill(t, filepath.Join(src, "tooly"), "name: tooly\ndescription: t\ntool_dependencies: [grep]", nil)
	e.ok("skill", "import", filepath.Join(src, "a"), "--share", "global")
	e.ok("skill", "import", filepath.Join(src, "b"), "--share", "global")
	e.ok("skill", "import", filepath.Join(src, "private"), "--as", "alice")

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"cycle", []string{"skill", "deps", "a", "--skill", "b"}, 5, "a -> b -> a"},
		{"self", []string{"skill", "deps", "a", "--skill", "a"}, 5, "itself"},
		{"missing skill", []string{"skill", "deps", "a", "--skill", "nope"}, 5, "nope"},
		{"unregistered tool", []string{"skill", "deps", "a", "--tool", "grep"}, 5, "grep"},
		{"unregistered tool at import", []string{"skill", "import", filepath.Join(src, "tooly")}, 5, "grep"},
		{"narrower dependency", []string{"skill", "deps", "b", "--skill", "a", "--skill", "private"}, 5, "private"},
		{"delete a needed skill", []string{"skill", "delete", "a"}, 5, "needed by"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", r.code, r.stderr, tc.code, tc.want)
			}
		})
	}
	e.ok("tool", "add", "grep")
	e.ok("skill", "import", filepath.Join(src, "tooly"))
	var list []struct {
		Slug  string   `json:"slug"`
		Tools []string `json:"tool_dependencies"`
	}
	e.okJSON(&list, "skill", "list")
	if len(list) != 4 {
		t.Fatalf("catalog %+v, want a, b, private, tooly", list)
	}
}

// TestMentionsAndSkillURLs: a runtime can inject skills named in a message,
// and resolve skill:// URLs with the filesystem's confinement.
func TestMentionsAndSkillURLs(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "release-notes")

	var m struct {
		Mentions []struct {
			Slug    string `json:"slug"`
			Content string `json:"content"`
		} `json:"mentions"`
	}
	e.okJSON(&m, "session", "mentions", s.ID, "--text", "Use $release-notes. Also [$commit-messages](skill://commit-messages), not $skill-authoring or $nope")
	if len(m.Mentions) != 2 || m.Mentions[0].Slug != "release-notes" || m.Mentions[1].Slug != "commit-messages" ||
		!strings.Contains(m.Mentions[0].Content, "# Release notes") {
		t.Fatalf("mentions = %+v", m.Mentions)
	}
	var a struct {
		Activated []struct {
			Slug string `json:"slug"`
		} `json:"activated"`
	}
	e.okJSON(&a, "session", "activations", s.ID)
	if len(a.Activated) != 2 {
		t.Fatalf("mentions did not activate: %+v", a.Activated)
	}

	out := e.ok("session", "read", s.ID, "skill://release-notes/assets/template.md")
	if !strings.Contains(out, "# Release VERSION") {
		t.Fatalf("skill:// read = %q", out)
	}
	for _, bad := range []struct{ uri, want string }{
		{"skill://release-notes/../commit-messages/SKILL.md", "unsafe"},
		{"skill://release-notes/%2e%2e/commit-messages/SKILL.md", "unsafe"},
		{"skill://release-notes//etc/passwd", ""},
		{"skill://skill-authoring/SKILL.md", "release-notes, commit-messages"},
		{"skill://release-notes/nope.txt", "not"},
	} {
		r := e.run("session", "read", s.ID, bad.uri)
		if r.code == 0 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("read %s: exit %d, stderr %q; want failure mentioning %q", bad.uri, r.code, r.stderr, bad.want)
		}
	}
}

// TestAdminSessionsReadByShare: an admin's or a superadmin's rights are for
// the catalog; their sessions read, like anyone's, the enabled skills that
// are theirs or shared with them.
func TestAdminSessionsReadByShare(t *testing.T) {
	e := newEnv(t)
	e.serve("--examples=false")
	e.ok("user", "add", "alice")
	e.ok("user", "add", "carol", "--role", "admin")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "diary"), "name: diary\ndescription: alice's own", nil)
	writeSkill(t, filepath.Join(src, "team"), "name: team\ndescription: for everyone", nil)
	e.ok("skill", "import", filepath.Join(src, "diary"), "--as", "alice")
	e.ok("skill", "import", filepath.Join(src, "team"), "--as", "alice")
	e.ok("skill", "share", "team", "--read", "global", "--as", "carol")

	for _, admin := range []string{"carol", "operator"} {
		// Both manage diary in the catalog...
		e.ok("skill", "show", "diary", "--as", admin)
		// ...but no session of theirs reads it: not with --all,
		var all sessionJSON
		e.okJSON(&all, "session", "create", "--user", admin, "--all")
		if slices.Contains(all.Readable, "diary") || !slices.Contains(all.Readable, "team") {
			t.Fatalf("%s's session with --all reads %v, want team and not diary", admin, all.Readable)
		}
		// not by name (it is "not readable": they know it exists),
		r := e.run("session", "create", "--user", admin, "--skills", "diary")
		if r.code != 3 || !strings.Contains(r.stderr, `"diary" (not readable)`) {
			t.Fatalf("%s's session naming diary: exit %d, stderr %q; want exit 3, not readable", admin, r.code, r.stderr)
		}
		// and not through a mention.
		var m struct {
			Mentions []struct {
				Slug string `json:"slug"`
			} `json:"mentions"`
		}
		e.okJSON(&m, "session", "mentions", all.ID, "--text", "use $diary and $team")
		if len(m.Mentions) != 1 || m.Mentions[0].Slug != "team" {
			t.Fatalf("%s's mentions = %+v, want team alone", admin, m.Mentions)
		}
	}
	// Shared with carol, it is hers to read.
	e.ok("skill", "share", "diary", "--read", "user:alice,carol", "--as", "carol")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "carol", "--skills", "diary")
	if strings.Join(s.Readable, ",") != "diary" {
		t.Fatalf("carol reads %v once diary is shared with her, want [diary]", s.Readable)
	}
}

// skillShown is what the import tests read of `skill show --json`.
type skillShown struct {
	Creator string `json:"creator"`
	Share   struct {
		Read string `json:"read"`
	} `json:"share"`
	Versions []struct {
		Hash string `json:"hash"`
	} `json:"versions"`
}

// shown is `skill show SLUG --json --as AS`.
func (e *env) shown(slug, as string) skillShown {
	e.t.Helper()
	var s skillShown
	e.okJSON(&s, "skill", "show", slug, "--as", as)
	return s
}

// importedOne is one skill of `skill import --json`.
type importedOne struct {
	Slug        string `json:"slug"`
	RenamedFrom string `json:"renamed_from"`
	Note        string `json:"note"`
}

// importOne imports src with args, which must install exactly one skill.
func (e *env) importOne(src string, args ...string) importedOne {
	e.t.Helper()
	var out struct {
		Installed []importedOne `json:"installed"`
	}
	e.okJSON(&out, append([]string{"skill", "import", src}, args...)...)
	if len(out.Installed) != 1 {
		e.t.Fatalf("import %s %v: %+v, want one skill", src, args, out)
	}
	return out.Installed[0]
}

// TestCommonSourceImportsLive: a source several users import (one folder of
// a git repository) is one skill per owner. An admin's import does not make
// a new version of a user's private skill of the same source, unless the
// admin asks for it with --replace.
func TestCommonSourceImportsLive(t *testing.T) {
	e := newCatalogEnv(t)
	e.ok("user", "add", "alice")
	e.ok("user", "add", "carol", "--role", "admin")
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "market"))
	pdf := filepath.Join(repo.dir, "skills", "pdf")
	writeSkill(t, pdf, "name: pdf\ndescription: PDF v1", nil)
	writeSkill(t, filepath.Join(repo.dir, "skills", "docx"), "name: docx\ndescription: DOCX", nil)
	repo.commit("v1")

	e.importOne(repo.url(), "--skill", "pdf", "--as", "alice")
	writeSkill(t, pdf, "name: pdf\ndescription: PDF v2", nil)
	repo.commit("v2")
	// carol's import, shared with everyone, is a skill of her own.
	in := e.importOne(repo.url(), "--skill", "pdf", "--share", "global", "--as", "carol")
	if in.Slug != "pdf-v2" || in.RenamedFrom != "pdf" || !strings.Contains(in.Note, `the slug "pdf" is taken`) {
		t.Fatalf("carol's import: %+v, want a new skill pdf-v2 renamed from pdf, saying the slug is taken", in)
	}
	if s := e.shown("pdf", "alice"); s.Creator != "alice" || s.Share.Read != "user:alice" || len(s.Versions) != 1 {
		t.Fatalf("alice's pdf after carol's import: %+v, want it untouched", s)
	}
	if s := e.shown("pdf-v2", "carol"); s.Creator != "carol" || s.Share.Read != "global" {
		t.Fatalf("carol's pdf-v2: %+v, want hers, shared with everyone", s)
	}
	// Her next import updates her own; --replace makes it alice's next
	// version, alice's share kept.
	writeSkill(t, pdf, "name: pdf\ndescription: PDF v3", nil)
	repo.commit("v3")
	if in := e.importOne(repo.url(), "--skill", "pdf", "--as", "carol"); in.Slug != "pdf-v2" || len(e.shown("pdf-v2", "carol").Versions) != 2 {
		t.Fatalf("carol's re-import: %+v, want a second version of pdf-v2", in)
	}
	if in := e.importOne(repo.url(), "--skill", "pdf", "--replace", "--as", "carol"); in.Slug != "pdf" {
		t.Fatalf("carol's --replace: %+v, want a new version of pdf", in)
	}
	if s := e.shown("pdf", "alice"); s.Creator != "alice" || s.Share.Read != "user:alice" || len(s.Versions) != 2 {
		t.Fatalf("alice's pdf after --replace: %+v, want two versions, her share", s)
	}
}

// TestSkillBesideABuiltinLive: a skill installed as <slug>-vN beside a
// builtin, as imports did before builtin slugs were reserved, is still
// updated by re-importing its source; whoever may not update it is refused
// the builtin's slug.
func TestSkillBesideABuiltinLive(t *testing.T) {
	e := newCatalogEnv(t)
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	builtin := filepath.Join(t.TempDir(), "triage")
	writeSkill(t, builtin, "name: triage\ndescription: the builtin", nil)
	e.ok("skill", "import", builtin, "--builtin")
	// Such a skill: triage-v2, of the repository's skills/triage, its
	// SKILL.md named as an old import rewrote it.
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "market"))
	triage := filepath.Join(repo.dir, "skills", "triage")
	writeSkill(t, triage, "name: triage-v2\ndescription: an old install", nil)
	writeSkill(t, filepath.Join(repo.dir, "skills", "docx"), "name: docx\ndescription: DOCX", nil)
	repo.commit("v1")
	if in := e.importOne(repo.url(), "--skill", "triage", "--as", "alice"); in.Slug != "triage-v2" {
		t.Fatalf("alice's triage installed as %q", in.Slug)
	}
	// It now asks for the builtin's slug, under a name of its own (the
	// builtin's name is reserved as its slug is).
	writeSkill(t, triage, "slug: triage\nname: Alice's triage\ndescription: the builtin's slug", nil)
	repo.commit("v2")
	if in := e.importOne(repo.url(), "--skill", "triage", "--as", "alice"); in.Slug != "triage-v2" || len(e.shown("triage-v2", "alice").Versions) != 2 {
		t.Fatalf("alice's re-import: %+v, want a second version of triage-v2", in)
	}
	if r := e.run("skill", "import", repo.url(), "--skill", "triage", "--as", "bob"); r.code != 6 || !strings.Contains(r.stderr, `slug "triage" is reserved`) {
		t.Fatalf("bob's import of triage: exit %d, stderr %q; want 6, the slug reserved", r.code, r.stderr)
	}
}

// TestReservedSlugOfADisabledBuiltinLive: a disabled builtin does not exist
// for an ordinary user, so the refusal of its slug names no builtin; it
// still names it to an admin.
func TestReservedSlugOfADisabledBuiltinLive(t *testing.T) {
	e := newCatalogEnv(t)
	e.ok("user", "add", "dave")
	e.ok("user", "add", "carol", "--role", "admin")
	builtin := filepath.Join(t.TempDir(), "sys", "triage")
	writeSkill(t, builtin, "name: triage\ndescription: the builtin", nil)
	e.ok("skill", "import", builtin, "--builtin")
	mine := filepath.Join(t.TempDir(), "mine", "triage")
	writeSkill(t, mine, "name: triage\ndescription: my own", nil)
	refusal := func(as string) string {
		t.Helper()
		r := e.run("skill", "import", mine, "--as", as)
		if r.code != 6 || !strings.Contains(r.stderr, `slug "triage" is reserved`) || !strings.Contains(r.stderr, "give the skill another name") {
			t.Fatalf("import as %s: exit %d, stderr %q; want 6, the slug reserved, the way on", as, r.code, r.stderr)
		}
		return r.stderr
	}
	if msg := refusal("dave"); !strings.Contains(msg, `builtin skill "triage"`) {
		t.Errorf("enabled builtin, dave: %q, want it named", msg)
	}
	e.ok("skill", "disable", "triage")
	if msg := refusal("dave"); strings.Contains(msg, "builtin") {
		t.Errorf("disabled builtin, dave: %q, want no builtin named", msg)
	}
	if msg := refusal("carol"); !strings.Contains(msg, `builtin skill "triage"`) {
		t.Errorf("disabled builtin, carol: %q, want it named", msg)
	}
}

// TestPrivateSkillLeftOutSaysWhy: a skill the operator imports is private
// to the operator; the import says so and how to share it, and a session
// the operator opens for another user that names it says the skill is not
// readable (its share), not that it is missing. Asked as someone who does
// not manage it, the same session answers missing.
func TestPrivateSkillLeftOutSaysWhy(t *testing.T) {
	e := newEnv(t)
	e.serve("--examples=false")
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "pdf"), "name: pdf\ndescription: read PDF files", nil)
	stdout := e.ok("skill", "import", filepath.Join(src, "pdf"))
	if !strings.Contains(stdout, "readable by: user:operator (no one else") || !strings.Contains(stdout, "skillfs skill share pdf --read SCOPE") {
		t.Fatalf("skill import does not say who reads pdf:\n%s", stdout)
	}
	var out struct {
		Installed []struct{ Slug, Readable string } `json:"installed"`
	}
	e.okJSON(&out, "skill", "import", filepath.Join(src, "pdf"))
	if len(out.Installed) != 1 || out.Installed[0].Readable != "user:operator" {
		t.Fatalf("skill import --json: %+v, want pdf readable by user:operator", out.Installed)
	}
	r := e.run("session", "create", "--user", "alice", "--skills", "pdf")
	if r.code != 3 || !strings.Contains(r.stderr, `"pdf" (not readable)`) || !strings.Contains(r.stderr, "skillfs skill share SLUG --read SCOPE") {
		t.Fatalf("session of alice naming pdf: exit %d, stderr %q: want exit 3 saying pdf is not readable and how to share it", r.code, r.stderr)
	}
	// Through the API as bob, who does not know pdf, it is missing.
	a := newHostileAPI(e.home).send(t, "POST", "/v1/sessions", "bob", "application/json", nil, strings.NewReader(`{"user":"alice","skills":["pdf"]}`))
	if a.status != 404 || !strings.Contains(a.err.Error, `"pdf" (missing)`) || strings.Contains(a.err.Error, "skill share") {
		t.Fatalf("as bob: %s, want 404 saying pdf is missing", a)
	}
	e.ok("skill", "share", "pdf", "--read", "global")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "pdf")
	if !slices.Equal(s.Readable, []string{"pdf"}) {
		t.Fatalf("alice reads %v once pdf is shared", s.Readable)
	}
}
