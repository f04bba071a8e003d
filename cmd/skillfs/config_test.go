package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const exampleConfig = "../../scripts/skillfs.yaml"

// serveWith parses args as serve's command line and applies the
// configuration file at path; it returns serve's command for its flags.
func serveWith(t testing.TB, path string, args ...string) (*cobra.Command, *cli, error) {
	t.Helper()
	c := &cli{}
	serve, _, err := c.root().Find([]string{"serve"})
	if err != nil || serve.Name() != "serve" {
		t.Fatalf("no serve command: %v", err)
	}
	if err := serve.ParseFlags(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return serve, c, serveSettings(serve, serve.Flags().Lookup("config").Value.String())
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "skillfs.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExampleConfig: the shipped example sets every setting serve has (a
// flag added to serve without a line in the example fails here), each to
// a value its flag takes, and the values are in force afterwards.
func TestExampleConfig(t *testing.T) {
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := parseConfig(data)
	if err != nil {
		t.Fatalf("the example does not parse: %v", err)
	}
	serve, c, err := serveWith(t, exampleConfig, "--config", exampleConfig)
	if err != nil {
		t.Fatalf("the example does not apply: %v", err)
	}
	set := map[string]string{}
	for _, s := range settings {
		set[s.key] = s.value
	}
	keys := configKeys(serve)
	for _, k := range keys {
		if _, ok := set[k]; !ok {
			t.Errorf("serve's setting %q is missing from %s", k, exampleConfig)
		}
	}
	serve.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && f.Name != "config" && !slices.Contains(keys, f.Name) {
			t.Errorf("serve flag --%s is not a configuration key", f.Name)
		}
	})
	if len(keys) < 12 {
		t.Errorf("only %d keys: %v", len(keys), keys)
	}
	if c.home != set["home"] || string(c.logFormat) != "text" {
		t.Errorf("the example's home %q and log-format text are not in force: %q, %q", set["home"], c.home, c.logFormat)
	}
	if got := serve.Flags().Lookup("fuse-request-timeout").Value.String(); got != "1m0s" {
		t.Errorf("fuse-request-timeout from the example = %s", got)
	}
}

// TestConfigOverride: a value from the file is in force unless the flag
// is given on the command line; $SKILLFS_CONFIG names the file when
// --config does not.
func TestConfigOverride(t *testing.T) {
	p := writeConfig(t, "owner: 5:5\nagent-path: /opt/skills\nexamples: false\nhome: /srv/a\n")
	serve, c, err := serveWith(t, p, "--config", p, "--owner", "7:7", "--home", "/srv/b")
	if err != nil {
		t.Fatal(err)
	}
	f := serve.Flags()
	for name, want := range map[string]string{"owner": "7:7", "agent-path": "/opt/skills", "examples": "false"} {
		if got := f.Lookup(name).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}
	if c.home != "/srv/b" {
		t.Errorf("home = %q: the command line's /srv/b must win", c.home)
	}
	t.Setenv(configEnv, p)
	serve, c, err = serveWith(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := serve.Flags().Lookup("owner").Value.String(); got != "5:5" || c.home != "/srv/a" {
		t.Errorf("with $%s: owner %q, home %q", configEnv, got, c.home)
	}
}

// TestConfigErrors: what is wrong in a configuration file is named with
// its line (and key), exits 2 through the command line, and sets nothing.
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"unknown key", "owner: 1:1\n\nmount_root: /x\n", []string{"line 3", `unknown key "mount_root"`, "mount-root"}},
		{"a global serve ignores", "as: alice\n", []string{"line 1", `unknown key "as"`}},
		{"bad duration", "fuse-request-timeout: soon\n", []string{"line 1", `"fuse-request-timeout"`, `"soon"`}},
		{"bad bool", "debug: maybe\n", []string{`"debug"`, "maybe"}},
		{"bad log format", "log-format: xml\n", []string{`"log-format"`, "text or json"}},
		{"key twice", "home: /a\nhome: /b\n", []string{"line 2", `"home" again`, "line 1"}},
		{"list value", "listen:\n  - 127.0.0.1:1\n", []string{"line 2", `"listen"`, "a list"}},
		{"no value", "owner:\n", []string{`"owner"`, "nothing"}},
		{"not a mapping", "- home\n", []string{"line 1", "mapping", "a list"}},
		{"not YAML", "home: [unclosed\n", []string{"configuration file"}},
		{"two documents", "home: /a\n---\nhome: /b\n", []string{"second document"}},
		{"mapping key", "? {a: b}\n: c\n", []string{"a key must be"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, tc.text)
			serve, c, err := serveWith(t, p, "--config", p)
			if err == nil || exitCode(err) != 2 {
				t.Fatalf("err %v (exit %d), want a usage error", err, exitCode(err))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			serve.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Name != "config" && f.Value.String() != f.DefValue {
					t.Errorf("--%s was set to %q by a file that was refused", f.Name, f.Value)
				}
			})
			if c.home != "" {
				t.Errorf("home set to %q", c.home)
			}
		})
	}
	_, _, err := serveWith(t, "", "--config", filepath.Join(t.TempDir(), "none.yaml"))
	if exitCode(err) != 3 || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("a missing file: %v (exit %d), want exit 3 naming it", err, exitCode(err))
	}
	for _, text := range []string{"", "# only comments\n", "{}\n"} {
		if _, _, err := serveWith(t, "", "--config", writeConfig(t, text)); err != nil {
			t.Errorf("%q: %v", text, err)
		}
	}
}

