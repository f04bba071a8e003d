package manifest

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"skillfs/skills"
)

// importCase is one SKILL.md read both ways: Strict, as `skill validate`
// does, and Lenient with a folder name, as every import does.
type importCase struct {
	name   string
	data   string
	folder string
	// strict lists the problems Strict mode reports; nil when it accepts the
	// file, and then reads it exactly as Lenient mode does.
	strict []Problem
	// lenient is what Lenient mode reads (UserInvocable is set by the
	// check), or nil when it refuses the file with problems.
	lenient  *Manifest
	warnings []string
	problems []Problem
}

func sk(name, slug, description, body string) *Manifest {
	return &Manifest{Name: name, Slug: slug, Description: description, Body: body}
}

var (
	long1100Para = strings.Repeat("word ", 220)
	desc1024     = cutRunes(strings.TrimSpace(long1100Para), MaxDescriptionLen)
)

var importCases = []importCase{
	// A missing or unusable name comes from the folder.
	{
		name:    "missing name: the folder names the skill",
		data:    skillMD("description: d\n", ""),
		folder:  "pdf-tools",
		strict:  []Problem{{"name", "is required"}},
		lenient: sk("pdf-tools", "pdf-tools", "d", ""),
		warnings: []string{
			`slug: using slug "pdf-tools" derived from the folder name`,
			`name: is required; using the folder name "pdf-tools"`,
		},
	},
	{
		name:    "missing name: a folder that is no slug is the display name",
		data:    skillMD("description: d\n", ""),
		folder:  "  PDF Tools ",
		strict:  []Problem{{"name", "is required"}},
		lenient: sk("PDF Tools", "pdf-tools", "d", ""),
		warnings: []string{
			`slug: using slug "pdf-tools" derived from the folder name`,
			`name: is required; using the folder name "PDF Tools"`,
		},
	},
	{
		name:    "empty name",
		data:    skillMD("name: \"\"\ndescription: d\n", ""),
		folder:  "pdf",
		strict:  []Problem{{"name", "must not be empty"}},
		lenient: sk("pdf", "pdf", "d", ""),
		warnings: []string{
			`slug: using slug "pdf" derived from the folder name`,
			`name: must not be empty; using the folder name "pdf"`,
		},
	},
	{
		name:    "name that is not a string",
		data:    skillMD("name: [pdf]\ndescription: d\n", ""),
		folder:  "pdf",
		strict:  []Problem{{"name", "must be a string"}},
		lenient: sk("pdf", "pdf", "d", ""),
		warnings: []string{
			`slug: using slug "pdf" derived from the folder name`,
			`name: must be a string; using the folder name "pdf"`,
		},
	},
	{
		name:     "missing name and a folder that yields no slug",
		data:     skillMD("description: d\n", ""),
		folder:   "数据",
		strict:   []Problem{{"name", "is required"}},
		problems: []Problem{{"name", `is required, and no usable slug can be derived from the folder name "数据"`}},
	},
	{
		name:    "missing name with an explicit slug: the slug is the identity, the folder the name",
		data:    skillMD("slug: docx\ndescription: d\n", ""),
		folder:  "Word Tools",
		strict:  []Problem{{"name", "is required"}},
		lenient: sk("Word Tools", "docx", "d", ""),
		warnings: []string{
			`name: is required; using the folder name "Word Tools"`,
		},
	},
	{
		name:    "a usable name wins over the folder",
		data:    skillMD("name: pdf\ndescription: d\n", ""),
		folder:  "something-else",
		lenient: sk("pdf", "pdf", "d", ""),
	},

	// A name that is no slug keeps its display name and gets a derived slug.
	{
		name:   "display name with spaces",
		data:   skillMD("name: Web Search Automation\ndescription: d\n", ""),
		folder: "web",
		strict: []Problem{
			{"name", `"Web Search Automation" must be lowercase`},
			{"name", `"Web Search Automation" contains invalid characters; only lowercase letters, digits and hyphens are allowed`},
		},
		lenient: sk("Web Search Automation", "web-search-automation", "d", ""),
		warnings: []string{
			`slug: name "Web Search Automation" is not a valid slug (upper case, characters other than a-z, 0-9 and -); using "web-search-automation", derived from the name`,
		},
	},
	{
		name:    "snake case",
		data:    skillMD("name: snake_case-name\ndescription: d\n", ""),
		strict:  []Problem{{"name", `"snake_case-name" contains invalid characters; only lowercase letters, digits and hyphens are allowed`}},
		lenient: sk("snake_case-name", "snake-case-name", "d", ""),
		warnings: []string{
			`slug: name "snake_case-name" is not a valid slug (characters other than a-z, 0-9 and -); using "snake-case-name", derived from the name`,
		},
	},
	{
		name:    "leading hyphen",
		data:    skillMD("name: -leading-hyphen\ndescription: d\n", ""),
		strict:  []Problem{{"name", "must not start or end with a hyphen"}},
		lenient: sk("-leading-hyphen", "leading-hyphen", "d", ""),
		warnings: []string{
			`slug: name "-leading-hyphen" is not a valid slug (a hyphen at an end); using "leading-hyphen", derived from the name`,
		},
	},
	{
		name:    "a slash",
		data:    skillMD("name: toolkit/web\ndescription: d\n", ""),
		strict:  []Problem{{"name", `"toolkit/web" contains invalid characters; only lowercase letters, digits and hyphens are allowed`}},
		lenient: sk("toolkit/web", "toolkit-web", "d", ""),
		warnings: []string{
			`slug: name "toolkit/web" is not a valid slug (characters other than a-z, 0-9 and -); using "toolkit-web", derived from the name`,
		},
	},
	{
		name: "Latin letters with diacritics",
		data: skillMD("name: Ünïcödé\ndescription: d\n", ""),
		strict: []Problem{
			{"name", `"Ünïcödé" must be lowercase`},
			{"name", `"Ünïcödé" contains invalid characters; only lowercase letters, digits and hyphens are allowed`},
		},
		lenient: sk("Ünïcödé", "unicode", "d", ""),
		warnings: []string{
			`slug: name "Ünïcödé" is not a valid slug (upper case, characters other than a-z, 0-9 and -); using "unicode", derived from the name`,
		},
	},
	{
		name:    "a name of punctuation only: the slug comes from the folder",
		data:    skillMD("name: \"!!!\"\ndescription: d\n", ""),
		folder:  "bangs",
		strict:  []Problem{{"name", `"!!!" contains invalid characters; only lowercase letters, digits and hyphens are allowed`}},
		lenient: sk("!!!", "bangs", "d", ""),
		warnings: []string{
			`slug: name "!!!" is not a valid slug (characters other than a-z, 0-9 and -); using "bangs", derived from the folder name`,
		},
	},
	{
		name:     "a name of punctuation only and a folder that yields no slug either",
		data:     skillMD("name: \"!!!\"\ndescription: d\n", ""),
		folder:   "…",
		strict:   []Problem{{"name", `"!!!" contains invalid characters; only lowercase letters, digits and hyphens are allowed`}},
		warnings: []string{},
		problems: []Problem{{"name", `no usable slug can be derived from "!!!" or from the folder name "…"`}},
	},

	// A missing description comes from the body.
	{
		name:    "missing description: the first paragraph under the title",
		data:    skillMD("name: pdf\n", "# PDF\n\nExtract text\nand tables.\n\nMore.\n"),
		strict:  []Problem{{"description", "is required"}},
		lenient: sk("pdf", "pdf", "Extract text and tables.", "# PDF\n\nExtract text\nand tables.\n\nMore.\n"),
		warnings: []string{
			"description: is required; using the first paragraph of the body",
		},
	},
	{
		name:     "empty description",
		data:     skillMD("name: pdf\ndescription: \"  \"\n", "Reads PDFs.\n"),
		strict:   []Problem{{"description", "must not be empty"}},
		lenient:  sk("pdf", "pdf", "Reads PDFs.", "Reads PDFs.\n"),
		warnings: []string{"description: must not be empty; using the first paragraph of the body"},
	},
	{
		name:     "null description",
		data:     skillMD("name: pdf\ndescription:\n", "Reads PDFs.\n"),
		strict:   []Problem{{"description", "must not be empty"}},
		lenient:  sk("pdf", "pdf", "Reads PDFs.", "Reads PDFs.\n"),
		warnings: []string{"description: must not be empty; using the first paragraph of the body"},
	},
	{
		name:     "description that is a list",
		data:     skillMD("name: pdf\ndescription: [a, b]\n", "Reads PDFs.\n"),
		strict:   []Problem{{"description", "must be a string"}},
		lenient:  sk("pdf", "pdf", "Reads PDFs.", "Reads PDFs.\n"),
		warnings: []string{"description: must be a string; using the first paragraph of the body"},
	},
	{
		name:     "missing description and a body of headings only",
		data:     skillMD("name: pdf\n", "# PDF Tools\n## Usage\n"),
		strict:   []Problem{{"description", "is required"}},
		lenient:  sk("pdf", "pdf", "PDF Tools", "# PDF Tools\n## Usage\n"),
		warnings: []string{"description: is required; using the first heading of the body"},
	},
	{
		name:     "no description anywhere: empty, still served",
		data:     skillMD("name: pdf\n", "\n```sh\npdftotext x\n```\n"),
		strict:   []Problem{{"description", "is required"}},
		lenient:  sk("pdf", "pdf", "", "\n```sh\npdftotext x\n```\n"),
		warnings: []string{"description: is required, and the body has no paragraph to take it from; it is empty"},
	},
	{
		name:    "a long first paragraph is cut",
		data:    skillMD("name: pdf\n", long1100Para+"\n"),
		strict:  []Problem{{"description", "is required"}},
		lenient: sk("pdf", "pdf", desc1024, long1100Para+"\n"),
		warnings: []string{
			"description: is required; using the first paragraph of the body",
			"description: the first paragraph of the body is 1099 characters long; cut to 1024",
		},
	},
	{
		name:     "a long description in the frontmatter is kept",
		data:     skillMD("name: pdf\ndescription: "+longName1100+"\n", ""),
		strict:   []Problem{{"description", "exceeds 1024 characters (1100)"}},
		lenient:  sk("pdf", "pdf", longName1100, ""),
		warnings: []string{"description: exceeds 1024 characters (1100)"},
	},

	// A file without frontmatter is all body.
	{
		name:    "no frontmatter",
		data:    "# PDF Tools\n\nExtract text from PDFs.\n",
		folder:  "pdf",
		strict:  []Problem{{"frontmatter", "must start with a --- line"}},
		lenient: sk("pdf", "pdf", "Extract text from PDFs.", "# PDF Tools\n\nExtract text from PDFs.\n"),
		warnings: []string{
			"frontmatter: none (the file does not start with a --- line); the whole file is the body",
			`slug: using slug "pdf" derived from the folder name`,
			`name: is required; using the folder name "pdf"`,
			"description: is required; using the first paragraph of the body",
		},
	},
	{
		name:    "no frontmatter, BOM and CRLF",
		data:    "\uFEFF# PDF\r\n\r\nReads PDFs.\r\n",
		folder:  "pdf",
		strict:  []Problem{{"frontmatter", "must start with a --- line"}},
		lenient: sk("pdf", "pdf", "Reads PDFs.", "# PDF\r\n\r\nReads PDFs.\r\n"),
		warnings: []string{
			"frontmatter: none (the file does not start with a --- line); the whole file is the body",
			`slug: using slug "pdf" derived from the folder name`,
			`name: is required; using the folder name "pdf"`,
			"description: is required; using the first paragraph of the body",
		},
	},
	{
		name:    "empty file",
		data:    "",
		folder:  "pdf",
		strict:  []Problem{{"frontmatter", "must start with a --- line"}},
		lenient: sk("pdf", "pdf", "", ""),
		warnings: []string{
			"frontmatter: none (the file does not start with a --- line); the whole file is the body",
			`slug: using slug "pdf" derived from the folder name`,
			`name: is required; using the folder name "pdf"`,
			"description: is required, and the body has no paragraph to take it from; it is empty",
		},
	},

	// Frontmatter that is there but unusable stays fatal.
	{
		name:     "unclosed frontmatter",
		data:     "---\nname: pdf\ndescription: d\n",
		folder:   "pdf",
		strict:   []Problem{{"frontmatter", "not closed with a --- line"}},
		problems: []Problem{{"frontmatter", "not closed with a --- line"}},
	},
	{
		name:     "frontmatter that is a list",
		data:     skillMD("- name: pdf\n", ""),
		folder:   "pdf",
		strict:   []Problem{{"frontmatter", "must be a YAML mapping, not a list"}},
		problems: []Problem{{"frontmatter", "must be a YAML mapping, not a list"}},
	},
	{
		name:     "bad YAML the repair cannot fix",
		data:     skillMD("name: pdf\n  description: d\n", ""),
		folder:   "pdf",
		strict:   []Problem{{"frontmatter", "invalid YAML: line 3: mapping values are not allowed in this context"}},
		problems: []Problem{{"frontmatter", "invalid YAML: line 3: mapping values are not allowed in this context"}},
	},
	{
		name:    "an unquoted colon, repaired as Claude Code does",
		data:    skillMD("name: pdf\ndescription: Use when: PDFs come up # not a comment\nallowed-tools: [Read, Grep]\n", ""),
		strict:  []Problem{{"frontmatter", "invalid YAML: line 3: mapping values are not allowed in this context"}},
		lenient: &Manifest{Name: "pdf", Slug: "pdf", Description: "Use when: PDFs come up # not a comment", AllowedTools: "Read Grep"},
		warnings: []string{
			`frontmatter: invalid YAML: line 3: mapping values are not allowed in this context; read after quoting the values of "description", as Claude Code does`,
		},
	},
	{
		name: "the repair keeps block scalars and CRLF",
		data: "---\r\nname: pdf\r\ndescription: >-\r\n  Reads\r\n  PDFs.\r\ncompatibility: needs: poppler\r\n---\r\n",
		strict: []Problem{{"frontmatter",
			"invalid YAML: line 6: mapping values are not allowed in this context"}},
		lenient: &Manifest{Name: "pdf", Slug: "pdf", Description: "Reads PDFs.", Compatibility: "needs: poppler"},
		warnings: []string{
			`frontmatter: invalid YAML: line 6: mapping values are not allowed in this context; read after quoting the values of "compatibility", as Claude Code does`,
		},
	},

	// Values the Agent Skills rules refuse are kept.
	{
		name: "metadata values that are not strings are kept as JSON text",
		data: skillMD("name: pdf\ndescription: d\nmetadata:\n  tags: [a, \"b<c>\"]\n"+
			"  nested: {x: 0x1F, y: [true, ~, 1.5, .inf, 2020-01-02]}\n  ok: yes\n", ""),
		strict: []Problem{
			{"metadata", `value of "tags" must be a string`},
			{"metadata", `value of "nested" must be a string`},
		},
		lenient: &Manifest{Name: "pdf", Slug: "pdf", Description: "d", Metadata: map[string]string{
			"tags":   `["a","b<c>"]`,
			"nested": `{"x":31,"y":[true,null,1.5,".inf","2020-01-02"]}`,
			"ok":     "yes",
		}},
		warnings: []string{
			`metadata: value of "tags" is not a string; kept as JSON text`,
			`metadata: value of "nested" is not a string; kept as JSON text`,
		},
	},
	{
		name:     "dependencies that are neither a list nor a string are ignored",
		data:     skillMD("name: pdf\ndescription: d\ntool_dependencies: {bash: yes}\nskill_dependencies: [docx, Bad Dep, [x]]\n", ""),
		strict:   []Problem{{"skill_dependencies", "item 3 must be a string"}, {"tool_dependencies", "must be a list of strings"}, {"skill_dependencies", `"Bad Dep" is not a valid skill slug`}},
		lenient:  &Manifest{Name: "pdf", Slug: "pdf", Description: "d", SkillDependencies: []string{"docx"}},
		warnings: []string{"skill_dependencies: item 3 must be a string", "tool_dependencies: must be a list of strings", `skill_dependencies: "Bad Dep" is not a valid skill slug`},
	},

	// The keys the agents define are known in both modes.
	{
		name: "keys of Claude Code, Codex and OpenCode draw no warning",
		data: skillMD("name: deploy\ndescription: d\nwhen_to_use: on deploys\nwhen-to-use: on deploys\n"+
			"argument-hint: \"[env]\"\narguments: [env]\nmodel: sonnet\neffort: high\ncontext: fork\n"+
			"agent: Explore\nhooks: {PreToolUse: []}\npaths: [\"src/**\"]\nshell: bash\nversion: 1.0.0\n"+
			"hide-from-slash-command-tool: \"true\"\nlicense: MIT\ncompatibility: any\n"+
			"metadata: {short-description: Deploys}\nallowed-tools: Bash\n"+
			"disable-model-invocation: false\nuser-invocable: true\n", ""),
		lenient: &Manifest{Name: "deploy", Slug: "deploy", Description: "d", License: "MIT", Compatibility: "any",
			Metadata: map[string]string{"short-description": "Deploys"}, AllowedTools: "Bash"},
	},
	{
		name:     "other keys are kept with a warning",
		data:     skillMD("name: pdf\ndescription: d\ntags: [a]\nDescription: x\n", ""),
		lenient:  &Manifest{Name: "pdf", Slug: "pdf", Description: "d", Unknown: []string{"Description", "tags"}},
		warnings: []string{`frontmatter: unknown key "Description" kept`, `frontmatter: unknown key "tags" kept`},
	},
}

