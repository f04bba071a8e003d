package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// flag is one flag of a command: whether it takes a value and, in the
// reference's words, what kind ("int", "duration", "PATH"; "" for a
// switch), and whether it may be repeated.
type flag struct {
	arg        string
	repeatable bool
}

type flagSet map[string]flag

// cliRef is the command reference of skillfs (cmd/skillfs/CLI.md, made
// from the command tree by TestCLIReference, so it is the binary's own):
// each command's flags by the command's path ("serve", "session list"), and
// the global flags every command takes.
type cliRef struct {
	global   flagSet
	commands map[string]flagSet
}

var (
	cliSection = regexp.MustCompile("^### `skillfs((?: [a-z][a-z0-9-]*)*)`$")
	cliFlagRow = regexp.MustCompile("^\\| `(?:-[a-zA-Z], )?--([a-z0-9][a-z0-9-]*)((?: [^`]*)?)` \\|[^|]*\\|(.*)\\|$")
)

// parseCLI reads the generated blocks of CLI.md: a section per command, a
// table row per flag, the root's rows after "Global flags" the global ones.
func parseCLI(md []byte) (cliRef, error) {
	ref := cliRef{global: flagSet{}, commands: map[string]flagSet{}}
	var cmd flagSet
	generated, global := false, false
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := cliSection.FindStringSubmatch(line); m != nil {
			name := strings.TrimSpace(m[1])
			if _, dup := ref.commands[name]; dup {
				return ref, fmt.Errorf("CLI.md line %d: command %q twice", n, "skillfs "+name)
			}
			cmd, global = flagSet{}, false
			ref.commands[name] = cmd
			continue
		}
		switch {
		case line == "<!-- generated -->":
			generated = true
			continue
		case line == "<!-- /generated -->":
			generated = false
			continue
		}
		if !generated || cmd == nil {
			continue
		}
		if strings.HasPrefix(line, "Global flags") {
			global = true
			continue
		}
		m := cliFlagRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		set := cmd
		if global {
			set = ref.global
		}
		if _, dup := set[m[1]]; dup {
			return ref, fmt.Errorf("CLI.md line %d: flag --%s twice", n, m[1])
		}
		set[m[1]] = flag{arg: strings.TrimSpace(m[2]), repeatable: strings.Contains(m[3], "(repeatable")}
	}
	if err := sc.Err(); err != nil {
		return ref, err
	}
	if len(ref.global) == 0 || len(ref.commands) == 0 {
		return ref, fmt.Errorf("CLI.md: no commands or no global flags found")
	}
	return ref, nil
}

// command is one command line as a container runs it: the subcommand's
// path, the flags given (the last value of each) and what else is there.
type command struct {
	path  string
	flags map[string][]string
}

func (c command) value(name string) (string, bool) {
	v, ok := c.flags[name]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// parseSkillfs parses a command line of skillfs (binary first) against its
// reference, as cobra does: the words name the command (flags may come
// before, between and after them), every flag must be the command's or a
// global one, a flag that takes a value has one (--name=VALUE or --name
// VALUE), and nothing else is there.
func parseSkillfs(ref cliRef, argv []string) (command, error) {
	c := command{flags: map[string][]string{}}
	var words, flags []string
	anyFlag := func(name string) (flag, bool) {
		if f, ok := ref.global[name]; ok {
			return f, true
		}
		for _, set := range ref.commands {
			if f, ok := set[name]; ok {
				return f, true
			}
		}
		return flag{}, false
	}
	for args := argv[1:]; len(args) > 0; args = args[1:] {
		a := args[0]
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			f, known := anyFlag(name)
			if !known {
				return c, fmt.Errorf("skillfs has no flag --%s (CLI.md)", name)
			}
			if !hasValue && f.arg != "" && len(args) > 1 {
				flags = append(flags, args[1])
				args = args[1:]
			}
			continue
		}
		if _, ok := ref.commands[strings.Join(append(words, a), " ")]; !ok {
			return c, fmt.Errorf("skillfs has no command %q (CLI.md)", strings.Join(append(words, a), " "))
		}
		words = append(words, a)
	}
	c.path = strings.Join(words, " ")
	if c.path == "" {
		return c, fmt.Errorf("skillfs with no command")
	}
	own := ref.commands[c.path]
	lookup := func(name string) (flag, bool) {
		if f, ok := own[name]; ok {
			return f, true
		}
		f, ok := ref.global[name]
		return f, ok
	}
	return c, parseFlagArgs(flags, lookup, "skillfs "+c.path, c.flags)
}

// parseFlagArgs parses flags, each --name, --name=VALUE or --name VALUE
// (one dash taken as two, as Go's flag package does for names longer than
// a letter), into into; a switch takes no separate value.
func parseFlagArgs(args []string, lookup func(string) (flag, bool), who string, into map[string][]string) error {
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return fmt.Errorf("%s: unexpected argument %q", who, a)
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		f, ok := lookup(name)
		if !ok {
			return fmt.Errorf("%s has no flag --%s", who, name)
		}
		if f.arg != "" && !hasValue {
			if len(args) == 0 {
				return fmt.Errorf("%s: --%s needs a value", who, name)
			}
			value, args = args[0], args[1:]
		}
		if f.arg == "" && hasValue && value != "true" && value != "false" {
			return fmt.Errorf("%s: --%s is a switch, not %q", who, name, value)
		}
		into[name] = append(into[name], value)
	}
	return nil
}

// The sidecars' flags, from their sources at the released versions the
// manifests run (cmd/*/main.go: the flags it defines, plus the logging
// flags every kubernetes-csi sidecar takes); the test cannot run their
// images.
var sidecarFlags = map[string]flagSet{
	"csi-node-driver-registrar:v2.15.0": withLogging(flagSet{
		"connection-timeout":        {arg: "duration"},
		"timeout":                   {arg: "duration"},
		"csi-address":               {arg: "string"},
		"plugin-registration-path":  {arg: "string"},
		"kubelet-registration-path": {arg: "string"},
		"health-port":               {arg: "int"},
		"http-endpoint":             {arg: "string"},
		"version":                   {},
		"mode":                      {arg: "string"},
		"enable-pprof":              {},
		"automaxprocs":              {},
	}),
	"livenessprobe:v2.17.0": withLogging(flagSet{
		"probe-timeout":   {arg: "duration"},
		"csi-address":     {arg: "string"},
		"health-port":     {arg: "string"},
		"metrics-address": {arg: "string"},
		"http-endpoint":   {arg: "string"},
		"metrics-path":    {arg: "string"},
		"automaxprocs":    {},
	}),
}

func withLogging(s flagSet) flagSet {
	s["v"] = flag{arg: "Level"}
	s["vmodule"] = flag{arg: "pattern=N,..."}
	s["logging-format"] = flag{arg: "string"}
	return s
}
