package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// serveCommand is serve's command of a fresh command tree.
func serveCommand(t testing.TB) *cobra.Command {
	t.Helper()
	serve, _, err := (&cli{}).root().Find([]string{"serve"})
	if err != nil || serve.Name() != "serve" {
		t.Fatalf("no serve command: %v", err)
	}
	return serve
}

// serveSettingKeys are the settings of serve: its configuration keys and
// --config.
func serveSettingKeys(serve *cobra.Command) []string {
	return append(configKeys(serve), "config")
}

// TestEverySettingHasARule: every setting of serve has a rule, every
// duration and count flag of every command has a range, every default is
// in its range, and every rule is some command's flag.
func TestEverySettingHasARule(t *testing.T) {
	serve := serveCommand(t)
	for _, k := range serveSettingKeys(serve) {
		if _, ok := ruleOf(k); !ok {
			t.Errorf("serve's setting %q has no row in settingRules", k)
		}
	}
	flags := map[string]bool{}
	for _, path := range commandPaths() {
		root := (&cli{}).root()
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Flags().AddFlagSet(root.PersistentFlags())
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			flags[f.Name] = true
			r, ok := ruleOf(f.Name)
			switch f.Value.Type() {
			case "duration", "int", "int64", "int32", "uint", "uint32", "uint64", "float64", "count":
				if !ok || r.check == nil {
					t.Errorf("%s --%s (%s) has no range in settingRules", commandName(cmd), f.Name, f.Value.Type())
				}
			}
			if ok && r.check != nil {
				if p := r.check(f.DefValue); p != "" {
					t.Errorf("%s --%s: the default %q is refused: %s", commandName(cmd), f.Name, f.DefValue, p)
				}
			}
		})
	}
	for _, r := range settingRules {
		if !flags[r.key] {
			t.Errorf("settingRules has %q, which no command has", r.key)
		}
	}
}

// TestSettingRanges: each value out of its range is refused with exit 2
// naming where it came from — the flag, the configuration file and its
// line, the environment — and the range; a value at either end of a
// range, and a 0 that means something, are taken.
func TestSettingRanges(t *testing.T) {
	cases := []struct {
		key  string
		bad  []string
		good []string
	}{
		{"fuse-request-timeout", []string{"-5s", "1ns", "14s", "65536s", "-1h"}, []string{"0", "0s", "15s", "65535s", "60s"}},
		{"reconcile-every", []string{"1ns", "99ms", "-1s", "0", "2h"}, []string{"100ms", "1s", "1h"}},
		{"event-retention", []string{"0", "-1m", "59s", "87601h"}, []string{"1m", "168h", "87600h"}},
		{"event-retain-count", []string{"0", "-5", "1000000001"}, []string{"1", "100000", "1000000000"}},
		{"owner", []string{"nobody", "1:", ":1", "1:2:3", "-1:-1", "4294967295:0", "1:2x", " 1:2", "+1:2"}, []string{"0:0", "1000:1001", "4294967294:4294967294"}},
		{"listen", []string{"0.0.0.0:0", "[::]:0", ":0", "10.0.0.1:80", "example.com:80", "127.0.0.1", "127.0.0.1:65536", "127.0.0.1:x", "127.0.0.1:-1"},
			[]string{"127.0.0.1:0", "127.0.0.2:8080", "[::1]:0", "localhost:9000", ""}},
		{"host-name", []string{"a\nb", strings.Repeat("h", 254)}, []string{"alpha", "", strings.Repeat("h", 253)}},
		{"agent-path", []string{"skills", "./x", "/a\x00b"}, []string{"/home/gem/skills", "/opt/x"}},
		{"mount-root", []string{"/mnt/a\nb"}, []string{"", "/srv/mnt", "rel/mnt"}},
		{"max-conns", []string{"0", "15", "1048577", "-1"}, []string{"16", "1024", "1048576"}},
		{"max-tcp-conns", []string{"0", "15", "1048577"}, []string{"16", "256"}},
		{"max-streams", []string{"0", "-1", "1048577"}, []string{"1", "512"}},
		{"fd-reserve", []string{"0", "63", "1048577"}, []string{"64", "1024"}},
		{"idle-timeout", []string{"0", "999ms", "2h"}, []string{"1s", "60s", "1h"}},
		{"diff-memory", []string{"0", "15", "65537"}, []string{"16", "256", "65536"}},
		{"install-git-hosts", []string{",", "ssh://git.example.com", "git.example.com/team", "u@git.example.com", "git.example.com:0", "::1", "a,,b"},
			[]string{"", "git.example.com", "http://127.0.0.1:8080, [fd00::1]:8443", "https://gitlab.corp"}},
	}
	for _, tc := range cases {
		for _, v := range tc.bad {
			t.Run(tc.key+"="+v, func(t *testing.T) {
				checkRefused(t, tc.key, v)
			})
		}
		for _, v := range tc.good {
			if err := serveFlag(t, tc.key, v); err != nil {
				t.Errorf("--%s %q refused: %v", tc.key, v, err)
			}
			if _, _, err := serveWith(t, "", "--config", writeConfig(t, fmt.Sprintf("%s: %q\n", tc.key, v))); err != nil {
				t.Errorf("%s: %q in a file refused: %v", tc.key, v, err)
			}
		}
	}
}

