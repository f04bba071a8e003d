package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command reference of CLI.md: one "### `skillfs ...`" section per
// command of the tree, in the tree's order, each holding a block made from
// the command (its description, usage and flags) between these markers,
// followed by notes written by hand.
const (
	cliPage        = "CLI.md"
	cliSection     = "## Commands\n"
	generatedStart = "<!-- generated -->\n"
	generatedEnd   = "<!-- /generated -->\n"
)

// referenceCommands lists every command of the tree a user can run or ask
// help for, the help and completion commands included, depth first.
func referenceCommands() []*cobra.Command {
	root := (&cli{}).root()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.InitDefaultVersionFlag()
	var cmds []*cobra.Command
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		cmds = append(cmds, cmd)
		for _, sub := range cmd.Commands() {
			if !sub.Hidden {
				walk(sub)
			}
		}
	}
	walk(root)
	return cmds
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// flagTable renders flags as a Markdown table, as the help prints them:
// the name with its value's name, the default when it is not the zero
// value, and the description.
func flagTable(fs *pflag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		if b.Len() == 0 {
			b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
		}
		varname, usage := pflag.UnquoteUsage(f)
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		if varname != "" {
			name += " " + varname
		}
		def := ""
		if !slices.Contains([]string{"", "false", "0", "0s", "[]", "<nil>"}, f.DefValue) {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", cell(name), cell(def), cell(usage))
	})
	return b.String()
}

// generatedBlock is what the command tree says of cmd.
func generatedBlock(cmd *cobra.Command) string {
	var b strings.Builder
	b.WriteString(generatedStart)
	b.WriteString(strings.TrimSuffix(cmd.Short, ".") + ".\n\n```\n")
	if cmd.HasAvailableSubCommands() {
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		fmt.Fprintf(&b, "%s COMMAND\n```\n\nCOMMAND is one of: %s.\n", cmd.CommandPath(), strings.Join(names, ", "))
	} else {
		b.WriteString(cmd.UseLine() + "\n```\n")
	}
	if t := flagTable(cmd.LocalNonPersistentFlags()); t != "" {
		b.WriteString("\n" + t)
	}
	if !cmd.HasParent() {
		b.WriteString("\nGlobal flags, taken by every command, anywhere on its command line:\n\n" + flagTable(cmd.PersistentFlags()))
	}
	b.WriteString(generatedEnd)
	return b.String()
}

// referenceNotes returns the notes written by hand after each command's
// generated block in section, by command path: "" when there are none,
// else the notes from the blank line after the block to their last line.
func referenceNotes(t *testing.T, section string) map[string]string {
	notes := map[string]string{}
	parts := strings.Split(section, "\n### `")
	for _, p := range parts[1:] {
		path, rest, ok := strings.Cut(p, "`\n")
		_, after, found := strings.Cut(rest, generatedEnd)
		if !ok || !found {
			t.Fatalf("%s: the section of %q has no generated block", cliPage, path)
		}
		if after = strings.TrimRight(after, "\n"); after != "" {
			after += "\n"
		}
		notes[path] = after
	}
	return notes
}

// TestCLIReference: the command reference of CLI.md is the command tree's:
// every command in the tree's order, its description, usage and flags as
// the binary has them (-update rewrites the generated blocks and keeps the
// notes written by hand).
func TestCLIReference(t *testing.T) {
	data, err := os.ReadFile(cliPage)
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	start := strings.Index(page, cliSection)
	if start < 0 {
		t.Fatalf("%s has no %q section", cliPage, strings.TrimSpace(cliSection))
	}
	body := start + len(cliSection)
	end := len(page)
	if i := strings.Index(page[body:], "\n## "); i >= 0 {
		end = body + i + 1
	}
	section := page[body:end]
	intro, _, _ := strings.Cut(section, "\n### `")
	intro = strings.TrimRight(intro, "\n") + "\n"
	notes := referenceNotes(t, section)

	var want strings.Builder
	want.WriteString(intro)
	seen := map[string]bool{}
	for _, cmd := range referenceCommands() {
		path := cmd.CommandPath()
		seen[path] = true
		fmt.Fprintf(&want, "\n### `%s`\n\n%s%s", path, generatedBlock(cmd), notes[path])
	}
	want.WriteString("\n")
	for path := range notes {
		if !seen[path] {
			t.Errorf("%s describes %q, which the command tree does not have", cliPage, path)
		}
	}
	if section != want.String() {
		if *update {
			if err := os.WriteFile(cliPage, []byte(page[:body]+want.String()+page[end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's command reference differs from the command tree (go test -run TestCLIReference -update rewrites it)", cliPage)
	}
}
