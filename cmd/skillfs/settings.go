package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"skillfs/index"
)

// A settingRule is what a setting's value must be, checked wherever the
// value came from — the command line, a configuration file, the
// environment — before a command touches anything (see checkSettings).
// Every setting of serve and every duration and count flag of every
// command has one (TestEverySettingHasARule); a new setting joins by
// adding its row to settingRules. SERVE.md's table of serve's settings is
// made from these rows (TestSettingsTable).
type settingRule struct {
	key    string              // the flag's name, and the configuration file's key
	env    string              // the environment variable that sets it when neither does, if any
	def    string              // the default as SERVE.md says it (Markdown), when the flag's own says too little
	rng    string              // what a value must be, as errors and SERVE.md say it
	secret bool                // never repeat the value in a message (it may hold a password)
	inHelp bool                // the range ends the flag's help
	check  func(string) string // why the value (as its flag prints it) is not in range; "" when it is; nil: its flag's type checks it
}

// settingRules are the rules of every setting that has one.
var settingRules = []settingRule{
	// Global settings (serve reads them from its configuration file too).
	{key: "home", env: "SKILLFS_HOME", def: "`$XDG_DATA_HOME/skillfs`, else `~/.local/share/skillfs`",
		rng: "a directory's path", check: pathProblem},
	{key: "index", env: "SKILLFS_INDEX", def: "`<home>/index.db`", secret: true,
		rng: "a postgres:// or postgresql:// URL, or the path of a SQLite file outside the data directory", check: indexProblem},
	{key: "debug", rng: "true or false"},
	{key: "log-format", def: "`text`", rng: "text or json"},

	// serve's own.
	{key: "config", env: configEnv, def: "none", rng: "the path of a YAML file of at most 64 KiB"},
	{key: "mount-root", def: "`<home>/mnt`", rng: "a directory's path", check: pathProblem},
	{key: "agent-path", rng: "an absolute path", check: absPathProblem},
	{key: "listen", def: "none (the socket only)",
		rng: "HOST:PORT, HOST a loopback address (127.0.0.0/8, ::1) or localhost, PORT 0 (any free port) to 65535", check: listenProblem},
	{key: "token-file", def: "none", rng: "a regular file of at most 4 KiB, owned by the user serve runs as, that group and others can neither read nor write; needed by listen"},
	{key: "examples", rng: "true or false"},
	{key: "owner", rng: "UID:GID, each 0 to 4294967294", check: ownerProblem},
	{key: "passthrough", rng: "true or false"},
	{key: "count-opens", rng: "true or false"},
	durationRule("fuse-request-timeout", 15*time.Second, 65535*time.Second, "the kernel's default"),
	durationRule("event-retention", time.Minute, 87600*time.Hour, ""),
	countRule("event-retain-count", 1, 1_000_000_000, ""),
	{key: "host-name", def: "the machine's host name", rng: "up to 253 bytes, no control characters", check: hostNameProblem},
	durationRule("reconcile-every", 100*time.Millisecond, time.Hour, ""),
	countRule("max-conns", 16, 1<<20, ""),
	countRule("max-tcp-conns", 16, 1<<20, ""),
	countRule("max-streams", 1, 1<<20, ""),
	countRule("fd-reserve", 64, 1<<20, ""),
	durationRule("idle-timeout", time.Second, time.Hour, ""),
	countRule("diff-memory", 16, 1<<16, ""),
	countRule("install-max-skills", 1, 1_000_000, ""),
	countRule("install-max-mib", 1, 1<<20, ""),
	countRule("installs-per-hour", 1, 1_000_000, ""),
	{key: "install-git-hosts", def: "none: any https host whose addresses are all public",
		rng: "hosts separated by commas, each `HOST[:PORT]` (https) or `http://HOST[:PORT]` (http too), HOST a DNS name or an IP address (IPv6 in brackets)", check: gitHostsProblem},
	{key: "install-as-root", rng: "true or false"},
	countRule("max-children", 1, 100_000, ""),
	countRule("max-user-sessions", 1, 100_000_000, ""),
	{key: "keeper", def: "none: the mount ends with the daemon", rng: "the absolute path of the socket of `skillfs keeper`", check: optionalAbsPath},
	{key: "import-root", env: importRootsEnv, def: "none", rng: "an existing directory, not in /proc, /sys or /dev; repeatable (a list in the file; folders separated by `:` in the environment)"},

	// Other commands'.
	{key: "socket", rng: "an absolute path", check: optionalAbsPath},
	durationRule("timeout", time.Second, 24*time.Hour, ""),
	countRule("limit", 1, 1_000_000_000, "all"),
	countRule("pid", 1, 1<<22, "none (the daemon's own mount namespace)"),
}

// helpRanges ends the help of every flag of cmd and its subcommands whose
// rule says so with the flag's range.
func helpRanges(cmd *cobra.Command) {
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if r, ok := ruleOf(f.Name); ok && r.inHelp {
			f.Usage += " (range " + r.rng + ")"
		}
	})
	for _, sub := range cmd.Commands() {
		helpRanges(sub)
	}
}

// ruleOf returns the rule of the setting key.
func ruleOf(key string) (settingRule, bool) {
	for _, r := range settingRules {
		if r.key == key {
			return r, true
		}
	}
	return settingRule{}, false
}

// durationRule is the rule of a duration from least to most; zero, when
// not "", says what 0 means, and 0 is allowed too.
func durationRule(key string, least, most time.Duration, zero string) settingRule {
	rng := shortDuration(least) + " to " + shortDuration(most)
	if zero != "" {
		rng += ", or 0 for " + zero
	}
	return settingRule{key: key, rng: rng, inHelp: true, check: func(v string) string {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return "not a duration"
		case d == 0 && zero != "", d >= least && d <= most:
			return ""
		}
		return "out of range"
	}}
}

