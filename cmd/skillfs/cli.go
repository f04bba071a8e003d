package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"text/tabwriter"

	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
)

// cli carries what every command needs.
type cli struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	home   string
	index  string // --index: a shared index (see catalog.Options.Index)
	as     string
	json   bool
	debug  bool

	logFormat logFormat
	log       *slog.Logger // serve's log, once made
	// stopSignal is the signal that stopped a long-running command
	// (untilSignalled), nil before one came.
	stopSignal atomic.Pointer[os.Signal]
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	root := c.root()
	root.SetArgs(append([]string{}, args...))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		msg := skills.Message(err)
		if errors.Is(err, errUsage) {
			// A mistake on the command line is one line: what was
			// wrong, and where the help of the command it concerns is.
			var ue *usageError
			if errors.As(err, &ue) {
				cmd = ue.cmd
			}
			if cmd == nil {
				cmd = root
			}
			msg = strings.TrimSuffix(msg, ": "+errUsage.Error())
			msg += fmt.Sprintf(" (see `%s --help`)", cmd.CommandPath())
		}
		fmt.Fprintf(stderr, "skillfs: %s\n", msg)
	}
	return exitCode(err)
}

// version, when set at build time (-ldflags "-X main.version=..."), names
// the release; otherwise the module's version from the build is shown.
var version = ""

// buildInfo is what was built. Its JSON form (`skillfs version --json`)
// is part of the CLI contract.
type buildInfo struct {
	Version  string `json:"version"`            // a release, the module's version, or "(devel)"
	Revision string `json:"revision,omitempty"` // the VCS revision the build recorded
	Time     string `json:"time,omitempty"`     // the time of that revision
	Modified bool   `json:"modified,omitempty"` // the tree had changes
	Go       string `json:"go"`                 // the Go version it was built with
}

// build reads what the binary recorded of its own build.
func build() buildInfo {
	b := buildInfo{Version: version, Go: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" {
			b.Version = info.Main.Version
		}
		b.Go = info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	return b
}

// versionLine says what was built: the version, the VCS revision and time
// (with "+modified" for a tree with changes), and the Go version.
func versionLine() string {
	b := build()
	out := "skillfs " + b.Version
	if b.Revision != "" {
		out += " " + b.Revision
		if b.Modified {
			out += "+modified"
		}
		if b.Time != "" {
			out += " " + b.Time
		}
	}
	return out + " " + b.Go
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
func (f *logFormat) Type() string   { return "text|json" }

func (f *logFormat) Set(v string) error {
	if v != "text" && v != "json" {
		return fmt.Errorf("want text or json, not %q", v)
	}
	*f = logFormat(v)
	return nil
}

// listFlag collects a repeatable flag; commas also separate values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Type() string   { return "list" }
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

// indexTarget is the shared index: --index, else $SKILLFS_INDEX, else ""
// (the data directory's own). A target that cannot name an index is a
// usage error naming where it came from, and nothing of it (it may hold a
// password).
func (c *cli) indexTarget() (string, error) {
	target, where := c.index, "--index"
	if target == "" {
		target, where = os.Getenv("SKILLFS_INDEX"), "$SKILLFS_INDEX"
	}
	r, _ := ruleOf("index")
	if problem := r.check(target); problem != "" {
		return "", fmt.Errorf("%s: %w", settingError(r, target, where, problem), errUsage)
	}
	return target, nil
}

// query runs fn on the catalog and prints what it returns: as JSON with
// --json, else with text.
func query[T any](c *cli, fn func(*catalog.Catalog) (T, error), text func(T)) error {
	cat, err := c.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	v, err := fn(cat)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(v)
	}
	text(v)
	return nil
}

// open opens the data directory at home, saying so on stderr when it makes
// a new one: a forgotten --home must not go unnoticed. serve says it in its
// log (c.log), in the log's format.
func (c *cli) open(home string, opts catalog.Options) (*catalog.Catalog, error) {
	target, err := c.indexTarget()
	if err != nil {
		return nil, err
	}
	opts.Index = target
	fresh := !catalog.Exists(home)
	cat, err := catalog.Open(c.ctx, home, opts)
	if err == nil && fresh {
		c.announce(home)
	}
	return cat, err
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