func TestParseManifestImport(t *testing.T) {
	for _, tc := range importCases {
		t.Run(tc.name, func(t *testing.T) {
			lm, lw, lerr := ParseWith([]byte(tc.data), ParseOptions{Mode: Lenient, Folder: tc.folder})
			sm, sw, serr := ParseWith([]byte(tc.data), ParseOptions{Mode: Strict, Folder: tc.folder})

			if !slices.Equal(lw, tc.warnings) {
				t.Errorf("lenient warnings:\n got %q\nwant %q", lw, tc.warnings)
			}
			if tc.lenient != nil {
				if lerr != nil {
					t.Fatalf("lenient: %v", lerr)
				}
				want := *tc.lenient
				want.UserInvocable = true
				if !reflect.DeepEqual(lm, &want) {
					t.Errorf("lenient manifest:\n got %#v\nwant %#v", lm, &want)
				}
			} else if got := problemsOf(t, lm, lerr); !slices.Equal(got, tc.problems) {
				t.Errorf("lenient problems:\n got %q\nwant %q", got, tc.problems)
			}

			if tc.strict == nil {
				// What Strict mode accepts, Lenient mode reads the same.
				if serr != nil || !reflect.DeepEqual(sm, lm) || !slices.Equal(sw, lw) {
					t.Errorf("strict: %#v %q %v, want what lenient read", sm, sw, serr)
				}
			} else if got := problemsOf(t, sm, serr); !slices.Equal(got, tc.strict) {
				t.Errorf("strict problems:\n got %q\nwant %q", got, tc.strict)
			}
		})
	}
}

