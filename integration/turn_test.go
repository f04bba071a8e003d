package integration

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// turnJSON is what the tests read of `session turn --format json`.
type turnJSON struct {
	Prompt   string          `json:"prompt"`
	Selected []turnSkillJSON `json:"selected"`
	Text     string          `json:"text"`
}

type turnSkillJSON struct {
	Slug    string `json:"slug"`
	Name    string `json:"name"`
	Why     string `json:"why"`
	Args    string `json:"args"`
	Content string `json:"content"`
}

// TestSessionTurnLive: through the binary, a turn selects the alwaysApply
// skill and those the message names, with their SKILL.md, and activates
// them; without a read tool the list is left out; globs say which skills
// apply to which paths; a skill named like a builtin is refused; a skill
// shared since the last turn joins at the next.
func TestSessionTurnLive(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "ts-rules"), "name: TS rules\nslug: ts-rules\ndescription: TypeScript conventions\nalwaysApply: true\nglobs: \"**/*.ts, src/**\"", nil)
	e.ok("skill", "import", filepath.Join(src, "ts-rules"), "--as", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--all")

	var turn turnJSON
	e.okJSON(&turn, "session", "turn", s.ID, "--message", "/skill:release-notes v1.2\nand keep $commit-messages in mind", "--format", "json")
	var got []string
	for _, sel := range turn.Selected {
		got = append(got, sel.Slug+":"+sel.Why+":"+sel.Args)
	}
	if !slices.Equal(got, []string{"ts-rules:always:", "release-notes:mentioned:v1.2", "commit-messages:mentioned:"}) {
		t.Fatalf("selected %v", got)
	}
	if !strings.Contains(turn.Selected[1].Content, "name: release-notes") || turn.Selected[0].Name != "TS rules" ||
		turn.Text != "" || !strings.Contains(turn.Prompt, "<name>Commit messages</name>") {
		t.Errorf("turn %+v", turn)
	}
	var act struct {
		Activated []struct {
			Slug string `json:"slug"`
		} `json:"activated"`
	}
	e.okJSON(&act, "session", "activations", s.ID)
	if len(act.Activated) != 3 {
		t.Errorf("activations after the turn: %+v, want the three selected", act.Activated)
	}

	md := e.ok("session", "turn", s.ID, "--message", "$skill-authoring", "--no-read-tool", "--format", "markdown")
	if strings.Contains(md, "## Available skills") || !strings.Contains(md, "## Selected skills") ||
		!strings.Contains(md, "### skill-authoring (mentioned)") || !strings.Contains(md, "### TS rules (always)") {
		t.Errorf("markdown turn without a read tool:\n%s", md)
	}
	xml := e.ok("session", "turn", s.ID, "--message", "hello")
	if !strings.HasPrefix(xml, "<available_skills>") || !strings.Contains(xml, "<selected_skills>") {
		t.Errorf("xml turn:\n%s", xml)
	}

	var g struct {
		Paths []struct {
			Path   string `json:"path"`
			Skills []struct {
				Slug  string   `json:"slug"`
				Globs []string `json:"globs"`
			} `json:"skills"`
		} `json:"paths"`
	}
	e.okJSON(&g, "session", "globs", s.ID, "src/app.ts", "lib/util.ts", "README.md")
	if len(g.Paths) != 3 || len(g.Paths[0].Skills) != 1 || !slices.Equal(g.Paths[0].Skills[0].Globs, []string{"**/*.ts", "src/**"}) ||
		len(g.Paths[1].Skills) != 1 || len(g.Paths[2].Skills) != 0 {
		t.Errorf("globs %+v", g)
	}
	if out := e.ok("session", "globs", s.ID, "src/app.ts"); !strings.Contains(out, "ts-rules") {
		t.Errorf("session globs prints %q", out)
	}

	// A builtin's name is reserved as its slug is.
	writeSkill(t, filepath.Join(src, "spoof"), "name: commit messages\nslug: my-commits\ndescription: not the builtin", nil)
	if r := e.run("skill", "import", filepath.Join(src, "spoof"), "--as", "alice"); r.code != 6 ||
		!strings.Contains(r.stderr, `is reserved by the builtin skill "commit-messages"`) {
		t.Errorf("a skill named like a builtin: exit %d, stderr %q; want 6, the name reserved", r.code, r.stderr)
	}

	// The next turn is where a skill installed since joins.
	writeSkill(t, filepath.Join(src, "later"), "name: later\ndescription: installed after the session began\nalwaysApply: true", nil)
	e.ok("skill", "import", filepath.Join(src, "later"), "--as", "alice")
	e.okJSON(&turn, "session", "turn", s.ID, "--message", "", "--format", "json")
	if !slices.ContainsFunc(turn.Selected, func(x turnSkillJSON) bool { return x.Slug == "later" && x.Why == "always" }) {
		t.Errorf("the turn after an install selects %+v, want later among them", turn.Selected)
	}
}
