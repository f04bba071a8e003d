package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"skillfs/skills"
)

var updateManifestGolden = flag.Bool("update-manifest", false, "rewrite testdata/manifest/*.golden.json")

// skillMD builds a SKILL.md from frontmatter lines and a body.
func skillMD(front, body string) string {
	return "---\n" + front + "---\n" + body
}

var (
	longName1100 = strings.Repeat("d", 1100)
	long550      = strings.Repeat("c", 550)
	name70       = strings.Repeat("a", 70)
	display130   = strings.Repeat("W", 130)
)

// anyMessage in a wanted Problem accepts whatever message the YAML parser
// produced.
const anyMessage = "*"

type manifestCase struct {
	name     string
	data     string
	folder   string    // ParseOptions.Folder
	want     *Manifest // nil when problems are expected; UserInvocable is set by checkManifestCase
	warnings []string
	problems []Problem
}

var strictCases = []manifestCase{
	{
		name: "minimal",
		data: skillMD("name: pdf\ndescription: Read PDFs.\n", "# PDF\n"),
		want: &Manifest{Name: "pdf", Slug: "pdf", Description: "Read PDFs.", Body: "# PDF\n"},
	},
	{
		name: "all fields",
		data: skillMD(`name: "  Word / DOCX  "
slug: docx
description: >
  Create and edit
  Word documents.
license: Apache-2.0
compatibility: Requires python3 and pandoc
metadata:
  version: 1.0
  author: "docs team"
  count: 010
allowed-tools: Bash(jq:*) Bash(git:*)
skill_dependencies: [" pdf ", pdf, "", xlsx, ~]
tool_dependencies: bash
mcp_dependencies:
  - github
  - " github "
  - slack
`, "Body\n---\nstill body\n"),
		want: &Manifest{
			Name: "Word / DOCX", Slug: "docx", Description: "Create and edit Word documents.",
			License: "Apache-2.0", Compatibility: "Requires python3 and pandoc",
			Metadata:          map[string]string{"version": "1.0", "author": "docs team", "count": "010"},
			AllowedTools:      "Bash(jq:*) Bash(git:*)",
			SkillDependencies: []string{"pdf", "xlsx"},
			ToolDependencies:  []string{"bash"},
			MCPDependencies:   []string{"github", "slack"},
			Body:              "Body\n---\nstill body\n",
		},
	},
	{
		name: "uppercase name",
		data: skillMD("name: MySkill\ndescription: d\n", ""),
		problems: []Problem{
			{"name", `"MySkill" must be lowercase`},
		},
	},
	{
		name:     "name over 64 characters",
		data:     skillMD("name: "+name70+"\ndescription: d\n", ""),
		problems: []Problem{{"name", "exceeds 64 characters (70)"}},
	},
	{
		name:     "leading hyphen",
		data:     skillMD("name: -my-skill\ndescription: d\n", ""),
		problems: []Problem{{"name", "must not start or end with a hyphen"}},
	},
	{
		name:     "trailing hyphen",
		data:     skillMD("name: my-skill-\ndescription: d\n", ""),
		problems: []Problem{{"name", "must not start or end with a hyphen"}},
	},
	{
		name:     "consecutive hyphens",
		data:     skillMD("name: my--skill\ndescription: d\n", ""),
		problems: []Problem{{"name", "must not contain consecutive hyphens"}},
	},
	{
		name: "underscore",
		data: skillMD("name: my_skill\ndescription: d\n", ""),
		problems: []Problem{
			{"name", `"my_skill" contains invalid characters; only lowercase letters, digits and hyphens are allowed`},
		},
	},
	{
		name:     "description over 1024 characters",
		data:     skillMD("name: pdf\ndescription: "+longName1100+"\n", ""),
		problems: []Problem{{"description", "exceeds 1024 characters (1100)"}},
	},
	{
		name:     "compatibility over 500 characters",
		data:     skillMD("name: pdf\ndescription: d\ncompatibility: "+long550+"\n", ""),
		problems: []Problem{{"compatibility", "exceeds 500 characters (550)"}},
	},
	{
		name: "allowed-tools with patterns",
		data: skillMD("name: git-helper\ndescription: d\nallowed-tools: Bash(jq:*) Bash(git:*)\n", ""),
		want: &Manifest{Name: "git-helper", Slug: "git-helper", Description: "d", AllowedTools: "Bash(jq:*) Bash(git:*)"},
	},
	{
		name: "allowed-tools as a list",
		data: skillMD("name: git-helper\ndescription: d\nallowed-tools: [Read, \" Bash(git:*) \", \"\"]\n", ""),
		want: &Manifest{Name: "git-helper", Slug: "git-helper", Description: "d", AllowedTools: "Read Bash(git:*)"},
	},
	{
		name: "metadata number kept as text",
		data: skillMD("name: pdf\ndescription: d\nmetadata: {version: 1.0}\n", ""),
		want: &Manifest{Name: "pdf", Slug: "pdf", Description: "d", Metadata: map[string]string{"version": "1.0"}},
	},
	{
		name:     "no frontmatter",
		data:     "# Just Markdown\n\nname: pdf\n",
		problems: []Problem{{"frontmatter", "must start with a --- line"}},
	},
	{
		name:     "frontmatter not on the first line",
		data:     "\n---\nname: pdf\ndescription: d\n---\n",
		problems: []Problem{{"frontmatter", "must start with a --- line"}},
	},
	{
		name:     "empty file",
		data:     "",
		problems: []Problem{{"frontmatter", "must start with a --- line"}},
	},
	{
		name:     "unclosed frontmatter",
		data:     "---\nname: pdf\ndescription: d\n",
		problems: []Problem{{"frontmatter", "not closed with a --- line"}},
	},
	{
		name:     "only an opening line",
		data:     "---",
		problems: []Problem{{"frontmatter", "not closed with a --- line"}},
	},
	{
		name:     "bad YAML",
		data:     skillMD("name: [invalid\ndescription: d\n", ""),
		problems: []Problem{{"frontmatter", anyMessage}},
	},
	{
		name:     "YAML list instead of a mapping",
		data:     skillMD("- name: pdf\n- description: d\n", ""),
		problems: []Problem{{"frontmatter", "must be a YAML mapping, not a list"}},
	},
	{
		name:     "YAML scalar instead of a mapping",
		data:     skillMD("just some text\n", ""),
		problems: []Problem{{"frontmatter", "must be a YAML mapping"}},
	},
	{
		name:     "second YAML document",
		data:     skillMD("name: pdf\ndescription: d\n...\n--- # more\nfoo: bar\n", ""),
		problems: []Problem{{"frontmatter", "must hold a single YAML document"}},
	},
	{
		name:     "missing name",
		data:     skillMD("description: d\n", ""),
		problems: []Problem{{"name", "is required"}},
	},
	{
		name:     "missing name with a slug",
		data:     skillMD("slug: pdf\ndescription: d\n", ""),
		problems: []Problem{{"name", "is required"}},
	},
	{
		name:     "missing description",
		data:     skillMD("name: pdf\n", ""),
		problems: []Problem{{"description", "is required"}},
	},
	{
		name:     "blank description",
		data:     skillMD("name: pdf\ndescription: \"  \"\n", ""),
		problems: []Problem{{"description", "must not be empty"}},
	},
	{
		name:     "null name",
		data:     skillMD("name:\ndescription: d\n", ""),
		problems: []Problem{{"name", "must not be empty"}},
	},
	{
		name:     "description is a list",
		data:     skillMD("name: pdf\ndescription: [a, b]\n", ""),
		problems: []Problem{{"description", "must be a string"}},
	},
	{
		name:     "empty frontmatter",
		data:     skillMD("", ""),
		problems: []Problem{{"name", "is required"}, {"description", "is required"}},
	},
	{
		name: "every problem at once",
		data: skillMD("name: My_Skill--\ndescription: "+longName1100+"\ncompatibility: "+long550+
			"\nmetadata: [a]\nskill_dependencies: [../x]\nlicense: {a: b}\n", ""),
		problems: []Problem{
			{"name", `"My_Skill--" must be lowercase`},
			{"name", "must not start or end with a hyphen"},
			{"name", "must not contain consecutive hyphens"},
			{"name", `"My_Skill--" contains invalid characters; only lowercase letters, digits and hyphens are allowed`},
			{"description", "exceeds 1024 characters (1100)"},
			{"license", "must be a string"},
			{"compatibility", "exceeds 500 characters (550)"},
			{"metadata", "must be a mapping of strings"},
			{"skill_dependencies", `"../x" is not a valid skill slug`},
		},
	},
	{
		name: "display name with explicit slug",
		data: skillMD("name: Word / DOCX\nslug: docx\ndescription: d\n", ""),
		want: &Manifest{Name: "Word / DOCX", Slug: "docx", Description: "d"},
	},
	{
		name:     "display name over 128 characters",
		data:     skillMD("name: "+display130+"\nslug: wide\ndescription: d\n", ""),
		problems: []Problem{{"name", "exceeds 128 characters (130)"}},
	},
	{
		name: "display name without slug",
		data: skillMD("name: Word / DOCX\ndescription: d\n", ""),
		problems: []Problem{
			{"name", `"Word / DOCX" must be lowercase`},
			{"name", `"Word / DOCX" contains invalid characters; only lowercase letters, digits and hyphens are allowed`},
		},
	},
	{
		name: "slug escaping upwards",
		data: skillMD("name: x\nslug: ../../x\ndescription: d\n", ""),
		problems: []Problem{
			{"slug", `"../../x" contains invalid characters; only lowercase letters, digits and hyphens are allowed`},
		},
	},
	{
		name: "slug with a slash",
		data: skillMD("name: x\nslug: a/b\ndescription: d\n", ""),
		problems: []Problem{
			{"slug", `"a/b" contains invalid characters; only lowercase letters, digits and hyphens are allowed`},
		},
	},
	{
		name:     "name escaping upwards",
		data:     skillMD("name: ../etc\ndescription: d\n", ""),
		problems: []Problem{{"name", `"../etc" contains invalid characters; only lowercase letters, digits and hyphens are allowed`}},
	},
	{
		name:     "empty slug",
		data:     skillMD("name: Pdf\nslug: \"\"\ndescription: d\n", ""),
		problems: []Problem{{"slug", "must not be empty"}},
	},
	{
		name:     "slug is a list",
		data:     skillMD("name: pdf\nslug: [pdf]\ndescription: d\n", ""),
		problems: []Problem{{"slug", "must be a string"}},
	},
	{
		name: "numeric name is a slug",
		data: skillMD("name: 2048\ndescription: d\n", ""),
		want: &Manifest{Name: "2048", Slug: "2048", Description: "d"},
	},
	{
		name:     "metadata value not a string",
		data:     skillMD("name: pdf\ndescription: d\nmetadata:\n  tags: [a, b]\n  ok: yes\n", ""),
		problems: []Problem{{"metadata", `value of "tags" must be a string`}},
	},
	{
		name:     "metadata duplicate key",
		data:     skillMD("name: pdf\ndescription: d\nmetadata:\n  a: 1\n  a: 2\n  a: 3\n", ""),
		problems: []Problem{{"metadata", `duplicate key "a"`}},
	},
	{
		name:     "allowed-tools is a mapping",
		data:     skillMD("name: pdf\ndescription: d\nallowed-tools: {Bash: yes}\n", ""),
		problems: []Problem{{"allowed-tools", "must be a string or a list of strings"}},
	},
	{
		name:     "dependency list is a mapping",
		data:     skillMD("name: pdf\ndescription: d\ntool_dependencies: {bash: yes}\n", ""),
		problems: []Problem{{"tool_dependencies", "must be a list of strings"}},
	},
	{
		name:     "dependency item is a list",
		data:     skillMD("name: pdf\ndescription: d\nmcp_dependencies: [github, [slack]]\n", ""),
		problems: []Problem{{"mcp_dependencies", "item 2 must be a string"}},
	},
	{
		name: "invalid skill dependencies",
		data: skillMD("name: pdf\ndescription: d\nskill_dependencies: [docx, Bad_Dep, a/b]\n", ""),
		problems: []Problem{
			{"skill_dependencies", `"Bad_Dep" is not a valid skill slug`},
			{"skill_dependencies", `"a/b" is not a valid skill slug`},
		},
	},
	{
		name:     "self dependency",
		data:     skillMD("name: pdf\ndescription: d\nskill_dependencies: [docx, pdf]\n", ""),
		problems: []Problem{{"skill_dependencies", `skill "pdf" must not depend on itself`}},
	},
	{
		name:     "duplicate key",
		data:     skillMD("name: pdf\ndescription: d\nname: docx\nname: xlsx\n", ""),
		problems: []Problem{{"frontmatter", `duplicate key "name"`}},
	},
	{
		name:     "non-string key",
		data:     skillMD("name: pdf\ndescription: d\n[a, b]: c\n", ""),
		problems: []Problem{{"frontmatter", "key at line 4 is not a string"}},
	},
	{
		name: "unknown keys are warnings",
		data: skillMD("name: pdf\ndescription: d\ncategory: 2\ntags: [a]\nallowed_tools: x\n", ""),
		want: &Manifest{Name: "pdf", Slug: "pdf", Description: "d", Unknown: []string{"allowed_tools", "category", "tags"}},
		warnings: []string{
			`frontmatter: unknown key "allowed_tools" kept`,
			`frontmatter: unknown key "category" kept`,
			`frontmatter: unknown key "tags" kept`,
		},
	},
	{
		name: "BOM and CRLF",
		data: "\uFEFF---\r\nname: pdf\r\ndescription: Read PDFs.\r\nmetadata:\r\n  v: 1\r\n---\r\n# PDF\r\n",
		want: &Manifest{Name: "pdf", Slug: "pdf", Description: "Read PDFs.", Metadata: map[string]string{"v": "1"}, Body: "# PDF\r\n"},
	},
	{
		name: "fences with trailing blanks and no final newline",
		data: "--- \nname: pdf\ndescription: d\n---\t",
		want: &Manifest{Name: "pdf", Slug: "pdf", Description: "d"},
	},
	{
		name: "aliases",
		data: skillMD("name: &n pdf\ndescription: *n\nskill_dependencies: &deps [docx]\n", ""),
		want: &Manifest{Name: "pdf", Slug: "pdf", Description: "pdf", SkillDependencies: []string{"docx"}},
	},
	{
		name:     "self-referencing alias",
		data:     skillMD("name: pdf\ndescription: d\nskill_dependencies: &a [docx, *a]\n", ""),
		problems: []Problem{{"skill_dependencies", "item 2 must be a string"}},
	},
	{
		name: "single string dependency",
		data: skillMD("name: pdf\ndescription: d\nskill_dependencies: docx\n", ""),
		want: &Manifest{Name: "pdf", Slug: "pdf", Description: "d", SkillDependencies: []string{"docx"}},
	},
}

