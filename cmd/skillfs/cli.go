package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"skillfs/cmd/skillfs/internal/catalog"
)

const usageText = `skillfs serves agent skills to sandboxed sessions as read-only files.

Usage: skillfs [--home DIR] [--as UID] [--json] [--debug] [--log-format text|json] COMMAND ...

  serve                                   run the daemon
  status                                  the running daemon at a glance
  check [--repair]                        check the data directory (index against content store); repair it
  skill import SOURCE [--skill NAME]... [--all] [--list] [--share SCOPE] [--replace] [--builtin] [--ref REF]
  skill list | show SLUG | validate PATH | enable SLUG | disable SLUG | delete SLUG
  skill export SLUG [-o FILE]
  skill deps SLUG [--skill S]... [--tool T]... [--mcp M]...
  skill share SLUG --read SCOPE [--manage SCOPE]
  user add UID [--role user|admin|superadmin] [--department ID] | user list | user delete UID
  tool add|delete NAME | tool list          mcp add|delete NAME | mcp list
  session create --user UID [--skills a,b | --all] [--preload a,b]
  session list | show ID | mount ID TARGET | unmount ID TARGET | refresh ID | close ID
  session activations ID | prompt ID [--format xml|markdown] | mentions ID --text TEXT
  session read ID skill://SLUG[/PATH]
  version

SCOPE is global, department:ID[,ID...] or user:UID[,UID...].
The data directory is --home, else $SKILLFS_HOME, else ~/.local/share/skillfs.
`

// cli carries what every command needs.
type cli struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	home   string
	as     string
	json   bool
	debug  bool

	logFormat logFormat
	log       *slog.Logger // serve's log, once made
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	err := c.dispatch(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "skillfs: %v\n", err)
		if errors.Is(err, errUsage) {
			fmt.Fprintln(stderr, "run `skillfs help` for usage")
		}
	}
	return exitCode(err)
}

func (c *cli) dispatch(args []string) error {
	fs := c.flags("skillfs")
	rest, err := parseGlobal(fs, args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		fmt.Fprint(c.stderr, usageText)
		return fmt.Errorf("no command given: %w", errUsage)
	}
	cmd, rest := rest[0], rest[1:]
	sub := ""
	if len(rest) > 0 {
		sub = rest[0]
	}
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, usageText)
		return nil
	case "version":
		fmt.Fprintln(c.stdout, versionLine())
		return nil
	case "serve":
		return c.serve(rest)
	case "check":
		return c.check(rest)
	case "status":
		return c.status(rest)
	case "skill":
		return c.skillCmd(sub, tail(rest))
	case "user":
		return c.userCmd(sub, tail(rest))
	case "tool":
		return c.toolCmd(sub, tail(rest), false)
	case "mcp":
		return c.toolCmd(sub, tail(rest), true)
	case "session":
		return c.sessionCmd(sub, tail(rest))
	}
	return fmt.Errorf("unknown command %q: %w", cmd, errUsage)
}

// version, when set at build time (-ldflags "-X main.version=..."), names
// the release; otherwise the module's version from the build is shown.
var version = ""

// versionLine says what was built: the version, the VCS revision and time
// (with "+modified" for a tree with changes), and the Go version.
func versionLine() string {
	v, rev, at, modified, goVersion := version, "", "", false, runtime.Version()
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	out := "skillfs " + v
	if rev != "" {
		if modified {
			rev += "+modified"
		}
		out += " " + rev
		if at != "" {
			out += " " + at
		}
	}
	return out + " " + goVersion
}

func tail(a []string) []string {
	if len(a) == 0 {
		return nil
	}
	return a[1:]
}

// flags makes a flag set carrying the global flags, so they may appear
// anywhere on the command line.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.home, "home", c.home, "data directory")
	fs.StringVar(&c.as, "as", c.as, "act as this user")
	fs.BoolVar(&c.json, "json", c.json, "print JSON")
	fs.BoolVar(&c.debug, "debug", c.debug, "log debug messages")
	fs.Var(&c.logFormat, "log-format", "log lines as text or json")
	return fs
}

// announce says where a new data directory was made.
func (c *cli) announce(home string) {
	const why = "--home or SKILLFS_HOME chooses another"
	if c.log != nil {
		c.log.Warn("created a new data directory", "home", home, "note", why)
		return
	}
	fmt.Fprintf(c.stderr, "skillfs: created a new data directory at %s (%s)\n", home, why)
}

// logFormat is how log lines are written: "text" (the default) or "json".
type logFormat string

func (f *logFormat) String() string { return string(*f) }

func (f *logFormat) Set(v string) error {
	if v != "text" && v != "json" {
		return fmt.Errorf("want text or json, not %q", v)
	}
	*f = logFormat(v)
	return nil
}

// parseGlobal parses leading flags and stops at the first argument.
func parseGlobal(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%v: %w", err, errUsage)
	}
	return fs.Args(), nil
}

// parse parses flags anywhere among the arguments and checks the number of
// positional arguments.
func parse(fs *flag.FlagSet, args []string, minPos, maxPos int, names string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, fmt.Errorf("%s %s: %w", fs.Name(), names, errUsage)
			}
			return nil, fmt.Errorf("%s: %v: %w", fs.Name(), err, errUsage)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minPos || (maxPos >= 0 && len(pos) > maxPos) {
		return nil, fmt.Errorf("%s takes %s: %w", fs.Name(), names, errUsage)
	}
	return pos, nil
}

// listFlag collects a repeatable flag; commas also separate values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// homeDir resolves the data directory.
func (c *cli) homeDir() (string, error) {
	h := c.home
	if h == "" {
		h = os.Getenv("SKILLFS_HOME")
	}
	if h == "" {
		base := os.Getenv("XDG_DATA_HOME")
		if base == "" {
			u, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("no data directory: pass --home or set SKILLFS_HOME")
			}
			base = filepath.Join(u, ".local", "share")
		}
		h = filepath.Join(base, "skillfs")
	}
	return filepath.Abs(h)
}

func (c *cli) logger() *slog.Logger {
	lvl := slog.LevelInfo
	if c.debug {
		lvl = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(c.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(c.stderr, opts))
}

// openCatalog opens the data directory for a management command.
func (c *cli) openCatalog() (*catalog.Catalog, error) {
	home, err := c.homeDir()
	if err != nil {
		return nil, err
	}
	return c.open(home, catalog.Options{Logger: slog.New(slog.DiscardHandler)})
}

// open opens the data directory at home, saying so on stderr when it makes
// a new one: a forgotten --home must not go unnoticed. serve says it in its
// log (c.log), in the log's format.
func (c *cli) open(home string, opts catalog.Options) (*catalog.Catalog, error) {
	fresh := !catalog.Exists(home)
	cat, err := catalog.Open(c.ctx, home, opts)
	if err == nil && fresh {
		c.announce(home)
	}
	return cat, err
}

// parseOpen parses a management command's arguments, then opens the catalog.
func (c *cli) parseOpen(fs *flag.FlagSet, args []string, minPos, maxPos int, names string) ([]string, *catalog.Catalog, error) {
	pos, err := parse(fs, args, minPos, maxPos, names)
	if err != nil {
		return nil, nil, err
	}
	cat, err := c.openCatalog()
	if err != nil {
		return nil, nil, err
	}
	return pos, cat, nil
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows with aligned columns.
func (c *cli) table(header []string, rows [][]string) {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}
