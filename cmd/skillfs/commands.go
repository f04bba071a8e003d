package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"skillfs/cmd/skillfs/internal/catalog"
)

// rootLong is what `skillfs --help` says before the commands.
const rootLong = `skillfs serves agent skills to sandboxed sessions as read-only files.

SCOPE is global, department:ID[,ID...] or user:UID[,UID...].
The data directory is --home, else $SKILLFS_HOME, else $XDG_DATA_HOME/skillfs,
else ~/.local/share/skillfs.`

// root builds the command tree. Every command and flag is described here
// or next to its implementation, once; help and usage are generated.
func (c *cli) root() *cobra.Command {
	root := group("skillfs", "serve agent skills to sandboxed sessions as read-only files",
		c.serveCmd(), c.keeperCmd(), c.statusCmd(), c.checkCmd(), c.versionCmd(),
		c.skillCmd(), c.userCmd(), c.toolCmd(false), c.toolCmd(true), c.sessionCmd(), c.tokenCmd(), c.hostsCmd())
	root.Long = rootLong
	// `skillfs --version` is `skillfs version`, as with most tools.
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SilenceErrors, root.SilenceUsage = true, true
	root.CompletionOptions.HiddenDefaultCmd = false
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		c.ctx = cmd.Context()
		if readsConfig(cmd) {
			return nil // checked once the file is read (serveSettings)
		}
		return checkSettings(cmd, nil, false)
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErr(cmd, "%s: %v", commandName(cmd), err)
	})
	root.SetHelpCommand(helpCmd())
	root.SetUsageTemplate(usageTemplate)
	g := root.PersistentFlags()
	g.StringVar(&c.home, "home", "", "the data directory, `DIR` (default $SKILLFS_HOME, else $XDG_DATA_HOME/skillfs, else ~/.local/share/skillfs)")
	g.StringVar(&c.index, "index", "", "a shared index, `TARGET`: a postgres:// URL or a SQLite file outside the data directory, for several hosts serving one catalog (default $SKILLFS_INDEX, else the data directory's own)")
	g.StringVar(&c.as, "as", "", "act as user `UID` (default "+catalog.Operator+")")
	g.BoolVar(&c.json, "json", false, "print JSON")
	g.BoolVar(&c.debug, "debug", false, "log debug messages")
	g.Var(&c.logFormat, "log-format", "log lines as text or json (default text)")
	helpRanges(root)
	return root
}

// group makes a command that only holds subcommands: run without one, or
// with one it does not have, it is a usage error (with suggestions).
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{
		Use: use, Short: short,
		Args:                       subcommandArgs,
		RunE:                       func(*cobra.Command, []string) error { return nil },
		SuggestionsMinimumDistance: 2,
	}
	g.AddCommand(subs...)
	return g
}

// subcommandArgs rejects what a group command is given instead of one of
// its subcommands.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		var names []string
		for _, s := range cmd.Commands() {
			if s.IsAvailableCommand() {
				names = append(names, s.Name())
			}
		}
		if !cmd.HasParent() {
			return usageErr(cmd, "no command given (one of: %s)", strings.Join(names, ", "))
		}
		return usageErr(cmd, "%s needs a command (one of: %s)", commandName(cmd), strings.Join(names, ", "))
	}
	return unknownCommand(cmd, args[0])
}

// unknownCommand says that cmd has no subcommand name, and which it may
// have meant.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(quoteAll(s), " or ") + "?"
	}
	return usageErr(cmd, "%s", msg)
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

// leaf makes a command that does something, taking between min and max
// positional arguments (max -1: any number), named in use after the
// command's name. Its RunE is set by the caller, after its flags.
func leaf(use, short string, min, max int) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: func(cmd *cobra.Command, args []string) error {
		if len(args) >= min && (max < 0 || len(args) <= max) {
			return nil
		}
		what := "no arguments"
		if _, after, ok := strings.Cut(cmd.Use, " "); ok && max != 0 {
			what = after
		}
		if len(args) == 0 {
			return usageErr(cmd, "%s takes %s", commandName(cmd), what)
		}
		return usageErr(cmd, "%s takes %s, not %s", commandName(cmd), what, strings.Join(quoteAll(args), " "))
	}}
}

// commandName is a command's path without the program's name.
func commandName(cmd *cobra.Command) string {
	p := cmd.CommandPath()
	if _, after, ok := strings.Cut(p, " "); ok {
		return after
	}
	return p
}

// usageError is a mistake on the command line about cmd, whose help run
// points to.
type usageError struct {
	msg string
	cmd *cobra.Command
}

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return errUsage }

func usageErr(cmd *cobra.Command, format string, a ...any) error {
	return &usageError{fmt.Sprintf(format, a...), cmd}
}

// usageTemplate is cobra's, except that a command holding subcommands is
// not shown as one to run by itself (it only says what it holds).
const usageTemplate = `Usage:{{if and .Runnable (not .HasAvailableSubCommands)}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// helpCmd is `skillfs help [COMMAND [SUBCOMMAND]]`: the same text as
// `COMMAND --help`; a command that does not exist is a usage error.
func helpCmd() *cobra.Command {
	h := leaf("help [COMMAND [SUBCOMMAND]]", "help about any command", 0, -1)
	h.ValidArgsFunction = func(h *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cmd, rest, err := h.Root().Find(args)
		if err != nil || len(rest) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, s := range cmd.Commands() {
			if s.IsAvailableCommand() && strings.HasPrefix(s.Name(), toComplete) {
				out = append(out, cobra.CompletionWithDesc(s.Name(), s.Short))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	h.RunE = func(h *cobra.Command, args []string) error {
		cmd, rest, err := h.Root().Find(args)
		if err != nil {
			return usageErr(h, "%v", err)
		}
		if len(rest) > 0 {
			return unknownCommand(cmd, rest[0])
		}
		cmd.InitDefaultHelpFlag()
		cmd.InitDefaultVersionFlag()
		return cmd.Help()
	}
	return h
}

func (c *cli) versionCmd() *cobra.Command {
	cmd := leaf("version", "the build: its version, VCS revision and time, and Go version", 0, 0)
	cmd.RunE = func(*cobra.Command, []string) error {
		if c.json {
			return c.printJSON(build())
		}
		fmt.Fprintln(c.stdout, versionLine())
		return nil
	}
	return cmd
}