var lenientCases = []manifestCase{
	{
		name: "uppercase name derives a slug",
		data: skillMD("name: MySkill\ndescription: d\n", ""),
		want: &Manifest{Name: "MySkill", Slug: "myskill", Description: "d"},
		warnings: []string{
			`slug: name "MySkill" is not a valid slug (upper case); using "myskill", derived from the name`,
		},
	},
	{
		name: "display name without slug",
		data: skillMD("name: Word / DOCX\ndescription: d\n", ""),
		want: &Manifest{Name: "Word / DOCX", Slug: "word-docx", Description: "d"},
		warnings: []string{
			`slug: name "Word / DOCX" is not a valid slug (upper case, characters other than a-z, 0-9 and -); using "word-docx", derived from the name`,
		},
	},
	{
		name: "invalid slug derives from the name",
		data: skillMD("name: Escape Hatch\nslug: ../../x\ndescription: d\n", ""),
		want: &Manifest{Name: "Escape Hatch", Slug: "escape-hatch", Description: "d"},
		warnings: []string{
			`slug: "../../x" is not a valid slug (characters other than a-z, 0-9 and -); using "escape-hatch", derived from the name`,
		},
	},
	{
		name: "unusable name falls back to the slug text",
		data: skillMD("name: \"!!!\"\nslug: My-Tool\ndescription: d\n", ""),
		want: &Manifest{Name: "!!!", Slug: "my-tool", Description: "d"},
		warnings: []string{
			`slug: "My-Tool" is not a valid slug (upper case); using "my-tool", derived from the slug`,
		},
	},
	{
		name:     "no usable slug",
		data:     skillMD("name: \"日本語\"\ndescription: d\n", ""),
		problems: []Problem{{"name", `no usable slug can be derived from "日本語"`}},
		warnings: []string{},
	},
	{
		name:     "missing name and slug",
		data:     skillMD("description: d\n", ""),
		problems: []Problem{{"name", "is required"}},
	},
	{
		name:     "missing name uses the slug",
		data:     skillMD("slug: pdf\ndescription: d\n", ""),
		want:     &Manifest{Name: "pdf", Slug: "pdf", Description: "d"},
		warnings: []string{`name: is required; using the slug "pdf" as the name`},
	},
	{
		name:     "missing description and no body",
		data:     skillMD("name: pdf\n", ""),
		want:     &Manifest{Name: "pdf", Slug: "pdf"},
		warnings: []string{"description: is required, and the body has no paragraph to take it from; it is empty"},
	},
	{
		name:     "description is a mapping",
		data:     skillMD("name: pdf\ndescription: {a: b}\n", "Reads PDFs.\n"),
		want:     &Manifest{Name: "pdf", Slug: "pdf", Description: "Reads PDFs.", Body: "Reads PDFs.\n"},
		warnings: []string{"description: must be a string; using the first paragraph of the body"},
	},
	{
		name:     "bad YAML the repair cannot fix",
		data:     skillMD("name: pdf\n  description: d\n", ""),
		problems: []Problem{{"frontmatter", anyMessage}},
	},
	{
		name: "no frontmatter and no folder",
		data: "# Title\n",
		warnings: []string{
			"frontmatter: none (the file does not start with a --- line); the whole file is the body",
			"description: is required; using the first heading of the body",
		},
		problems: []Problem{{"name", "is required"}},
	},
	{
		name: "length limits become warnings",
		data: skillMD("name: pdf\ndescription: "+longName1100+"\ncompatibility: "+long550+"\n", ""),
		want: &Manifest{Name: "pdf", Slug: "pdf", Description: longName1100, Compatibility: long550},
		warnings: []string{
			"description: exceeds 1024 characters (1100)",
			"compatibility: exceeds 500 characters (550)",
		},
	},
	{
		name: "bad fields are dropped",
		data: skillMD("name: pdf\ndescription: d\nmetadata: [a]\nlicense: [MIT]\nallowed-tools: {a: b}\n"+
			"skill_dependencies: [docx, ../x, pdf]\ntool_dependencies: {a: b}\nname: pdf\n", ""),
		want: &Manifest{Name: "pdf", Slug: "pdf", Description: "d", SkillDependencies: []string{"docx"}},
		warnings: []string{
			`frontmatter: duplicate key "name"`,
			"license: must be a string",
			"metadata: must be a mapping of strings",
			"allowed-tools: must be a string or a list of strings",
			"tool_dependencies: must be a list of strings",
			`skill_dependencies: "../x" is not a valid skill slug`,
			`skill_dependencies: skill "pdf" must not depend on itself`,
		},
	},
	{
		name:     "unknown keys",
		data:     skillMD("name: pdf\ndescription: d\nwhen_to_use: always\nWhen_To_Use: x\n", ""),
		want:     &Manifest{Name: "pdf", Slug: "pdf", Description: "d", Unknown: []string{"When_To_Use"}},
		warnings: []string{`frontmatter: unknown key "When_To_Use" kept`},
	},
}