// countRule is durationRule for a whole number.
func countRule(key string, least, most int64, zero string) settingRule {
	rng := strconv.FormatInt(least, 10) + " to " + strconv.FormatInt(most, 10)
	if zero != "" {
		rng += ", or 0 for " + zero
	}
	return settingRule{key: key, rng: rng, inHelp: true, check: func(v string) string {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			return "not a whole number"
		case n == 0 && zero != "", n >= least && n <= most:
			return ""
		}
		return "out of range"
	}}
}

// shortDuration prints d without the zero units time.Duration.String
// ends with: 1h, not 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func pathProblem(v string) string {
	if strings.ContainsFunc(v, unicode.IsControl) {
		return "holds a control character"
	}
	return ""
}

func absPathProblem(v string) string {
	if p := pathProblem(v); p != "" {
		return p
	}
	if !filepath.IsAbs(v) {
		return "not an absolute path"
	}
	return ""
}

// optionalAbsPath is absPathProblem, none allowed.
func optionalAbsPath(v string) string {
	if v == "" {
		return ""
	}
	return absPathProblem(v)
}

func indexProblem(v string) string {
	if v == "" {
		return "" // the data directory's own
	}
	return index.TargetProblem(v)
}

// listenProblem checks a TCP address to serve the API on without resolving
// or binding anything: only loopback addresses are allowed, so a name
// other than localhost (which could resolve to anything) is refused.
func listenProblem(v string) string {
	if v == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "not HOST:PORT"
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
		return "its port is not a number from 0 to 65535"
	}
	if host == "localhost" {
		return ""
	}
	ip := net.ParseIP(host)
	switch {
	case host == "":
		return "no host: every address would be served (give 127.0.0.1)"
	case ip == nil:
		return fmt.Sprintf("%s is not an IP address or localhost (a name could resolve to anything)", host)
	case !ip.IsLoopback():
		return fmt.Sprintf("%s is not a loopback address: only this machine may reach the API", host)
	}
	return ""
}

// parseOwner reads UID:GID, each a decimal number from 0 to 4294967294
// (4294967295 is the kernel's "no id").
func parseOwner(v string) (uid, gid uint32, ok bool) {
	u, g, found := strings.Cut(v, ":")
	if !found {
		return 0, 0, false
	}
	id := func(s string) (uint32, bool) {
		n, err := strconv.ParseUint(s, 10, 32)
		return uint32(n), err == nil && n < 1<<32-1 && strconv.FormatUint(n, 10) == s
	}
	uid, uok := id(u)
	gid, gok := id(g)
	return uid, gid, uok && gok
}

func ownerProblem(v string) string {
	if _, _, ok := parseOwner(v); !ok {
		return "not UID:GID"
	}
	return ""
}

func hostNameProblem(v string) string {
	switch {
	case len(v) > 253:
		return "longer than 253 bytes"
	case strings.ContainsFunc(v, unicode.IsControl):
		return "holds a control character"
	}
	return ""
}

// configFile is what a configuration file set: its path and settings.
type configFile struct {
	path     string
	settings []setting
}

// lookup returns the file's setting of key.
func (c *configFile) lookup(key string) (setting, bool) {
	if c != nil {
		for _, s := range c.settings {
			if s.key == key {
				return s, true
			}
		}
	}
	return setting{}, false
}

// settingValue returns the value of f, which has rule r, as its flag
// prints it, how messages show it, and where it came from: the command
// line, then the configuration file (nil: none), then r's environment
// variable, then f's default.
func settingValue(f *pflag.Flag, r settingRule, file *configFile) (value, shown, where string) {
	value = f.Value.String()
	shown = value
	if d, err := time.ParseDuration(value); err == nil && f.Value.Type() == "duration" {
		shown = shortDuration(d)
	}
	switch s, inFile := file.lookup(f.Name); {
	case f.Changed:
		return value, shown, "--" + f.Name
	case inFile:
		return value, s.value, fmt.Sprintf("%s line %d: key %q", file.path, s.line, f.Name)
	case r.env != "" && os.Getenv(r.env) != "" && value == f.DefValue:
		v := os.Getenv(r.env)
		return v, v, "$" + r.env
	}
	return value, shown, "the default of --" + f.Name
}

// checkSettings checks every setting of cmd that has a rule against it,
// wherever its value came from (file: what a configuration file set, nil
// for none), and names the first out of range — flag, file and line, or
// environment variable — as a usage error. Global settings are checked
// only when global is set: serve checks them, the other commands check
// the index where they open it (cli.indexTarget).
func checkSettings(cmd *cobra.Command, file *configFile, global bool) error {
	flags := cmd.LocalNonPersistentFlags()
	if global {
		flags = cmd.Flags()
	}
	for _, r := range settingRules {
		f := flags.Lookup(r.key)
		if f == nil || r.check == nil {
			continue
		}
		value, shown, where := settingValue(f, r, file)
		if problem := r.check(value); problem != "" {
			return usageErr(cmd, "%s", settingError(r, shown, where, problem))
		}
	}
	return nil
}

// settingError says that value (as shown), from where, is not what r
// wants.
func settingError(r settingRule, value, where, problem string) string {
	if r.secret {
		return fmt.Sprintf("%s: %s (want %s)", where, problem, r.rng)
	}
	return fmt.Sprintf("%s: %q: %s (want %s)", where, value, problem, r.rng)
}