func problemsOf(t testing.TB, m *Manifest, err error) []Problem {
	t.Helper()
	var me *Error
	if !errors.As(err, &me) || m != nil {
		t.Fatalf("got %#v, %v; want a *ManifestError", m, err)
	}
	return me.Problems
}

// The folder stands in only for what the frontmatter lacks: any file that
// parses without a folder gives the same slug with one, which lets the
// catalog parse a stored file again without knowing where it came from.
func TestParseManifestFolderOnlyFillsGaps(t *testing.T) {
	for _, tc := range importCases {
		plain, _, err := Parse([]byte(tc.data), Lenient)
		if err != nil {
			continue
		}
		for _, folder := range []string{"other-folder", "Other Folder", "数据"} {
			m, _, err := ParseWith([]byte(tc.data), ParseOptions{Mode: Lenient, Folder: folder})
			if err != nil || m.Slug != plain.Slug {
				t.Errorf("%s: folder %q gives %+v, %v; want slug %q", tc.name, folder, m, err, plain.Slug)
			}
		}
	}
}

func TestParseManifestFlags(t *testing.T) {
	for _, tc := range []struct {
		name          string
		front         string
		disable, user bool
		warnings      []string
	}{
		{"defaults", "", false, true, nil},
		{"set", "disable-model-invocation: true\nuser-invocable: false\n", true, false, nil},
		{"unset explicitly", "disable-model-invocation: false\nuser-invocable: true\n", false, true, nil},
		{"strings in any case", "disable-model-invocation: \"TRUE\"\nuser-invocable: 'False'\n", true, false, nil},
		{"YAML booleans in capitals", "disable-model-invocation: True\nuser-invocable: FALSE\n", true, false, nil},
		{"null is the default", "disable-model-invocation:\nuser-invocable: ~\n", false, true, nil},
		{"anything else is the default", "disable-model-invocation: yes please\nuser-invocable: [no]\n", false, true, []string{
			`disable-model-invocation: "yes please" is not true or false; using false`,
			"user-invocable: must be true or false; using true",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []Mode{Strict, Lenient} {
				m, w, err := Parse([]byte(skillMD("name: pdf\ndescription: d\n"+tc.front, "")), mode)
				if err != nil {
					t.Fatalf("%v: %v", mode, err)
				}
				if m.DisableModelInvocation != tc.disable || m.UserInvocable != tc.user {
					t.Errorf("%v: DisableModelInvocation, UserInvocable = %t, %t; want %t, %t",
						mode, m.DisableModelInvocation, m.UserInvocable, tc.disable, tc.user)
				}
				if !slices.Equal(w, tc.warnings) {
					t.Errorf("%v: warnings %q, want %q", mode, w, tc.warnings)
				}
			}
		})
	}
}