func TestParseManifestStrict(t *testing.T) {
	for _, tc := range strictCases {
		t.Run(tc.name, func(t *testing.T) { checkManifestCase(t, tc, Strict) })
	}
}

func TestParseManifestLenient(t *testing.T) {
	for _, tc := range lenientCases {
		t.Run(tc.name, func(t *testing.T) { checkManifestCase(t, tc, Lenient) })
	}
}

// TestLenientAcceptsStrictValid checks that lenient mode reads every
// strictly valid manifest the same way, warnings included.
func TestLenientAcceptsStrictValid(t *testing.T) {
	for _, tc := range strictCases {
		if tc.want == nil {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { checkManifestCase(t, tc, Lenient) })
	}
}

func checkManifestCase(t testing.TB, tc manifestCase, mode Mode) {
	t.Helper()
	m, warnings, err := ParseWith([]byte(tc.data), ParseOptions{Mode: mode, Folder: tc.folder})
	if !slices.Equal(warnings, tc.warnings) {
		t.Errorf("warnings:\n got %q\nwant %q", warnings, tc.warnings)
	}
	if tc.want != nil {
		if err != nil {
			t.Fatalf("ParseManifest: %v", err)
		}
		// The tables list what a case sets; a skill is user-invocable unless
		// its frontmatter says otherwise, which TestParseManifestFlags covers.
		want := *tc.want
		want.UserInvocable = true
		if !reflect.DeepEqual(m, &want) {
			t.Errorf("manifest:\n got %#v\nwant %#v", m, &want)
		}
		if !ValidSlug(m.Slug) {
			t.Errorf("slug %q of an accepted manifest is not valid", m.Slug)
		}
		return
	}
	if m != nil {
		t.Errorf("manifest = %#v, want nil on error", m)
	}
	var me *Error
	if !errors.As(err, &me) {
		t.Fatalf("error = %v, want a *ManifestError", err)
	}
	if !errors.Is(err, skills.ErrInvalidManifest) {
		t.Errorf("errors.Is(%v, ErrInvalidManifest) = false", err)
	}
	got := slices.Clone(me.Problems)
	for i := range got {
		if i < len(tc.problems) && tc.problems[i].Message == anyMessage && got[i].Message != "" {
			got[i].Message = anyMessage
		}
	}
	if !slices.Equal(got, tc.problems) {
		t.Errorf("problems:\n got %q\nwant %q", me.Problems, tc.problems)
	}
}

