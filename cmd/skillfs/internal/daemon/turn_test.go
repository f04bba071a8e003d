package daemon

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
	"skillfs/skills/manifest"
	"skillfs/skills/skilltest"
)

// turnDaemon is a daemon with skills of every kind a turn tells apart,
// and a session of the operator's reading them all, preloading pre.
func turnDaemon(t *testing.T) (*Daemon, *api.SessionInfo) {
	t.Helper()
	d := newTestDaemon(t)
	for _, front := range []string{
		"name: base\ndescription: what pre builds on",
		"name: pre\ndescription: preloaded\nskill_dependencies: [base]",
		"name: rule\ndescription: always there\nalwaysApply: true",
		"name: cmd\ndescription: a command",
		"name: alpha\ndescription: named in the message\nglobs: \"**/*.ts, src/**\"",
		"name: hidden\ndescription: the user's only\ndisable-model-invocation: true\nglobs: [docs/*.md]",
		"name: bg\ndescription: background\nuser-invocable: false",
	} {
		install(t, d, front, skills.ScopeGlobal)
	}
	info, err := d.CreateSession(context.Background(), api.CreateRequest{User: catalog.Operator, All: true, Preload: []string{"pre"}})
	if err != nil {
		t.Fatal(err)
	}
	return d, info
}

func selectedOf(t *api.Turn) []string {
	var out []string
	for _, s := range t.Selected {
		out = append(out, s.Slug+":"+s.Why)
	}
	return out
}

