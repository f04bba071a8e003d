package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// FuzzDecodeFile: any bytes decode to documents of the kinds a file may
// hold, or to an error; never a panic.
func FuzzDecodeFile(f *testing.F) {
	for _, name := range []string{"node.yaml", "csidriver.yaml", "examples/pod.yaml", "kustomization.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(name, data)
	}
	f.Add("x.yaml", []byte("---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: b, a: c}\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		objs, _ := decodeFile(name, data)
		for _, o := range objs {
			gvk := o.obj.GetObjectKind().GroupVersionKind()
			if !slices.Contains(manifestKinds[strings.HasPrefix(name, "examples/")], gvk) {
				t.Fatalf("decoded a %s in %s", gvk, name)
			}
			if o.line < 1 || o.line > strings.Count(string(data), "\n")+1 {
				t.Fatalf("document at line %d of a %d-line file", o.line, strings.Count(string(data), "\n")+1)
			}
		}
	})
}

// FuzzCommandLine: a command line (arguments separated by NUL) parsed
// against the real reference yields the flags of the command it names, or
// an error; a configuration file only keys of serve.
func FuzzCommandLine(f *testing.F) {
	md, err := os.ReadFile(refFiles["CLI.md"])
	if err != nil {
		f.Fatal(err)
	}
	ref, err := parseCLI(md)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("skillfs\x00--home\x00/h\x00serve\x00--config=/c\x00--examples", "home: /h\nimport-root: [/a, /b]\n")
	f.Add("skillfs\x00session\x00list\x00--limit", "examples: yes\n")
	f.Fuzz(func(t *testing.T, line, config string) {
		c, err := parseSkillfs(ref, strings.Split(line, "\x00"))
		if err == nil {
			for name := range c.flags {
				if _, own := ref.commands[c.path][name]; !own {
					if _, global := ref.global[name]; !global {
						t.Fatalf("%q: took --%s, not a flag of skillfs %s", line, name, c.path)
					}
				}
			}
		}
		settings, err := parseServeConfig(ref, config)
		if err == nil {
			for k := range settings {
				if _, ok := ref.commands["serve"][k]; !ok && !slices.Contains(configGlobals, k) {
					t.Fatalf("took key %q", k)
				}
			}
		}
	})
}

// FuzzReferenceText: the command reference, a help text and a
// Containerfile parse or are refused, whatever they hold.
func FuzzReferenceText(f *testing.F) {
	for _, p := range []string{refFiles["CLI.md"], "Containerfile"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add("Usage:\n  -endpoint string\n\tx\n      --policy FILE   y\n  -h, --help\n")
	f.Fuzz(func(t *testing.T, text string) {
		if ref, err := parseCLI([]byte(text)); err == nil && len(ref.global) == 0 {
			t.Fatal("a reference without global flags")
		}
		for name := range parseHelp(text) {
			if name == "" || strings.ContainsAny(name, " \t=") {
				t.Fatalf("flag %q", name)
			}
		}
		if ins, err := parseContainerfile(text); err == nil {
			stages(ins)
		}
	})
}