func TestParseManifestUnknownMode(t *testing.T) {
	_, _, err := Parse([]byte(skillMD("name: pdf\ndescription: d\n", "")), Mode(7))
	if !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("error = %v, want ErrInvalid", err)
	}
}

func TestManifestError(t *testing.T) {
	_, _, err := Parse([]byte(skillMD("license: MIT\n", "")), Strict)
	var me *Error
	if !errors.As(err, &me) {
		t.Fatalf("error = %v, want *ManifestError", err)
	}
	if want := "invalid SKILL.md: name: is required; description: is required"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if got := me.Problems[1].String(); got != "description: is required" {
		t.Errorf("Problem.String() = %q", got)
	}
	wrapped := errors.Join(errors.New("import skills/pdf"), err)
	if !errors.Is(wrapped, skills.ErrInvalidManifest) || !errors.As(wrapped, &me) {
		t.Errorf("wrapped error lost its identity: %v", wrapped)
	}
}

func TestValidSlug(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"a", true},
		{"pdf", true},
		{"my-skill", true},
		{"a1-b2-c3", true},
		{"2048", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"-a", false},
		{"a-", false},
		{"-", false},
		{"a--b", false},
		{"A", false},
		{"my_skill", false},
		{"my skill", false},
		{".", false},
		{"..", false},
		{"../../x", false},
		{"a/b", false},
		{`a\b`, false},
		{"é", false},
		{"a\x00", false},
		{"a\n", false},
	} {
		if got := ValidSlug(tc.s); got != tc.want {
			t.Errorf("ValidSlug(%q) = %v, want %v", tc.s, got, tc.want)
		}
		if got := len(slugProblems(tc.s)) == 0; got != tc.want {
			t.Errorf("slugProblems(%q) = %q, disagrees with ValidSlug", tc.s, slugProblems(tc.s))
		}
	}
}

func TestSlugify(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"pdf", "pdf"},
		{"Word / DOCX", "word-docx"},
		{"  My Skill!! ", "my-skill"},
		{"MySkill", "myskill"},
		{"my_skill", "my-skill"},
		{"--x--", "x"},
		{"a--b", "a-b"},
		{"../../etc/passwd", "etc-passwd"},
		{"Café Münü", "cafe-munu"},
		{"Ünïcödé", "unicode"},
		{"Straße Œuvre", "strasse-oeuvre"},
		{"Cafe\u0301 au lait", "cafe-au-lait"},
		{"naïve×2", "naive-2"},
		{"", ""},
		{"!!!", ""},
		{"日本語", ""},
		{strings.Repeat("a", 100), strings.Repeat("a", 64)},
		{strings.Repeat("a", 63) + " b", strings.Repeat("a", 63)},
		{strings.Repeat("a", 62) + " b", strings.Repeat("a", 62) + "-b"},
	} {
		got := Slugify(tc.in)
		if got != tc.want {
			t.Errorf("Slugify(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got != "" && !ValidSlug(got) {
			t.Errorf("Slugify(%q) = %q is not a valid slug", tc.in, got)
		}
	}
}

type rewriteCase struct {
	name    string
	in      string
	slug    string
	want    string
	wantErr error
}

