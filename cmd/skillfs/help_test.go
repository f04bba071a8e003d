package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runCLI runs the command line in-process with a data directory of its
// own and returns what it printed and its exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	t.Setenv("SKILLFS_HOME", filepath.Join(t.TempDir(), "home"))
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// commandPaths lists every command a user can run or ask help for, as
// argument lists, walking the tree the binary builds (with the help and
// completion commands cobra adds when it runs).
func commandPaths() [][]string {
	root := (&cli{}).root()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var paths [][]string
	var walk func(cmd *cobra.Command, path []string)
	walk = func(cmd *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range cmd.Commands() {
			if !sub.Hidden {
				walk(sub, append(append([]string{}, path...), sub.Name()))
			}
		}
	}
	walk(root, nil)
	return paths
}

func goldenName(path []string) string {
	return filepath.Join("testdata", "help", strings.Join(append([]string{"skillfs"}, path...), "_")+".golden")
}

// TestHelpGolden: `--help` and `-h` on every command exit 0 and print its
// generated help, the same as testdata/help/*.golden (-update rewrites
// them); no golden file is left for a command that is gone.
func TestHelpGolden(t *testing.T) {
	paths := commandPaths()
	if len(paths) < 40 {
		t.Fatalf("only %d commands found in the tree", len(paths))
	}
	if *update {
		old, _ := filepath.Glob(filepath.Join("testdata", "help", "*.golden"))
		for _, f := range old {
			os.Remove(f)
		}
		if err := os.MkdirAll(filepath.Join("testdata", "help"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{}
	for _, path := range paths {
		name := goldenName(path)
		want[name] = true
		t.Run(strings.Join(append([]string{"skillfs"}, path...), " "), func(t *testing.T) {
			out, errs, code := runCLI(t, append(path, "--help")...)
			if code != 0 || errs != "" {
				t.Fatalf("--help: exit %d, stderr %q", code, errs)
			}
			if !strings.Contains(out, "Usage:") {
				t.Fatalf("--help printed no usage:\n%s", out)
			}
			if short, _, _ := runCLI(t, append(path, "-h")...); short != out {
				t.Errorf("-h differs from --help:\n%s", short)
			}
			if *update {
				if err := os.WriteFile(name, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			golden, err := os.ReadFile(name)
			if err != nil {
				t.Fatalf("%v (go test -run TestHelpGolden -update writes it)", err)
			}
			if string(golden) != out {
				t.Errorf("help differs from %s (go test -run TestHelpGolden -update rewrites it):\n got:\n%s\nwant:\n%s", name, out, golden)
			}
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "help", "*.golden"))
	for _, f := range files {
		if !want[f] {
			t.Errorf("%s belongs to no command (go test -run TestHelpGolden -update removes it)", f)
		}
	}
}

// TestHelpCommand: `skillfs help CMD [SUB]` prints what `CMD [SUB] --help`
// does; help for a command that does not exist is a usage error.
func TestHelpCommand(t *testing.T) {
	for _, path := range commandPaths() {
		want, _, _ := runCLI(t, append(path, "--help")...)
		got, errs, code := runCLI(t, append([]string{"help"}, path...)...)
		if code != 0 || errs != "" || got != want {
			t.Errorf("help %s: exit %d, stderr %q, output equal to --help: %v", strings.Join(path, " "), code, errs, got == want)
		}
	}
	_, errs, code := runCLI(t, "help", "skill", "shwo")
	if code != 2 || !strings.Contains(errs, `did you mean "show"?`) || strings.Count(errs, "\n") != 1 {
		t.Errorf("help skill shwo: exit %d, stderr %q", code, errs)
	}
}

// TestUsageErrors: a typo gets a suggestion, and every mistake on the
// command line exits 2 with one line on stderr that says what was wrong
// and where the help is, and prints nothing on stdout.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"skil", "list"}, []string{`unknown command "skil"`, `did you mean "skill"?`, "`skillfs --help`"}},
		{[]string{"skill", "shwo", "x"}, []string{`unknown command "shwo" for "skillfs skill"`, `did you mean "show"?`, "`skillfs skill --help`"}},
		{[]string{"sesion", "list"}, []string{`did you mean "session"`}},
		{[]string{"session", "activation", "x"}, []string{`did you mean "activations"?`}},
		{[]string{"user", "lsit"}, []string{`unknown command "lsit"`}},
		{[]string{"nonsense"}, []string{`unknown command "nonsense" for "skillfs"`}},
		{nil, []string{"no command given", "skill", "session"}},
		{[]string{"skill"}, []string{"skill needs a command", "import"}},
		{[]string{"skill", "show"}, []string{"skill show takes SLUG", "`skillfs skill show --help`"}},
		{[]string{"skill", "list", "extra"}, []string{`skill list takes no arguments, not "extra"`}},
		{[]string{"skill", "list", "--bogus"}, []string{"unknown flag: --bogus"}},
		{[]string{"skill", "list", "--log-format", "xml"}, []string{"text or json", "--log-format"}},
		{[]string{"session", "list", "--limit", "many"}, []string{"--limit", "many"}},
		{[]string{"session", "create"}, []string{"session create needs --user UID", "`skillfs session create --help`"}},
		{[]string{"serve", "--owner", "nobody"}, []string{"--owner", "UID:GID"}},
	}
	for _, tc := range cases {
		out, errs, code := runCLI(t, tc.args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "skillfs: ") {
			t.Errorf("skillfs %s: exit %d, stdout %q, stderr %q; want exit 2 and one line on stderr", strings.Join(tc.args, " "), code, out, errs)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("skillfs %s: stderr %q lacks %q", strings.Join(tc.args, " "), errs, w)
			}
		}
	}
}

// TestGlobalFlagsAnywhere: the global flags are taken before the command,
// between its words and after its arguments.
func TestGlobalFlagsAnywhere(t *testing.T) {
	home := filepath.Join(t.TempDir(), "h")
	for _, args := range [][]string{
		{"--home", home, "--json", "tool", "list"},
		{"tool", "--home", home, "list", "--json"},
		{"tool", "list", "--json", "--home=" + home, "--as", "operator", "--debug", "--log-format", "json"},
	} {
		out, errs, code := runCLI(t, args...)
		if code != 0 || strings.TrimSpace(out) != "[]" {
			t.Errorf("skillfs %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "index.db")); err != nil {
		t.Errorf("--home was not used: %v", err)
	}
}

// TestCompletion: the bash script loads and registers the completion; zsh
// and fish get scripts that name the program; the completion of a partial
// subcommand offers the commands it may be.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, errs, code := runCLI(t, "completion", shell)
		if code != 0 || errs != "" || !strings.Contains(out, "skillfs") || len(out) < 1000 {
			t.Errorf("completion %s: exit %d, stderr %q, %d bytes", shell, code, errs, len(out))
		}
		if shell != "bash" {
			continue
		}
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Skip("no bash")
		}
		script := filepath.Join(t.TempDir(), "skillfs.bash")
		if err := os.WriteFile(script, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command(bash, "-c", "source "+script+" && complete -p skillfs").CombinedOutput()
		if err != nil || !strings.Contains(string(got), "skillfs") {
			t.Errorf("bash: source the completion script: %v: %s", err, got)
		}
	}
	// zsh and fish scripts ask the binary; what it answers names every
	// command.
	out, _, _ := runCLI(t, "__complete", "")
	for _, name := range []string{"serve", "status", "check", "version", "skill", "user", "tool", "mcp", "session", "help", "completion"} {
		if !strings.Contains(out, "\n"+name+"\t") && !strings.HasPrefix(out, name+"\t") {
			t.Errorf("__complete offers no %q: %q", name, out)
		}
	}
	out, _, code := runCLI(t, "__complete", "session", "mo")
	if code != 0 || !strings.Contains(out, "mount\t") {
		t.Errorf("__complete session mo: exit %d: %q", code, out)
	}
	out, _, _ = runCLI(t, "__complete", "help", "sk")
	if !strings.Contains(out, "skill\t") {
		t.Errorf("__complete help sk: %q", out)
	}
}