// TestTurnSelectsAndActivates: a turn selects the preloaded skills (with
// their dependencies), then the alwaysApply ones, then those the message
// invokes or names, each once, with its SKILL.md; it lists the skills the
// model is offered; and every selected skill is activated as a read of its
// SKILL.md through the mount is: one activation per skill, whichever made
// it first, its opens counted by both.
func TestTurnSelectsAndActivates(t *testing.T) {
	ctx := context.Background()
	d, info := turnDaemon(t)
	readSKILL(t, d, info.ID, "alpha") // activated through the mount first

	msg := "/skill:cmd do it now\nthen $alpha, $bg, $hidden and again $cmd, and /skill:rule not at a line's start\n/skill:pre again"
	turn, err := d.Turn(ctx, info.ID, api.TurnRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"base:preloaded", "pre:preloaded", "rule:always", "cmd:mentioned", "alpha:mentioned", "hidden:mentioned"}
	if got := selectedOf(turn); !slices.Equal(got, want) {
		t.Fatalf("selected %v, want %v", got, want)
	}
	for _, s := range turn.Selected {
		if !strings.Contains(s.Content, "name: "+s.Slug+"\n") || s.Name != s.Slug || s.Path != d.agentPath+"/"+s.Slug+"/SKILL.md" {
			t.Errorf("selected %+v: want its SKILL.md, name and path", s)
		}
	}
	if turn.Selected[3].Args != "do it now" || turn.Selected[1].Args != "again" {
		t.Errorf("args: cmd %q, pre %q; want the rest of each command's line", turn.Selected[3].Args, turn.Selected[1].Args)
	}

	// The list: every skill the model is offered (not hidden), in XML.
	var list struct {
		Skills []struct {
			Name     string `xml:"name"`
			Location string `xml:"location"`
			Content  string `xml:"content"`
		} `xml:"skill"`
	}
	if err := xml.Unmarshal([]byte(turn.Prompt), &list); err != nil {
		t.Fatalf("prompt: %v\n%s", err, turn.Prompt)
	}
	var names []string
	for _, s := range list.Skills {
		names = append(names, s.Name)
		if s.Content != "" {
			t.Errorf("the list inlines %s", s.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"alpha", "base", "bg", "cmd", "pre", "rule"}) {
		t.Errorf("listed %v", names)
	}
	if !strings.HasPrefix(turn.Text, turn.Prompt) || !strings.Contains(turn.Text, "<selected_skills>") ||
		!strings.Contains(turn.Text, "<why>always</why>") || !strings.Contains(turn.Text, "<args>do it now</args>") {
		t.Errorf("text:\n%s", turn.Text)
	}
	var whole struct {
		XMLName xml.Name
	}
	if err := xml.Unmarshal([]byte("<turn>"+turn.Text+"</turn>"), &whole); err != nil {
		t.Errorf("the text is not well-formed XML: %v", err)
	}

	act, err := d.Activations(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	opens := map[string]int64{}
	for _, a := range act.Activated {
		opens[a.Slug] = a.Opens
	}
	for _, slug := range []string{"base", "pre", "rule", "cmd", "hidden"} {
		if opens[slug] != 1 {
			t.Errorf("%s: %d opens after one turn, want 1 (activations %+v)", slug, opens[slug], act.Activated)
		}
	}
	if opens["alpha"] != 2 || opens["bg"] != 0 || len(act.Activated) != 6 {
		t.Errorf("activations %+v: want alpha opened by the mount and the turn, bg never", act.Activated)
	}
	readSKILL(t, d, info.ID, "rule") // and the mount counts on the activation the turn made
	if err := d.rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	act, _ = d.Activations(ctx, info.ID)
	for _, a := range act.Activated {
		if a.Slug == "rule" && a.Opens != 2 {
			t.Errorf("rule after a turn and a read through the mount: %d opens, want 2", a.Opens)
		}
	}
}

// TestTurnFormats: without a read tool the list is left out; markdown
// renders both parts; json renders no text and gives the list in xml.
func TestTurnFormats(t *testing.T) {
	ctx := context.Background()
	d, info := turnDaemon(t)
	no := false
	turn, err := d.Turn(ctx, info.ID, api.TurnRequest{Message: "$cmd", ReadTool: &no})
	if err != nil {
		t.Fatal(err)
	}
	if turn.Prompt != "" || strings.Contains(turn.Text, "<available_skills>") || !strings.HasPrefix(turn.Text, "<selected_skills>") ||
		len(turn.Selected) != 4 {
		t.Errorf("no read tool: %+v", turn)
	}
	md, err := d.Turn(ctx, info.ID, api.TurnRequest{Message: "/skill:cmd x", Format: "markdown"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Available skills\n", "- **alpha** (`", "## Selected skills\n", "### rule (always)\n", "### cmd (mentioned)\n", "Arguments: x\n", "description: a command"} {
		if !strings.Contains(md.Text, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.Text)
		}
	}
	if !strings.HasPrefix(md.Text, md.Prompt) || strings.Contains(md.Prompt, "Selected") {
		t.Errorf("markdown prompt %q is not the text's list", md.Prompt)
	}
	js, err := d.Turn(ctx, info.ID, api.TurnRequest{Message: "", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	if js.Text != "" || !strings.HasPrefix(js.Prompt, "<available_skills>") || !slices.Equal(selectedOf(js), []string{"base:preloaded", "pre:preloaded", "rule:always"}) {
		t.Errorf("json: %+v", js)
	}
	if _, err := d.Turn(ctx, info.ID, api.TurnRequest{Format: "html"}); err == nil || !strings.Contains(err.Error(), `turn format "html"`) {
		t.Errorf("format html: %v", err)
	}
}

// TestTurnRefreshesTheSession: a turn is the next top-level turn: a skill
// the user may read since joins the session there, and a turn that finds
// nothing new records no refreshed event.
func TestTurnRefreshesTheSession(t *testing.T) {
	ctx := context.Background()
	d, info := turnDaemon(t)
	refreshed := func() int {
		t.Helper()
		page, err := d.db.Events(ctx, info.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range page.Events {
			if e.Type == skills.EventRefreshed {
				n++
			}
		}
		return n
	}
	if _, err := d.Turn(ctx, info.ID, api.TurnRequest{Message: "hi"}); err != nil {
		t.Fatal(err)
	}
	if n := refreshed(); n != 0 {
		t.Errorf("a turn with nothing new recorded %d refreshed events", n)
	}
	install(t, d, "name: fresh\ndescription: installed since\nalwaysApply: true", skills.ScopeGlobal)
	turn, err := d.Turn(ctx, info.ID, api.TurnRequest{Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(selectedOf(turn), "fresh:always") || !strings.Contains(turn.Prompt, "<name>fresh</name>") {
		t.Errorf("after an install, the turn selects %v, lists:\n%s", selectedOf(turn), turn.Prompt)
	}
	if _, err := os.Stat(filepath.Join(d.mountRoot, info.ID, "fresh", "SKILL.md")); err != nil {
		t.Errorf("fresh is not in the session's view after the turn: %v", err)
	}
	if n := refreshed(); n != 1 {
		t.Errorf("a turn that found a new skill recorded %d refreshed events, want 1", n)
	}
}

// TestGlobs: each path gets the skills whose globs match it, with those
// globs; a skill kept out of the list (disable-model-invocation) still
// applies.
func TestGlobs(t *testing.T) {
	ctx := context.Background()
	d, info := turnDaemon(t)
	paths := []string{"src/app.ts", "lib/x.ts", "src/README", "docs/guide.md", "docs/deep/guide.md", "go.mod"}
	if cost := sessionCost(t, d, info.ID, paths); cost > 1000 {
		t.Errorf("six paths against three globs cost %d steps", cost)
	}
	g, err := d.Globs(ctx, info.ID, paths)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range g.Paths {
		var parts []string
		for _, m := range p.Skills {
			parts = append(parts, m.Slug+"="+strings.Join(m.Globs, "+"))
		}
		got[p.Path] = strings.Join(parts, " ")
	}
	want := map[string]string{
		"src/app.ts": "alpha=**/*.ts+src/**", "lib/x.ts": "alpha=**/*.ts", "src/README": "alpha=src/**",
		"docs/guide.md": "hidden=docs/*.md", "docs/deep/guide.md": "", "go.mod": "",
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q, want %q", p, got[p], w)
		}
	}
	if len(g.Paths) != 6 || g.Paths[0].Path != "src/app.ts" {
		t.Errorf("paths %+v, want the six asked, in order", g.Paths)
	}
	if _, err := d.Globs(ctx, info.ID, make([]string, api.MaxGlobPaths+1)); err == nil || !strings.Contains(err.Error(), "1001 paths") {
		t.Errorf("too many paths: %v", err)
	}
	if _, err := d.Globs(ctx, info.ID, []string{strings.Repeat("a", api.MaxGlobPathLen+1)}); err == nil || !strings.Contains(err.Error(), "path 1 is 4097 bytes") {
		t.Errorf("a path too long: %v", err)
	}
}

// TestTurnAndGlobsRoutes: the routes answer the documented shapes, and the
// usual errors.
func TestTurnAndGlobsRoutes(t *testing.T) {
	d, info := turnDaemon(t)
	client := apitest.NewChecked(t, d.http.Handler(""))
	js := apitest.Header("Content-Type", "application/json")
	code, _, body := client.Send("POST", "/v1/sessions/"+info.ID+"/turn", js, []byte(`{"message":"$cmd","format":"markdown","read_tool":false}`))
	var turn api.Turn
	if code != http.StatusOK || json.Unmarshal(body, &turn) != nil || turn.Prompt != "" || len(turn.Selected) != 4 {
		t.Fatalf("turn: %d %s", code, body)
	}
	code, _, body = client.Send("POST", "/v1/sessions/"+info.ID+"/globs", js, []byte(`{"paths":["a.ts"]}`))
	var g api.Globs
	if code != http.StatusOK || json.Unmarshal(body, &g) != nil || len(g.Paths) != 1 || len(g.Paths[0].Skills) != 1 {
		t.Fatalf("globs: %d %s", code, body)
	}
	for _, tc := range []struct {
		path, body string
		code       int
		errCode    string
	}{
		{"/v1/sessions/" + info.ID + "/turn", `{"format":"yaml"}`, 400, "invalid"},
		{"/v1/sessions/" + info.ID + "/turn", `{"message":1}`, 400, "invalid"},
		{"/v1/sessions/0123456789abcdef0123456789abcdef/turn", `{}`, 404, "not_found"},
		{"/v1/sessions/0123456789abcdef0123456789abcdef/globs", `{"paths":[]}`, 404, "not_found"},
	} {
		code, _, body := client.Send("POST", tc.path, js, []byte(tc.body))
		if code != tc.code || apitest.ErrorCode(body) != tc.errCode {
			t.Errorf("POST %s %s: %d %s, want %d %s", tc.path, tc.body, code, body, tc.code, tc.errCode)
		}
	}
}

// TestPromptNamesAreUnique: a session's prompt shows no two skills under
// one name: a builtin keeps its name, then the user's own skill, then a
// shared one; a skill whose name is taken shows under its slug, and stays
// readable and selectable by its slug.
func TestPromptNamesAreUnique(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	for _, u := range []skills.User{{UID: "alice", Role: skills.RoleUser}, {UID: "bob", Role: skills.RoleAdmin}} {
		if err := d.cat.PutUser(ctx, "", u, true); err != nil {
			t.Fatal(err)
		}
	}
	imp := func(front, as string, builtin bool) {
		t.Helper()
		dir := skilltest.WriteDir(t, filepath.Join(t.TempDir(), "src"), skilltest.Skill(front, "body\n", nil))
		req := catalog.ImportRequest{Source: dir, As: as, Builtin: builtin}
		if as == "bob" { // shared with everyone; alice's stay her own
			req.Share = &skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}
		}
		if _, err := d.cat.Import(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// bob's skill takes the name before the builtin exists (as installs
	// could before builtin names were reserved).
	imp("name: Deploy Agent\nslug: spoof\ndescription: not the builtin", "bob", false)
	imp("name: Deploy Agent\nslug: deploy-agent\ndescription: the builtin", "", true)
	imp("name: Notes\nslug: bob-notes\ndescription: bob's", "bob", false)
	imp("name: notes\nslug: alice-notes\ndescription: alice's", "alice", false)
	imp("name: alice-notes\nslug: taken-twice\ndescription: named like alice's slug", "bob", false)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", All: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Prompt(ctx, info.ID, "xml")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Skills []struct {
			Name     string `xml:"name"`
			Location string `xml:"location"`
		} `xml:"skill"`
	}
	if err := xml.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{} // slug -> name
	for _, s := range p.Skills {
		shown[filepath.Base(filepath.Dir(s.Location))] = s.Name
	}
	want := map[string]string{"deploy-agent": "Deploy Agent", "spoof": "spoof", "alice-notes": "notes", "bob-notes": "bob-notes", "taken-twice": "taken-twice"}
	if len(shown) != len(want) {
		t.Errorf("prompt shows %v, want %v", shown, want)
	}
	for slug, n := range want {
		if shown[slug] != n {
			t.Errorf("%s shows as %q, want %q\n%s", slug, shown[slug], n, out)
		}
	}
	turn, err := d.Turn(ctx, info.ID, api.TurnRequest{Message: "use $spoof"})
	if err != nil {
		t.Fatal(err)
	}
	if len(turn.Selected) != 1 || turn.Selected[0].Slug != "spoof" || turn.Selected[0].Name != "spoof" ||
		!strings.Contains(turn.Selected[0].Content, "not the builtin") {
		t.Errorf("a turn naming $spoof selects %+v", turn.Selected)
	}
	if !strings.Contains(turn.Text, "<name>Deploy Agent</name>") || strings.Count(turn.Text, "<name>Deploy Agent</name>") != 1 {
		t.Errorf("the turn's text shows Deploy Agent other than once:\n%s", turn.Text)
	}
}

// TestGlobsWorkBounded: a request whose matching would cost too much
// against the globs of the session's skills is refused before matching,
// naming the numbers; the same skills answer a modest request.
func TestGlobsWorkBounded(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	var globs []string
	for i := range manifest.MaxGlobs {
		globs = append(globs, "'{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}/**/x"+strings.Repeat("y", i)+"'")
	}
	install(t, d, "name: heavy\ndescription: many globs\nglobs: ["+strings.Join(globs, ", ")+"]", skills.ScopeGlobal)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, All: true})
	if err != nil {
		t.Fatal(err)
	}
	deep := make([]string, 100)
	for i := range deep {
		deep[i] = strings.Repeat("a/", 200) + "x"
	}
	if _, err := d.Globs(ctx, info.ID, deep); !errors.Is(err, skills.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("would cost over %d steps", maxGlobCost)) {
		t.Errorf("a costly request: %v, want refused as over the bound", err)
	}
	modest := []string{"acegik/x", "bdfhjl/q/x", "x"}
	if cost := sessionCost(t, d, info.ID, modest); cost > maxGlobCost/10 {
		t.Errorf("a modest request costs %d", cost)
	}
	g, err := d.Globs(ctx, info.ID, modest)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Paths[0].Skills) != 1 || len(g.Paths[1].Skills) != 1 || len(g.Paths[2].Skills) != 0 {
		t.Errorf("a modest request: %+v", g.Paths)
	}
}