var rewriteCases = []rewriteCase{
	{
		name: "insert after the opening line",
		in:   "---\nname: docx\ndescription: d\n---\nbody\n",
		slug: "docx-v2",
		want: "---\nslug: docx-v2\nname: docx\ndescription: d\n---\nbody\n",
	},
	{
		name: "insert with BOM and CRLF",
		in:   "\uFEFF---\r\nname: pdf\r\ndescription: d\r\n---\r\n# PDF\r\n",
		slug: "pdf-v2",
		want: "\uFEFF---\r\nslug: pdf-v2\r\nname: pdf\r\ndescription: d\r\n---\r\n# PDF\r\n",
	},
	{
		name: "insert before leading comments",
		in:   "---\n# identity\nname: pdf\ndescription: d\n---\n",
		slug: "pdf-v3",
		want: "---\nslug: pdf-v3\n# identity\nname: pdf\ndescription: d\n---\n",
	},
	{
		name: "insert into an indented mapping",
		in:   "---\n  name: pdf\n  description: d\n---\n",
		slug: "pdf-v2",
		want: "---\n  slug: pdf-v2\n  name: pdf\n  description: d\n---\n",
	},
	{
		name: "insert after a tag of the mapping",
		in:   "---\n!!map\nname: pdf\ndescription: d\n---\n",
		slug: "pdf-v2",
		want: "---\n!!map\nslug: pdf-v2\nname: pdf\ndescription: d\n---\n",
	},
	{
		name: "insert into a flow mapping",
		in:   "---\n{name: pdf, description: d}\n---\n",
		slug: "pdf-v2",
		want: "---\n{slug: pdf-v2, name: pdf, description: d}\n---\n",
	},
	{
		name: "replace a plain value and keep its comment",
		in:   "---\nname: Word / DOCX\nslug: docx   # identity\ndescription: d\n---\n",
		slug: "docx-v2",
		want: "---\nname: Word / DOCX\nslug: docx-v2   # identity\ndescription: d\n---\n",
	},
	{
		name: "replace a double-quoted value",
		in:   "---\nname: Word / DOCX\nslug: \"docx\"\ndescription: d\n---\n",
		slug: "docx-v2",
		want: "---\nname: Word / DOCX\nslug: \"docx-v2\"\ndescription: d\n---\n",
	},
	{
		name: "replace a single-quoted value with CRLF",
		in:   "---\r\nname: Word / DOCX\r\nslug: 'docx'\r\ndescription: d\r\n---\r\n",
		slug: "docx-v2",
		want: "---\r\nname: Word / DOCX\r\nslug: 'docx-v2'\r\ndescription: d\r\n---\r\n",
	},
	{
		name: "replace a block scalar",
		in:   "---\nname: Word / DOCX\nslug: >-\n  docx\n\ndescription: d\n---\n",
		slug: "docx-v2",
		want: "---\nname: Word / DOCX\nslug: docx-v2\n\ndescription: d\n---\n",
	},
	{
		name: "replace a value on the next line",
		in:   "---\nname: Word / DOCX\nslug:\n  docx\n# the display name stays\ndescription: d\n---\n",
		slug: "docx-v2",
		want: "---\nname: Word / DOCX\nslug:\n  docx-v2\n# the display name stays\ndescription: d\n---\n",
	},
	{
		name: "replace a block scalar whose indicator is on the next line",
		in:   "---\nname: Word\nslug:\n>\n docx\ndescription: d\n---\n",
		slug: "docx-v2",
		want: "---\nname: Word\nslug: docx-v2\ndescription: d\n---\n",
	},
	{
		name: "replace an invalid slug",
		in:   "---\nname: Word / DOCX\nslug: Word_Docx\ndescription: d\n---\n",
		slug: "word-docx",
		want: "---\nname: Word / DOCX\nslug: word-docx\ndescription: d\n---\n",
	},
	{
		name: "replace inside a flow mapping",
		in:   "---\n{name: Word, slug: docx, description: d}\n---\n",
		slug: "docx-v2",
		want: "---\n{name: Word, slug: docx-v2, description: d}\n---\n",
	},
	{
		name: "same slug changes nothing",
		in:   "---\nname: Word\nslug: docx\ndescription: d\n---\nbody",
		slug: "docx",
		want: "---\nname: Word\nslug: docx\ndescription: d\n---\nbody",
	},
	{
		name: "empty frontmatter",
		in:   "---\n---\nbody\n",
		slug: "pdf",
		want: "---\nslug: pdf\n---\nbody\n",
	},
	{name: "invalid slug argument", in: "---\nname: pdf\ndescription: d\n---\n", slug: "../../x", wantErr: skills.ErrInvalid},
	{name: "uppercase slug argument", in: "---\nname: pdf\ndescription: d\n---\n", slug: "Pdf", wantErr: skills.ErrInvalid},
	{name: "empty slug argument", in: "---\nname: pdf\ndescription: d\n---\n", slug: "", wantErr: skills.ErrInvalid},
	{
		name: "no frontmatter",
		in:   "# PDF\n\nRead PDFs.\n",
		slug: "pdf",
		want: "---\nslug: pdf\n---\n# PDF\n\nRead PDFs.\n",
	},
	{
		name: "no frontmatter with BOM and CRLF",
		in:   "\uFEFF# PDF\r\nRead PDFs.\r\n",
		slug: "pdf",
		want: "\uFEFF---\r\nslug: pdf\r\n---\r\n# PDF\r\nRead PDFs.\r\n",
	},
	{name: "empty file", in: "", slug: "pdf", want: "---\nslug: pdf\n---\n"},
	{
		name: "replace a flow collection spread over lines",
		in:   "---\nname: Word\nslug: {\n a: 1\n}\n# kept\ndescription: d\n---\n",
		slug: "word-v2",
		want: "---\nname: Word\nslug: word-v2\n# kept\ndescription: d\n---\n",
	},
	{name: "null frontmatter", in: "---\n~\n---\nbody\n", slug: "pdf", want: "---\nslug: pdf\n---\nbody\n"},
	{name: "frontmatter of a bare tag", in: "---\n!\n---\n", slug: "pdf", want: "---\nslug: pdf\n---\n"},
	{
		name: "frontmatter that parses after the repair is stored repaired",
		in:   "---\nname: PDF\ndescription: Use when: PDFs come up\n---\nbody\n",
		slug: "pdf-v2",
		want: "---\nslug: pdf-v2\nname: PDF\ndescription: \"Use when: PDFs come up\"\n---\nbody\n",
	},
	{
		name: "replace a slug in frontmatter that parses after the repair",
		in:   "---\r\nname: PDF\r\nslug: pdf: tools\r\ndescription: Use when: PDFs come up\r\n---\r\n",
		slug: "pdf-v2",
		want: "---\r\nname: PDF\r\nslug: \"pdf-v2\"\r\ndescription: \"Use when: PDFs come up\"\r\n---\r\n",
	},
	{name: "unclosed frontmatter", in: "---\nname: pdf\n", slug: "pdf", wantErr: skills.ErrInvalidManifest},
	{name: "list frontmatter", in: "---\n- a\n---\n", slug: "pdf", wantErr: skills.ErrInvalidManifest},
	{name: "bad YAML", in: "---\nname: pdf\n  description: d\n---\n", slug: "pdf", wantErr: skills.ErrInvalidManifest},
	{name: "duplicate slug keys", in: "---\nslug: a\nslug: b\n---\n", slug: "pdf", wantErr: skills.ErrInvalidManifest},
	{
		name: "escaped slug in a flow mapping",
		in:   "---\n{name: Word, slug: \"do\\x63x\", description: d}\n---\n",
		slug: "docx-v2",
		want: "---\n{name: Word, slug: \"docx-v2\", description: d}\n---\n",
	},
	{
		name: "tagged slug",
		in:   "---\nname: Word\nslug: !!str 'it''s'  # odd\ndescription: d\n---\n",
		slug: "docx",
		want: "---\nname: Word\nslug: !!str 'docx'  # odd\ndescription: d\n---\n",
	},
	{
		name: "quoted slug key",
		in:   "---\n\"slug\": pdf\nname: PDF\ndescription: d\n---\n",
		slug: "pdf-v2",
		want: "---\n\"slug\": pdf-v2\nname: PDF\ndescription: d\n---\n",
	},
	{
		name: "slug in a multi-line flow mapping",
		in:   "---\n{name: Word,\n  slug: docx,\n  description: d}\n---\n",
		slug: "docx-v2",
		want: "---\n{name: Word,\n  slug: docx-v2,\n  description: d}\n---\n",
	},
	{
		name: "anchored slug nobody uses",
		in:   "---\nname: Word\nslug: &id docx # anchor\ndescription: d\n---\n",
		slug: "docx-v2",
		want: "---\nname: Word\nslug: docx-v2\ndescription: d\n---\n",
	},
	{
		name:    "anchored slug used as the name",
		in:      "---\nslug: &id docx\nname: *id\ndescription: d\n---\n",
		slug:    "docx-v2",
		wantErr: skills.ErrInvalidManifest,
	},
}