func TestBodyDescription(t *testing.T) {
	for _, tc := range []struct{ name, body, text, from string }{
		{"empty", "", "", ""},
		{"plain paragraph", "Reads PDFs.\nAnd more.\n\nNext.", "Reads PDFs. And more.", "first paragraph"},
		{"after a title", "# PDF\n\nReads PDFs.\n", "Reads PDFs.", "first paragraph"},
		{"title right above", "# PDF\nReads PDFs.\n", "Reads PDFs.", "first paragraph"},
		{"ends at a heading", "Reads PDFs.\n## Usage\nmore", "Reads PDFs.", "first paragraph"},
		{"CRLF and indentation", "\r\n  Reads\r\n  PDFs.  \r\n", "Reads PDFs.", "first paragraph"},
		{"blockquote", "# X\n\n> Reads\n> > PDFs.\n", "Reads PDFs.", "first paragraph"},
		{"paragraphs of a blockquote", "> Reads PDFs.\n>\n> Not this.\n", "Reads PDFs.", "first paragraph"},
		{"skips fenced code", "```\nnot this\n\nnor this\n```\nThis.\n", "This.", "first paragraph"},
		{"skips tilde fences", "~~~~sh\n~~~ still code\n~~~~\nThis.", "This.", "first paragraph"},
		{"skips comments", "<!-- one -->\n<!--\nmany\n\nlines -->\nThis.", "This.", "first paragraph"},
		{"skips thematic breaks", "---\n* * *\n___\nThis.", "This.", "first paragraph"},
		{"setext underline ends it", "Title\n===\nbody", "Title", "first paragraph"},
		{"hash tag is text", "#tag and text", "#tag and text", "first paragraph"},
		{"heading only", "## PDF Tools ##\n", "PDF Tools", "first heading"},
		{"seven hashes are text", "####### x", "####### x", "first paragraph"},
		{"unclosed fence hides the rest", "# T\n```\ncode", "T", "first heading"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, from := bodyDescription(tc.body)
			if text != tc.text || from != tc.from {
				t.Errorf("bodyDescription(%q) = %q, %q; want %q, %q", tc.body, text, from, tc.text, tc.from)
			}
		})
	}
}