// serveFlag checks serve's settings with --key value on the command line.
func serveFlag(t testing.TB, key, value string) error {
	t.Helper()
	serve := serveCommand(t)
	if err := serve.ParseFlags([]string{"--" + key + "=" + value}); err != nil {
		return err
	}
	return serveSettings(serve, "")
}

// checkRefused: key: value is refused on serve's command line and in a
// configuration file (where the message names the line), as a usage error
// naming the key, the value and the range.
func checkRefused(t *testing.T, key, value string) {
	t.Helper()
	r, _ := ruleOf(key)
	err := serveFlag(t, key, value)
	if err == nil || exitCode(err) != exitUsage {
		t.Fatalf("--%s %q: %v (exit %d), want exit 2", key, value, err, exitCode(err))
	}
	shown := value // as the flag prints it
	if d, err := time.ParseDuration(value); err == nil && serveCommand(t).Flags().Lookup(key).Value.Type() == "duration" {
		shown = shortDuration(d)
	}
	if msg := err.Error(); !strings.Contains(msg, "--"+key+": ") || !strings.Contains(msg, fmt.Sprintf("%q", shown)) || !strings.Contains(msg, r.rng) {
		t.Errorf("--%s %q: %q does not name the flag, the value and the range", key, value, msg)
	}
	p := writeConfig(t, fmt.Sprintf("# settings\nexamples: false\n%s: %q\n", key, value))
	_, _, err = serveWith(t, p, "--config", p)
	if err == nil || exitCode(err) != exitUsage {
		t.Fatalf("%s: %q in a file: %v (exit %d), want exit 2", key, value, err, exitCode(err))
	}
	if msg := err.Error(); !strings.Contains(msg, p+" line 3: key "+fmt.Sprintf("%q: %q", key, value)) || !strings.Contains(msg, r.rng) {
		t.Errorf("%s: %q in a file: %q does not name the file, line 3, the key and the range", key, value, msg)
	}
	// The command line wins over the file, and is what is checked.
	_, _, err = serveWith(t, p, "--config", p, "--"+key+"="+defaultOf(t, key))
	if err != nil {
		t.Errorf("%s: %q in a file, the default on the command line: %v", key, value, err)
	}
}

func defaultOf(t testing.TB, key string) string {
	f := serveCommand(t).Flags().Lookup(key)
	if f == nil {
		t.Fatalf("serve has no --%s", key)
	}
	return f.DefValue
}

// TestIndexSetting: an index that is a libpq keyword string (or anything
// else that cannot be meant as one) is refused with exit 2 from the
// command line, the environment and a configuration file, naming which,
// without a byte of its password, and no file is made; the other commands
// refuse it where they would open it, before they make a data directory.
func TestIndexSetting(t *testing.T) {
	const secret = "pw-S3CRET"
	t.Chdir(t.TempDir())
	keywords := "host=db.internal port=5432 dbname=skillfs user=skillfs password=" + secret
	for _, bad := range []string{keywords, "password=" + secret, "mysql://u:" + secret + "@db/x", "file:" + secret + ".db"} {
		checks := []struct {
			where string
			err   func() error
		}{
			{"--index", func() error { return serveFlag(t, "index", bad) }},
			{"$SKILLFS_INDEX", func() error {
				t.Setenv("SKILLFS_INDEX", bad)
				defer os.Unsetenv("SKILLFS_INDEX")
				return serveFlag(t, "examples", "false")
			}},
			{"line 2: key \"index\"", func() error {
				p := writeConfig(t, fmt.Sprintf("examples: false\nindex: %q\n", bad))
				_, _, err := serveWith(t, p, "--config", p)
				return err
			}},
		}
		for _, c := range checks {
			err := c.err()
			if err == nil || exitCode(err) != exitUsage {
				t.Errorf("index %s from %s: %v (exit %d), want exit 2", redacted(bad, secret), c.where, err, exitCode(err))
				continue
			}
			if !strings.Contains(err.Error(), c.where) || strings.Contains(err.Error(), secret) {
				t.Errorf("index from %s: %q, want it named, without the password", c.where, err)
			}
		}
		home := filepath.Join(t.TempDir(), "home")
		for _, args := range [][]string{{"--index", bad, "skill", "list"}, {"--index", bad, "check"}} {
			_, errs, code := runCLI(t, append([]string{"--home", home}, args...)...)
			if code != exitUsage || strings.Contains(errs, secret) || !strings.Contains(errs, "--index: ") {
				t.Errorf("%s: exit %d, stderr %q", args[len(args)-1], code, errs)
			}
		}
		if _, err := os.Stat(home); !os.IsNotExist(err) {
			t.Errorf("a refused index made the data directory: %v", err)
		}
	}
	if left, _ := filepath.Glob("*"); len(left) > 0 {
		t.Errorf("refused indexes made files: %v", left)
	}
	// A postgres:// URL and a SQLite path are taken.
	for _, ok := range []string{"postgres://u:p@db/skillfs", filepath.Join(t.TempDir(), "index.db"), "./host=db.sqlite"} {
		if err := serveFlag(t, "index", ok); err != nil {
			t.Errorf("--index %q: %v", ok, err)
		}
	}
}