func TestRewriteSlug(t *testing.T) {
	for _, tc := range rewriteCases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := RewriteSlug([]byte(tc.in), tc.slug)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("RewriteSlug error = %v, want %v", err, tc.wantErr)
				}
				if out != nil {
					t.Errorf("RewriteSlug returned %q with an error", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("RewriteSlug: %v", err)
			}
			if string(out) != tc.want {
				t.Errorf("RewriteSlug:\n got %q\nwant %q", out, tc.want)
			}
			if fm, msg := splitFM([]byte(tc.in)); msg == "" {
				if _, msg := decodeFM(fm.front); msg != "" {
					return // stored repaired: more than the slug line changes
				}
			}
			checkOneLineChanged(t, []byte(tc.in), out, tc.slug)
			checkRewritten(t, []byte(tc.in), out, tc.slug)
		})
	}
}

// checkOneLineChanged checks that out differs from in by one line at most:
// the slug line, inserted or replacing the lines of the old slug entry.
func checkOneLineChanged(t testing.TB, in, out []byte, slug string) {
	t.Helper()
	if _, msg := splitFM(in); msg == msgNoOpening {
		// A file without frontmatter gets one, of three lines, in front.
		start := len(in) - len(bytes.TrimPrefix(in, manifestBOM))
		for _, eol := range []string{"\n", "\r\n"} {
			block := "---" + eol + "slug: " + slug + eol + "---" + eol
			if string(out) == string(in[:start])+block+string(in[start:]) {
				return
			}
		}
		t.Errorf("rewrite of a file without frontmatter gave %q, want a slug block in front of it", out)
		return
	}
	a, b := bytes.SplitAfter(in, []byte("\n")), bytes.SplitAfter(out, []byte("\n"))
	for len(a) > 0 && len(b) > 0 && bytes.Equal(a[0], b[0]) {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && bytes.Equal(a[len(a)-1], b[len(b)-1]) {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	if len(b) == 0 && len(a) == 0 {
		return
	}
	if len(b) != 1 || !bytes.Contains(b[0], []byte(slug)) {
		t.Errorf("changed lines %q, want one line holding the slug", b)
	}
	if len(a) > 3 {
		t.Errorf("removed lines %q, want the old slug entry at most", a)
	}
}

// checkRewritten parses both files and checks that only the slug changed.
func checkRewritten(t testing.TB, in, out []byte, slug string) {
	t.Helper()
	before, _, err := Parse(in, Lenient)
	if err != nil {
		// Nothing to compare with; the slug must still be there.
		fm, msg := splitFM(out)
		if msg != "" {
			t.Fatalf("rewritten file: %s", msg)
		}
		root, msg := decodeFM(fm.front)
		if msg != "" || root == nil || len(root.Content) != 2 || root.Content[1].Value != slug {
			t.Fatalf("rewritten frontmatter %q does not hold only the slug", fm.front)
		}
		return
	}
	after, _, err := Parse(out, Lenient)
	if err != nil {
		t.Fatalf("parse rewritten: %v", err)
	}
	if after.Slug != slug {
		t.Errorf("rewritten slug = %q, want %q", after.Slug, slug)
	}
	before.Slug, after.Slug = "", ""
	if !reflect.DeepEqual(before, after) {
		t.Errorf("rewrite changed more than the slug:\nbefore %#v\n after %#v", before, after)
	}
	if _, _, err := Parse(in, Strict); err == nil {
		if _, _, err := Parse(out, Strict); err != nil {
			t.Errorf("rewritten file of a strictly valid one is invalid: %v", err)
		}
	}
}

// goldenResult is what a golden file records for one mode.
type goldenResult struct {
	Manifest *Manifest `json:"manifest"`
	Warnings []string  `json:"warnings"`
	Problems []Problem `json:"problems"`
}

// TestParseManifestFixtures parses the SKILL.md fixtures from disk in both
// modes, leniently also with the fixture's name as the folder name, and
// compares with golden files; -update-manifest rewrites them.
func TestParseManifestFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "manifest", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/manifest")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			// Lenient mode runs twice: as for a lone file, and as for the
			// folder named after the fixture, as imports read it.
			folder := strings.TrimSuffix(filepath.Base(file), ".md")
			results := map[string]goldenResult{}
			for key, opts := range map[string]ParseOptions{
				"strict":         {Mode: Strict},
				"lenient":        {Mode: Lenient},
				"lenient_folder": {Mode: Lenient, Folder: folder},
			} {
				m, w, err := ParseWith(data, opts)
				r := goldenResult{Manifest: m, Warnings: w}
				var me *Error
				if errors.As(err, &me) {
					r.Problems = me.Problems
				} else if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				results[key] = r
			}
			got, err := json.MarshalIndent(results, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(file, ".md") + ".golden.json"
			if *updateManifestGolden {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update-manifest to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the parse result:\n%s", golden, got)
			}
		})
	}
}