func TestCutRunes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"ab cd", 3, "ab"},
		{"日本語です", 2, "日本"},
	} {
		if got := cutRunes(tc.s, tc.n); got != tc.want || utf8.RuneCountInString(got) > tc.n {
			t.Errorf("cutRunes(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestYAMLJSONLimits(t *testing.T) {
	// Aliases make a few lines expand far (here to some 11,000 nodes,
	// under the alias bomb limit, but 150 KB of JSON): the value is
	// dropped, not rendered.
	bomb := "a: &a [" + strings.Repeat("xxxxxxxxxxxx, ", 9) + "xxxxxxxxxxxx]\n"
	for i, prev := 0, "a"; i < 3; i++ {
		name := string(rune('b' + i))
		bomb += name + ": &" + name + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = name
	}
	front := "name: pdf\ndescription: d\nanchors:\n" + indent(bomb) + "metadata:\n  big: *d\n  ok: fine\n"
	m, w, err := Parse([]byte(skillMD(front, "")), Lenient)
	if err != nil {
		t.Fatal(err)
	}
	if _, kept := m.Metadata["big"]; kept || m.Metadata["ok"] != "fine" {
		t.Errorf("metadata = %.200q, want only ok", m.Metadata)
	}
	if !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, `"big"`) && strings.Contains(s, "dropped") }) {
		t.Errorf("warnings %q do not say that big was dropped", w)
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// Every Latin letter with a diacritic of Latin-1 and Latin Extended-A has an
// ASCII spelling, so no such name loses letters to hyphens.
func TestLatinFoldIsComplete(t *testing.T) {
	for r := rune(0xC0); r <= 0x17F; r++ {
		if r == 0xD7 || r == 0xF7 { // × and ÷ are not letters
			continue
		}
		if f := latinFold[r]; f == "" || Slugify(string(r)) != f {
			t.Errorf("%q (U+%04X) folds to %q, Slugify gives %q", r, r, f, Slugify(string(r)))
		}
	}
}

func TestRepairFM(t *testing.T) {
	for _, tc := range []struct {
		name  string
		front string
		keys  []string // nil when the repair does not help
	}{
		{"colon in a value", "name: a\ndescription: Use when: b\n", []string{"description"}},
		{"leading block indicator with text", "description: | Use it.\n", []string{"description"}},
		{"quotes and backslashes", "description: say \"hi\": \\o/\n", []string{"description"}},
		{"already quoted stays", "description: 'a: b'\nx: y: z\n", []string{"x"}},
		{"indented lines are not touched", "a:\n  b: c: d\n", nil},
		{"an unclosed flow list is quoted", "a: [unclosed\n", []string{"a"}},
		{"nothing to quote", "a: b\n  c: d\n", nil},
		{"quoting does not help", "a: b: c\n  d: e\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, root, keys := repairFM([]byte(tc.front))
			if !slices.Equal(keys, tc.keys) || (root != nil) != (tc.keys != nil) {
				t.Errorf("repairFM(%q) = %v, %q; want keys %q", tc.front, root != nil, keys, tc.keys)
			}
		})
	}
	text, root, _ := repairFM([]byte("description: say \"hi\": \\o/\r\nname: x\n"))
	if got := root.Content[1].Value; got != `say "hi": \o/` {
		t.Errorf("repaired value = %q", got)
	}
	if want := "description: \"say \\\"hi\\\": \\\\o/\"\r\nname: x\n"; string(text) != want {
		t.Errorf("repaired text = %q, want %q", text, want)
	}
}