func redacted(s, secret string) string { return strings.ReplaceAll(s, secret, "…") }

// TestOtherCommandsCheckTheirRanges: the commands that read a source, list
// sessions or bind one refuse a --timeout, --limit or --pid out of range
// with exit 2 before they do anything.
func TestOtherCommandsCheckTheirRanges(t *testing.T) {
	for _, args := range [][]string{
		{"skill", "import", "/nonexistent", "--timeout", "-5s"},
		{"skill", "prepare", "/nonexistent", "--timeout", "0s"},
		{"skill", "curated", "add", "/nonexistent", "--timeout", "25h"},
		{"session", "list", "--limit", "-1"},
		{"session", "mount", "x", "/t", "--pid", "-3"},
	} {
		_, errs, code := runCLI(t, args...)
		flag := args[len(args)-2]
		if code != exitUsage || !strings.Contains(errs, flag+": ") || !strings.Contains(errs, "range") && !strings.Contains(errs, "want") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %s and its range", args, code, errs, flag)
		}
	}
}

// TestServeSettingsBeforeAnything: serve with a setting out of range exits
// 2 before it checks for root or FUSE, and before it makes a data
// directory.
func TestServeSettingsBeforeAnything(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	for _, args := range [][]string{
		{"--listen", "0.0.0.0:0", "--token-file", "/nonexistent"},
		{"--listen", "127.0.0.1:0"}, // without --token-file
		{"--reconcile-every", "1ns"},
		{"--fuse-request-timeout", "-5s"},
		{"--owner", "nobody"},
		{"--max-conns", "5"},
		{"--diff-memory", "0"},
	} {
		out, errs, code := runCLI(t, append([]string{"serve", "--home", home}, args...)...)
		if code != exitUsage || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, args[0]) {
			t.Errorf("serve %v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("the data directory was touched: %v", err)
	}
}

// settingsTable renders serve's settings as SERVE.md's table, from
// settingRules and serve's flags.
func settingsTable(t testing.TB) string {
	serve := serveCommand(t)
	keys := serveSettingKeys(serve)
	var b strings.Builder
	b.WriteString("| flag | configuration key | environment | default | range |\n|---|---|---|---|---|\n")
	for _, r := range settingRules {
		if !slices.Contains(keys, r.key) {
			continue
		}
		f := serve.Flags().Lookup(r.key)
		def := r.def
		if def == "" {
			def = f.DefValue
			if d, err := time.ParseDuration(def); err == nil && f.Value.Type() == "duration" {
				def = shortDuration(d)
			}
			def = "`" + def + "`"
		}
		key, env := "`"+r.key+"`", "—"
		if r.key == "config" {
			key = "—"
		}
		if r.env != "" {
			env = "`$" + r.env + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s |\n", r.key, key, env, def, r.rng)
	}
	return b.String()
}

// TestSettingsTable: SERVE.md's table of serve's settings is the one
// settingRules and serve's flags make (-update rewrites it).
func TestSettingsTable(t *testing.T) {
	const path = "SERVE.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	sec := strings.Index(readme, "## Configuration file\n")
	if sec < 0 {
		t.Fatal("SERVE.md has no \"## Configuration file\" section")
	}
	start := sec + strings.Index(readme[sec:], "| flag | configuration key |")
	end := start + strings.Index(readme[start:], "\n\n") + 1
	if start < sec || end <= start {
		t.Fatal("SERVE.md's configuration section has no table of settings")
	}
	want := settingsTable(t)
	if got := readme[start:end]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(readme[:start]+want+readme[end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("SERVE.md's table of settings differs from settingRules (go test -run TestSettingsTable -update rewrites it):\n got:\n%s\nwant:\n%s", got, want)
	}
}