// manifestSeeds returns every input the tests use.
func manifestSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	for _, cases := range [][]manifestCase{strictCases, lenientCases} {
		for _, tc := range cases {
			seeds = append(seeds, []byte(tc.data))
		}
	}
	for _, tc := range rewriteCases {
		seeds = append(seeds, []byte(tc.in))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "manifest", "*.md"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	return seeds
}

func FuzzParseManifest(f *testing.F) {
	for _, s := range manifestSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkManifestProperties)
}

// FuzzManifestFields builds SKILL.md files from field values, so that the
// fuzzer spends its time on values and layouts rather than on the fences.
func FuzzManifestFields(f *testing.F) {
	f.Add("pdf", "", "Read PDFs.", "", false)
	f.Add("Word / DOCX", "docx", "Edit documents.", "metadata: {version: 1.0}", true)
	f.Add("x", "'x'", ">\n  folded\n  text", "slug2: y\n# c", false)
	f.Add("\"a\"", "&a b", "*a", "skill_dependencies: [c, d]", true)
	f.Fuzz(func(t *testing.T, name, slug, description, extra string, crlf bool) {
		var b strings.Builder
		b.WriteString("---\nname: " + name + "\n")
		if slug != "" {
			b.WriteString("slug: " + slug + "\n")
		}
		b.WriteString("description: " + description + "\n" + extra + "\n---\nbody\n")
		data := b.String()
		if crlf {
			data = strings.ReplaceAll(data, "\n", "\r\n")
		}
		checkManifestProperties(t, []byte(data))
	})
}

// checkManifestProperties checks what must hold for any input: no mode
// panics, failures are *Error, a strictly valid file reads the same
// leniently, and its slug can be rewritten, to the same value or another,
// changing nothing else.
func checkManifestProperties(t *testing.T, data []byte) {
	t.Helper()
	lm, lw, lerr := Parse(data, Lenient)
	checkParseResult(t, Lenient, lm, lerr)
	for _, folder := range fuzzFolders {
		checkLenientWithFolder(t, data, folder, lm, lerr)
	}
	m, w, err := Parse(data, Strict)
	checkParseResult(t, Strict, m, err)
	if err != nil {
		return
	}
	if lerr != nil || !reflect.DeepEqual(lm, m) || !slices.Equal(lw, w) {
		t.Fatalf("lenient disagrees with strict on a valid file:\nstrict  %#v %q\nlenient %#v %q %v", m, w, lm, lw, lerr)
	}

	out, err := RewriteSlug(data, m.Slug)
	if err != nil && aliasedSlug(t, data) {
		return // refused by design: the aliases would change with it
	}
	if err != nil {
		t.Fatalf("RewriteSlug with the same slug: %v\n in %q", err, data)
	}
	m2, w2, err := Parse(out, Strict)
	if err != nil || !reflect.DeepEqual(m, m2) || !slices.Equal(w, w2) {
		t.Fatalf("same-slug rewrite parses differently:\n in  %q\n out %q\n %#v\n %#v %v", data, out, m, m2, err)
	}

	other := m.Slug + "-v2"
	if !ValidSlug(other) {
		other = "renamed-v2"
	}
	if slices.Contains(m.SkillDependencies, other) {
		return // a rename onto a dependency makes it a self-dependency
	}
	out, err = RewriteSlug(data, other)
	if err != nil {
		t.Fatalf("RewriteSlug(%q): %v", other, err)
	}
	m3, _, err := Parse(out, Strict)
	if err != nil {
		t.Fatalf("renamed file is invalid: %v\n in  %q\n out %q", err, data, out)
	}
	if m3.Slug != other || m3.Name != m.Name {
		t.Fatalf("rename gave slug %q name %q, want %q %q", m3.Slug, m3.Name, other, m.Name)
	}
	m3.Slug = m.Slug
	if !reflect.DeepEqual(m, m3) {
		t.Fatalf("rename changed more than the slug:\n in  %q\n out %q", data, out)
	}
}

// fuzzFolders are the folder names every fuzzed input is also parsed with:
// a slug, a display name, one that yields no slug, and none.
var fuzzFolders = []string{"pdf-tools", "My Folder", "数据", ""}

// checkLenientWithFolder checks a lenient parse with a folder name: it is a
// proper result; it agrees on the slug with the parse without folder (plain,
// perr) whenever that succeeds; and the slug it settles can be written into
// the file, which then gives that slug, and the same description, without
// the folder, as the catalog relies on.
func checkLenientWithFolder(t *testing.T, data []byte, folder string, plain *Manifest, perr error) {
	t.Helper()
	m, _, err := ParseWith(data, ParseOptions{Mode: Lenient, Folder: folder})
	checkParseResult(t, Lenient, m, err)
	if err != nil {
		if perr == nil {
			t.Fatalf("refused with folder %q, accepted without: %v", folder, err)
		}
		return
	}
	if perr == nil && plain.Slug != m.Slug {
		t.Fatalf("slug %q with folder %q, %q without", m.Slug, folder, plain.Slug)
	}
	out, err := RewriteSlug(data, m.Slug)
	if err != nil {
		if aliasedSlug(t, data) || duplicateSlugKey(data) || flowFrontmatter(data) {
			return // refused by design
		}
		t.Fatalf("RewriteSlug(%q) of a file lenient parsing accepts: %v\n in %q", m.Slug, err, data)
	}
	back, _, err := Parse(out, Lenient)
	if err != nil && len(out) > len(data) && strings.Contains(err.Error(), "byte limit") {
		return // the slug line took the frontmatter over the limit
	}
	if err != nil || back.Slug != m.Slug || back.Description != m.Description {
		t.Fatalf("rewritten file reads back as %+v, %v; want slug %q, description %q\n in  %q\n out %q",
			back, err, m.Slug, m.Description, data, out)
	}
}