// A frontmatter whose aliases expand without bound is refused in both
// modes: the repair must not quote the aliases away and let it through,
// since every agent that reads the stored copy would expand them.
func TestAliasBombRefusedInBothModes(t *testing.T) {
	front := "name: laughs\ndescription: d\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i, prev := 0, "a"; i < 6; i++ {
		name := string(rune('b' + i))
		front += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	for _, mode := range []Mode{Strict, Lenient} {
		_, _, err := ParseWith([]byte(skillMD(front, "")), ParseOptions{Mode: mode, Folder: "laughs"})
		if !errors.Is(err, skills.ErrInvalidManifest) || !strings.Contains(err.Error(), "alias bomb") {
			t.Errorf("%s: err = %v, want the alias bomb refused", mode, err)
		}
	}
	// A few aliases, even a cycle, are fine.
	for _, ok := range []string{"name: &n pdf\ndescription: *n\n", "name: pdf\ndescription: d\nx: &a [1, *a]\n"} {
		if _, _, err := Parse([]byte(skillMD(ok, "")), Lenient); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

func TestSlugSettled(t *testing.T) {
	for _, tc := range []struct {
		data, slug string
		want       bool
	}{
		{"---\nname: pdf\ndescription: d\n---\n", "pdf", true},
		{"---\nname: pdf\ndescription: d\n---\n", "pdf-v2", false},         // another slug: written in
		{"---\nname: Nice Tool\ndescription: d\n---\n", "nice-tool", true}, // derived from the name, as every reader derives it
		{"# No frontmatter\n", "notes", true},                              // named after the folder it is stored in
		{"---\nname: x\nslug: ../../x\n---\n", "x", false},                 // a slug key that says something else
		{"---\nname: x\nslug: x\n---\n", "x", true},
		{"---\nname: x\n  bad: [\n---\n", "x", false},
	} {
		if got := SlugSettled([]byte(tc.data), tc.slug); got != tc.want {
			t.Errorf("SlugSettled(%q, %q) = %v, want %v", tc.data, tc.slug, got, tc.want)
		}
	}
}
