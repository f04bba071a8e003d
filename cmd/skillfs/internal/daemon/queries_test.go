package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// A skill revoked from the live view after the session was read (a set or
// a disable racing the message) is left out of the mentions, not an error.
func TestMentionsSkipASkillRevokedMeanwhile(t *testing.T) {
	d, _, info := oneSkillSession(t)
	ctx := context.Background()
	set, err := d.db.SkillSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.fs.SetSession(info.ID, d.view(set, nil)); err != nil { // the view without x; the index still pins it
		t.Fatal(err)
	}
	m, err := d.Mentions(ctx, info.ID, "use $x and\n/skill:x now")
	if err != nil || len(m) != 0 {
		t.Fatalf("mentions of a revoked skill: %+v, %v; want none", m, err)
	}
}

// TestResolveSkillURLs: skill://SLUG, skill://SLUG/SKILL.md (the form of
// the MCP skills extension) and its encoded spellings are the SKILL.md and
// activate the skill, once, as a read through the mount does; other files
// of the skill are read without activating; .., absolute and encoded
// escapes are refused as unsafe; a skill outside the readable set, or one
// that does not exist, is not found, alike.
func TestResolveSkillURLs(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	dir := skilltest.WriteDir(t, filepath.Join(t.TempDir(), "src"),
		skilltest.Skill("name: x\ndescription: one skill", "body\n", map[string]string{"references/tables.md": "# Tables\n"}))
	if _, err := d.cat.Import(ctx, catalog.ImportRequest{Source: dir, Share: &skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}}); err != nil {
		t.Fatal(err)
	}
	install(t, d, "name: other\ndescription: not in the session", skills.ScopeGlobal)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	opens := func() int64 {
		t.Helper()
		act, err := d.Activations(ctx, info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(act.Activated) == 0 {
			return 0
		}
		return act.Activated[0].Opens
	}
	res, err := d.Resolve(ctx, info.ID, "skill://x/references/tables.md")
	if err != nil || string(res.Data) != "# Tables\n" || !strings.HasPrefix(res.ContentType, "text/markdown") {
		t.Fatalf("skill://x/references/tables.md: %+v %v", res, err)
	}
	if n := opens(); n != 0 {
		t.Errorf("reading a reference activated the skill (%d opens)", n)
	}
	for i, uri := range []string{"skill://x/SKILL.md", "skill://x", "skill://x/", "skill://x/./SKILL.md", "skill://x/%53KILL.md"} {
		res, err := d.Resolve(ctx, info.ID, uri)
		if err != nil || !strings.Contains(string(res.Data), "name: x") {
			t.Errorf("%s: %v", uri, err)
			continue
		}
		if n := opens(); n != int64(i+1) {
			t.Errorf("after %s: %d opens, want %d", uri, n, i+1)
		}
	}
	readSKILL(t, d, info.ID, "x")
	if n := opens(); n != 6 {
		t.Errorf("the mount's read after the URLs': %d opens, want 6 on the one activation", n)
	}
	for _, uri := range []string{
		"skill://x/../other/SKILL.md", "skill://x/%2e%2e/other/SKILL.md", "skill://x/%2E%2E%2Fother%2FSKILL.md",
		"skill://x/references/../../other/SKILL.md", "skill://x/%2Fetc%2Fpasswd", "skill://x/..%5c..%5cetc", "skill://x/a%00b", "skill://x/%zz", "skill://x//SKILL.md",
	} {
		if _, err := d.Resolve(ctx, info.ID, uri); !errors.Is(err, skills.ErrUnsafePath) && !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("%s: %v, want refused as unsafe", uri, err)
		}
	}
	var msgs []string
	for _, uri := range []string{"skill://other/SKILL.md", "skill://nope/SKILL.md"} {
		_, err := d.Resolve(ctx, info.ID, uri)
		if !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("%s: %v, want not found", uri, err)
			continue
		}
		msgs = append(msgs, strings.Replace(err.Error(), strings.Split(strings.TrimPrefix(uri, "skill://"), "/")[0], "SLUG", 1))
	}
	if len(msgs) == 2 && msgs[0] != msgs[1] {
		t.Errorf("a skill outside the set and a missing one answer differently: %q, %q", msgs[0], msgs[1])
	}
	for _, uri := range []string{"skill://x/nope.md", "skill://x/.skillfs-version.json"} {
		if _, err := d.Resolve(ctx, info.ID, uri); !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("%s: %v, want not found", uri, err)
		}
	}
	if n := opens(); n != 6 {
		t.Errorf("refused URLs counted opens: %d, want 6", n)
	}
}