// flowFrontmatter reports whether the frontmatter of data is one flow
// mapping (`{name: x, slug: y}`), where RewriteSlug edits only a scalar slug
// value in place and otherwise refuses.
func flowFrontmatter(data []byte) bool {
	root := lenientRoot(data)
	return root != nil && root.Style&yaml.FlowStyle != 0
}

// lenientRoot is the root mapping of data's frontmatter as lenient parsing
// reads it (repaired if need be), or nil.
func lenientRoot(data []byte) *yaml.Node {
	fm, msg := splitFM(data)
	if msg != "" {
		return nil
	}
	root, msg := decodeFM(fm.front)
	if msg != "" {
		_, root, _ = repairFM(fm.front)
	}
	return root
}

// duplicateSlugKey reports whether the frontmatter of data, as lenient
// parsing reads it, has the key slug more than once: lenient parsing takes
// the last, RewriteSlug refuses to guess.
func duplicateSlugKey(data []byte) bool {
	root := lenientRoot(data)
	if root == nil {
		return false
	}
	n := 0
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := yamlDeref(root.Content[i]); k.Kind == yaml.ScalarNode && k.Value == KeySlug {
			n++
		}
	}
	return n > 1
}

// aliasedSlug reports whether the slug value of data carries an anchor,
// the one layout RewriteSlug may refuse in a valid file.
func aliasedSlug(t testing.TB, data []byte) bool {
	t.Helper()
	fm, msg := splitFM(data)
	if msg != "" {
		return false
	}
	root, msg := decodeFM(fm.front)
	if msg != "" || root == nil {
		return false
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if yamlDeref(root.Content[i]).Value == KeySlug && root.Content[i+1].Anchor != "" {
			return true
		}
	}
	return false
}

// checkParseResult checks one parse: a failure is a *Error and no
// manifest; an accepted manifest has a valid slug and a name, and in Strict
// mode a description (Lenient mode serves a skill without one).
func checkParseResult(t testing.TB, mode Mode, m *Manifest, err error) {
	t.Helper()
	if err != nil {
		var me *Error
		if !errors.As(err, &me) || len(me.Problems) == 0 || !errors.Is(err, skills.ErrInvalidManifest) || m != nil {
			t.Fatalf("bad failure: m=%v err=%v", m, err)
		}
		return
	}
	if !ValidSlug(m.Slug) {
		t.Fatalf("accepted slug %q is not valid", m.Slug)
	}
	if m.Name == "" || mode == Strict && m.Description == "" {
		t.Fatalf("accepted manifest without name or description: %#v", m)
	}
}

func FuzzRewriteSlug(f *testing.F) {
	for _, s := range manifestSeeds(f) {
		f.Add(s, "pdf-v2")
	}
	f.Add([]byte("---\nname: a\ndescription: b\n---\n"), "../x")
	f.Add([]byte("---\nname: a\ndescription: b\n---\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, slug string) {
		out, err := RewriteSlug(data, slug)
		if !ValidSlug(slug) {
			if !errors.Is(err, skills.ErrInvalid) {
				t.Fatalf("invalid slug %q: error = %v, want ErrInvalid", slug, err)
			}
			return
		}
		before, _, perr := Parse(data, Strict)
		if err != nil {
			if !errors.Is(err, skills.ErrInvalidManifest) {
				t.Fatalf("error = %v, want ErrInvalidManifest", err)
			}
			if perr == nil && !aliasedSlug(t, data) {
				t.Fatalf("RewriteSlug refused a valid file: %v\n in %q", err, data)
			}
			return
		}
		if _, _, lerr := Parse(data, Lenient); lerr == nil {
			lm, _, err := Parse(out, Lenient)
			if err != nil || lm.Slug != slug {
				t.Fatalf("lenient parse of the rewritten file: %v %+v\n in  %q\n out %q", err, lm, data, out)
			}
		}
		if perr != nil || slices.Contains(before.SkillDependencies, slug) {
			return
		}
		after, _, err := Parse(out, Strict)
		if err != nil {
			t.Fatalf("rewritten file is invalid: %v\n in  %q\n out %q", err, data, out)
		}
		if after.Slug != slug {
			t.Fatalf("slug = %q, want %q", after.Slug, slug)
		}
		after.Slug = before.Slug
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("rewrite changed more than the slug:\n in  %q\n out %q", data, out)
		}
	})
}

func FuzzSlugify(f *testing.F) {
	for _, s := range []string{"", "pdf", "Word / DOCX", "../../x", "a--b", "-a-", "日本語", strings.Repeat("ab ", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Slugify(s)
		if got != "" && !ValidSlug(got) {
			t.Fatalf("Slugify(%q) = %q is not a valid slug", s, got)
		}
		valid := ValidSlug(s)
		if valid != (len(slugProblems(s)) == 0) {
			t.Fatalf("ValidSlug(%q) = %v but slugProblems = %q", s, valid, slugProblems(s))
		}
		if valid && got != s {
			t.Fatalf("Slugify(%q) = %q changed a valid slug", s, got)
		}
	})
}

// Frontmatter is held to MaxFrontmatterBytes before any YAML is parsed, in
// both modes: megabytes of small keys would cost the parser gigabytes.
func TestParseManifestFrontmatterLimit(t *testing.T) {
	front := func(n int) string {
		head := "name: pdf\ndescription: Read PDFs.\n# "
		return head + strings.Repeat("x", n-len(head)-1) + "\n"
	}
	for _, mode := range []Mode{Strict, Lenient} {
		if m, _, err := Parse([]byte(skillMD(front(MaxFrontmatterBytes), "body\n")), mode); err != nil || m.Slug != "pdf" {
			t.Errorf("%v: frontmatter of %d bytes: %v", mode, MaxFrontmatterBytes, err)
		}
		_, _, err := Parse([]byte(skillMD(front(MaxFrontmatterBytes+1), "body\n")), mode)
		var me *Error
		if !errors.As(err, &me) || len(me.Problems) != 1 || me.Problems[0].Field != fieldFrontmatter ||
			!strings.Contains(me.Problems[0].Message, "over the 65536-byte limit") {
			t.Errorf("%v: frontmatter of %d bytes: %v, want one frontmatter problem naming the limit", mode, MaxFrontmatterBytes+1, err)
		}
	}
}