// TestServeConfigBeforeAnything: serve refuses a bad file before it checks
// for root or FUSE, and before it touches a data directory.
func TestServeConfigBeforeAnything(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	p := writeConfig(t, "home: "+home+"\nowners: 1:1\n")
	out, errs, code := runCLI(t, "serve", "--config", p)
	if code != 2 || out != "" || !strings.Contains(errs, `unknown key "owners"`) || strings.Count(errs, "\n") != 1 {
		t.Errorf("serve with a bad file: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("the data directory was touched: %v", err)
	}
}

// FuzzConfig: no file makes the parser or the flags panic; what parses has
// named keys on real lines, and applying it either works or names a line.
func FuzzConfig(f *testing.F) {
	if data, err := os.ReadFile(exampleConfig); err == nil {
		f.Add(data)
	}
	for _, s := range []string{"", "home: /a\n", "a: b\na: c\n", "- x\n", "k: [1, 2]\n", "&a x: *a\n",
		"examples: yes\n", "fuse-request-timeout: -1s\n", "owner: !!binary AAAA\n", "--- \n...\n---\n",
		"reconcile-every: 1ns\n", "index: host=x password=y\n", "listen: 0.0.0.0:0\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		settings, err := parseConfig(data)
		if err != nil {
			return
		}
		for _, s := range settings {
			if s.key == "" || s.line < 1 {
				t.Fatalf("setting %+v from %q", s, data)
			}
		}
		serve, _, _ := (&cli{}).root().Find([]string{"serve"})
		if err := serve.ParseFlags(nil); err != nil {
			t.Fatal(err)
		}
		if err := configure(serve, "fuzz.yaml", settings); err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml line ") {
				t.Fatalf("error without its line: %v", err)
			}
			return
		}
		// What the file set is checked against its range, and a value out
		// of it is named with its line (the defaults are in range).
		err = checkSettings(serve, &configFile{path: "fuzz.yaml", settings: settings}, true)
		if err != nil && (!strings.Contains(err.Error(), "fuzz.yaml line ") || exitCode(err) != exitUsage) {
			t.Fatalf("a setting out of range without its line, or not a usage error: %v", err)
		}
	})
}

