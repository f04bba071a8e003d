package integration

import (
	"encoding/xml"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"skillfs/skills/skilltest"
)

// fixtureSession serves the fixture skills and opens a session of alice's
// on alpha and beta.
func fixtureSession(t *testing.T) (*env, sessionInfo) {
	e := newEnv(t)
	e.serve("--examples=false")
	e.importFixtures(fixtureSkills)
	e.ok("user", "add", "alice")
	return e, e.newSession("alice", "--skills", "alpha,beta")
}

// TestSessionSetOnLiveMount: `session set` and PATCH /v1/sessions/{id}
// change a running session's skills in place: the same id and path, kept
// skills at their pinned version with their activations, dropped skills
// gone from the mount before the command returns (names, reads, open
// handles), added ones readable, and the prompt follows.
func TestSessionSetOnLiveMount(t *testing.T) {
	e, s := fixtureSession(t)
	for _, rel := range []string{"alpha/SKILL.md", "beta/SKILL.md"} {
		if _, err := os.ReadFile(filepath.Join(s.Path, rel)); err != nil {
			t.Fatalf("read %s: %v", rel, err)
		}
	}
	held, err := os.Open(filepath.Join(s.Path, "beta", "references", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// A new version of alpha: the set must not move the session to it.
	src := filepath.Join(filepath.Dir(e.home), "src")
	alphaManifest := filepath.Join(src, "skills", "alpha", "SKILL.md")
	before, err := os.ReadFile(filepath.Join(s.Path, "alpha", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	skilltest.WriteFile(t, alphaManifest, []byte("---\nname: alpha\ndescription: Alpha, version two.\n---\n\nTwo.\n"), 0o644)
	var re importOut
	e.okJSON(&re, "skill", "import", src, "--skill", "alpha")
	if got := re.installedSlugs(); !slices.Equal(got, []string{"alpha"}) {
		t.Fatalf("re-import installed %v, want a new version of alpha", got)
	}

	var got sessionInfo
	e.okJSON(&got, "session", "set", s.ID, "--skills", "alpha,gamma", "--preload", "gamma")
	if got.ID != s.ID || got.Path != s.Path || !slices.Equal(got.Readable, []string{"alpha", "gamma"}) ||
		!slices.Equal(got.Preload, []string{"gamma"}) {
		t.Errorf("session set answered %+v; want the same session reading alpha and gamma, gamma preloaded", got)
	}
	if names := listNames(t, s.Path); !slices.Equal(names, []string{"alpha", "gamma"}) {
		t.Errorf("the live mount lists %v right after the set, want [alpha gamma]", names)
	}
	for _, rel := range []string{"beta", "beta/SKILL.md", "beta/references/api.md"} {
		if _, err := os.Stat(filepath.Join(s.Path, rel)); errnoOf(err) != syscall.ENOENT {
			t.Errorf("stat %s after the set: %v, want ENOENT", rel, err)
		}
	}
	if n, err := held.ReadAt(make([]byte, 8), 0); err == nil {
		t.Errorf("a handle opened on the dropped skill still reads (%d bytes)", n)
	}
	if now, err := os.ReadFile(filepath.Join(s.Path, "alpha", "SKILL.md")); err != nil || string(now) != string(before) {
		t.Errorf("alpha after the set reads %q, %v; want its pinned version %q", now, err, before)
	}
	if _, err := os.ReadFile(filepath.Join(s.Path, "gamma", "references", "g.md")); err != nil {
		t.Errorf("the added skill is not readable: %v", err)
	}
	a := e.activationsOf(s.ID)
	if a.opens("alpha") != 1 || a.opens("beta") != -1 || !slices.Equal(a.Preloaded, []string{"gamma"}) {
		t.Errorf("activations after the set: %+v; want alpha's kept, beta's gone, gamma preloaded", a)
	}

	// The prompt: beta gone, gamma inlined once and not listed too.
	var px promptXML
	if err := xml.Unmarshal([]byte(e.ok("session", "prompt", s.ID)), &px); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sk := range px.Skills {
		names = append(names, sk.Name)
		if (sk.Content != "") != (sk.Name == "gamma") {
			t.Errorf("prompt: %s inlined: %v", sk.Name, sk.Content != "")
		}
	}
	if !slices.Equal(names, []string{"alpha", "gamma"}) {
		t.Errorf("xml prompt names %v, want [alpha gamma]", names)
	}
	md := e.ok("session", "prompt", s.ID, "--format", "markdown")
	if n := strings.Count(md, "/home/gem/skills/gamma/SKILL.md"); n != 1 || !strings.Contains(md, "### gamma (preloaded)") ||
		strings.Contains(md, "- **gamma**") || strings.Contains(md, "beta") || !strings.Contains(md, "- **alpha**") {
		t.Errorf("markdown prompt after the set (gamma's location %d times):\n%s", n, md)
	}

	// The same through the API: alpha dropped, beta back at once.
	api := newAPIClient(e.home)
	var info sessionInfo
	if code := api.do(t, "PATCH", "/v1/sessions/"+s.ID, "", map[string]any{"skills": []string{"beta"}}, &info); code != http.StatusOK {
		t.Fatalf("PATCH: %d", code)
	}
	if !slices.Equal(info.Readable, []string{"beta"}) || len(info.Preload) != 0 {
		t.Errorf("PATCH answered %+v", info)
	}
	if names := listNames(t, s.Path); !slices.Equal(names, []string{"beta"}) {
		t.Errorf("the live mount lists %v after the PATCH, want [beta]", names)
	}
	if _, err := os.Stat(filepath.Join(s.Path, "alpha", "SKILL.md")); errnoOf(err) != syscall.ENOENT {
		t.Errorf("stat of alpha after the PATCH: %v, want ENOENT", err)
	}
	if a := e.activationsOf(s.ID); len(a.Activated) != 1 || a.opens("beta") != 1 {
		t.Errorf("activations after the PATCH: %+v; want beta's earlier one, alpha's hidden", a.Activated)
	}
	for _, body := range []any{map[string]any{}, map[string]any{"all": true, "skills": []string{"beta"}}} {
		if code := api.do(t, "PATCH", "/v1/sessions/"+s.ID, "", body, nil); code != http.StatusBadRequest {
			t.Errorf("PATCH %v: %d, want 400", body, code)
		}
	}

	// Usage and errors; none changes the session.
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"session", "set", s.ID}, 2},
		{[]string{"session", "set", s.ID, "--skills", "alpha", "--all"}, 2},
		{[]string{"session", "set", s.ID, "--skills", "alpha", "--preload", "gamma"}, 5},
		{[]string{"session", "set", "0123456789abcdef0123456789abcdef", "--all"}, 3},
	} {
		if r := e.run(tc.args...); r.code != tc.code {
			t.Errorf("skillfs %s: exit %d (%s), want %d", strings.Join(tc.args, " "), r.code, r.stderr, tc.code)
		}
	}
	var show sessionInfo
	e.okJSON(&show, "session", "show", s.ID)
	if !slices.Equal(show.Readable, []string{"beta"}) {
		t.Errorf("after refused sets the session reads %v", show.Readable)
	}
	e.okJSON(&show, "session", "set", s.ID, "--skills", "")
	if len(show.Readable) != 0 || len(listNames(t, s.Path)) != 0 {
		t.Errorf("session set --skills '': reads %v, lists %v", show.Readable, listNames(t, s.Path))
	}
}

// TestSkillCommands: a /skill:NAME line in a message resolves the skill as
// $NAME does, with its body without the frontmatter and the rest of the
// line as arguments, and activates it; $NAME keeps working beside it.
func TestSkillCommands(t *testing.T) {
	e, s := fixtureSession(t)
	var out struct {
		Mentions []struct {
			Slug, Path, Content, Body, Args string
			Command                         bool
		} `json:"mentions"`
	}
	text := "please look\n  /skill:beta summarize the api  \nand compare with $alpha and $beta; /skill:alpha is no command here\n/skill:gamma unreadable"
	e.okJSON(&out, "session", "mentions", s.ID, "--text", text)
	if len(out.Mentions) != 2 {
		t.Fatalf("mentions = %+v, want beta (command) then alpha", out.Mentions)
	}
	cmd, mention := out.Mentions[0], out.Mentions[1]
	manifest, err := os.ReadFile(filepath.Join(s.Path, "beta", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !cmd.Command || cmd.Slug != "beta" || cmd.Args != "summarize the api" || cmd.Content != string(manifest) ||
		cmd.Path != "/home/gem/skills/beta/SKILL.md" {
		t.Errorf("command = %+v", cmd)
	}
	if cmd.Body == "" || strings.Contains(cmd.Body, "description:") || strings.HasPrefix(cmd.Body, "---") ||
		!strings.Contains(string(manifest), cmd.Body) {
		t.Errorf("command body %q is not the SKILL.md %q without its frontmatter", cmd.Body, manifest)
	}
	if mention.Command || mention.Slug != "alpha" || mention.Body != "" || mention.Args != "" {
		t.Errorf("mention = %+v", mention)
	}
	// Both activated (the mount's read above made beta's first open).
	if a := e.activationsOf(s.ID); a.opens("alpha") != 1 || a.opens("beta") < 1 {
		t.Errorf("activations after the message: %+v", a.Activated)
	}
	plain := e.ok("session", "mentions", s.ID, "--text", "/skill:beta go")
	if !strings.Contains(plain, "== /skill:beta (/home/gem/skills/beta/SKILL.md)") ||
		!strings.Contains(plain, "Skill: /home/gem/skills/beta/SKILL.md\nUser: go\n") || strings.Contains(plain, "description:") {
		t.Errorf("session mentions, plain:\n%s", plain)
	}
	// Through the API, checked against the contract.
	api := newAPIClient(e.home)
	var res struct {
		Mentions []struct {
			Slug    string `json:"slug"`
			Command bool   `json:"command"`
		} `json:"mentions"`
	}
	if code := api.do(t, "POST", "/v1/sessions/"+s.ID+"/mentions", "", map[string]string{"text": "/skill:alpha\n$beta"}, &res); code != http.StatusOK ||
		len(res.Mentions) != 2 || !res.Mentions[0].Command || res.Mentions[0].Slug != "alpha" || res.Mentions[1].Command {
		t.Errorf("POST mentions: %d %+v", code, res.Mentions)
	}
}