// TestImportRootSettings: --import-root is repeatable and takes a path
// whole (commas and all); the configuration file gives a list; the command
// line wins over the file, and $SKILLFS_IMPORT_ROOTS applies when neither
// gives one. A root in /proc, /sys or /dev, or one that is no folder,
// stops serve with exit 2 naming it, before it checks for root or FUSE and
// before it touches a data directory.
func TestImportRootSettings(t *testing.T) {
	a, b := t.TempDir(), filepath.Join(t.TempDir(), "with,comma")
	if err := os.MkdirAll(b, 0o755); err != nil {
		t.Fatal(err)
	}
	roots := func(serve *cobra.Command) []string {
		return serve.Flags().Lookup("import-root").Value.(pflag.SliceValue).GetSlice()
	}
	serve, _, err := serveWith(t, "", "--import-root", a, "--import-root", b)
	if got := roots(serve); err != nil || !slices.Equal(got, []string{a, b}) {
		t.Errorf("two flags: %q, %v", got, err)
	}
	p := writeConfig(t, "import-root:\n  - "+a+"\n  - \""+b+"\"\n")
	serve, _, err = serveWith(t, p, "--config", p)
	if got := roots(serve); err != nil || !slices.Equal(got, []string{a, b}) {
		t.Errorf("a list in the file: %q, %v", got, err)
	}
	serve, _, err = serveWith(t, p, "--config", p, "--import-root", b)
	if got := roots(serve); err != nil || !slices.Equal(got, []string{b}) {
		t.Errorf("the command line over the file: %q, %v", got, err)
	}
	p = writeConfig(t, "import-root: "+a+"\n")
	serve, _, err = serveWith(t, p, "--config", p)
	if got := roots(serve); err != nil || !slices.Equal(got, []string{a}) {
		t.Errorf("one value in the file: %q, %v", got, err)
	}
	if r, err := openImportRoots(nil); err != nil || len(r.Paths()) != 0 {
		t.Errorf("no roots anywhere: %v, %v", r.Paths(), err)
	}
	t.Setenv(importRootsEnv, a+":"+b)
	if r, err := openImportRoots(nil); err != nil || !slices.Equal(r.Paths(), []string{a, b}) {
		t.Errorf("from $%s: %v, %v", importRootsEnv, r.Paths(), err)
	}
	if r, err := openImportRoots([]string{b}); err != nil || !slices.Equal(r.Paths(), []string{b}) {
		t.Errorf("a flag over $%s: %v, %v", importRootsEnv, r.Paths(), err)
	}
	noToken := filepath.Join(t.TempDir(), "no-token")
	for _, bad := range []string{"/proc", "/sys/kernel", "/dev", "/proc/self/cwd", filepath.Join(a, "missing")} {
		home := filepath.Join(t.TempDir(), "home")
		// A token file that does not exist: should the root pass, serve
		// stops right after, before the data directory, and the message is
		// not the root's.
		out, errs, code := runCLI(t, "serve", "--home", home, "--import-root", a, "--import-root", bad, "--listen", "127.0.0.1:0", "--token-file", noToken)
		if code != 2 || out != "" || !strings.Contains(errs, `"`+bad+`"`) || strings.Count(errs, "\n") != 1 {
			t.Errorf("serve --import-root %s: exit %d, stdout %q, stderr %q; want exit 2 naming it", bad, code, out, errs)
		}
		if _, err := os.Stat(home); !os.IsNotExist(err) {
			t.Errorf("serve --import-root %s touched the data directory: %v", bad, err)
		}
	}
	home := filepath.Join(t.TempDir(), "home")
	t.Setenv(importRootsEnv, "/proc")
	if _, errs, code := runCLI(t, "serve", "--home", home, "--listen", "127.0.0.1:0", "--token-file", noToken); code != 2 || !strings.Contains(errs, importRootsEnv) || !strings.Contains(errs, `"/proc"`) {
		t.Errorf("$%s=/proc: exit %d, %q", importRootsEnv, code, errs)
	}
}
