package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"skillfs/skills"
)

// configEnv names the configuration file of serve when --config is not
// given.
const configEnv = "SKILLFS_CONFIG"

// configGlobals are the global flags a configuration file sets for serve,
// besides serve's own flags (--as and --json change nothing in serve).
var configGlobals = []string{"home", "index", "debug", "log-format"}

// maxConfigBytes bounds a configuration file: it is a page of settings.
const maxConfigBytes = 64 << 10

// setting is one "key: value" of a configuration file, or "key: [values]"
// for a flag that may be given several times.
type setting struct {
	key, value string
	list       []string // the values of a list (isList)
	isList     bool
	line       int // the key's
	valueLine  int // the value's
}

// parseConfig reads a configuration file: one YAML mapping from flag names
// to single values, or to lists of them for flags that may be repeated. It checks the shape only; configure checks the keys
// and values.
func parseConfig(data []byte) ([]setting, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty: nothing set
		}
		return nil, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("line %d: a second document: the file holds one mapping of settings", max(more.Line, 1))
	}
	m := &doc
	if m.Kind == yaml.DocumentNode && len(m.Content) == 1 {
		m = m.Content[0]
	}
	if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
		return nil, nil // only comments
	}
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of settings (key: value), not %s", m.Line, nodeKind(m))
	}
	seen := map[string]int{}
	var out []setting
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return nil, fmt.Errorf("line %d: a key must be a setting's name, not %s", k.Line, nodeKind(k))
		}
		if first, ok := seen[k.Value]; ok {
			return nil, fmt.Errorf("line %d: key %q again (first set on line %d)", k.Line, k.Value, first)
		}
		seen[k.Value] = k.Line
		if v.Kind == yaml.SequenceNode {
			st := setting{key: k.Value, isList: true, list: []string{}, line: k.Line, valueLine: v.Line}
			for _, it := range v.Content {
				if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
					return nil, fmt.Errorf("line %d: key %q: want a list of values, not one holding %s", it.Line, k.Value, nodeKind(it))
				}
				st.list = append(st.list, it.Value)
			}
			out = append(out, st)
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return nil, fmt.Errorf("line %d: key %q: want one value, not %s", v.Line, k.Value, nodeKind(v))
		}
		out = append(out, setting{key: k.Value, value: v.Value, line: k.Line, valueLine: v.Line})
	}
	return out, nil
}

// nodeKind names what a YAML node is, for errors.
func nodeKind(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.AliasNode:
		return "an alias"
	case n.Tag == "!!null":
		return "nothing"
	}
	return fmt.Sprintf("%q", n.Value)
}

// readsConfig reports whether cmd reads a configuration file (serve).
func readsConfig(cmd *cobra.Command) bool {
	return cmd.LocalNonPersistentFlags().Lookup("config") != nil
}

// configKeys lists the keys a configuration file of cmd may set: its own
// flags and configGlobals.
func configKeys(cmd *cobra.Command) []string {
	keys := slices.Clone(configGlobals)
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && f.Name != "config" {
			keys = append(keys, f.Name)
		}
	})
	slices.Sort(keys)
	return keys
}

// configure sets cmd's flags from settings read from the file name. A
// flag given on the command line keeps its value. Every key is checked
// before any flag is set.
func configure(cmd *cobra.Command, name string, settings []setting) error {
	keys := configKeys(cmd)
	for _, s := range settings {
		if !slices.Contains(keys, s.key) {
			return usageErr(cmd, "%s line %d: unknown key %q (the keys are %s)", name, s.line, s.key, strings.Join(keys, ", "))
		}
		if _, ok := cmd.Flags().Lookup(s.key).Value.(pflag.SliceValue); s.isList && !ok {
			return usageErr(cmd, "%s line %d: key %q: want one value, not a list", name, s.valueLine, s.key)
		}
	}
	for _, s := range settings {
		f := cmd.Flags().Lookup(s.key)
		if f.Changed {
			continue // the command line wins
		}
		if s.isList {
			if err := f.Value.(pflag.SliceValue).Replace(s.list); err != nil {
				return usageErr(cmd, "%s line %d: key %q: bad value: %v", name, s.valueLine, s.key, err)
			}
			continue
		}
		old := f.Value.String()
		if err := f.Value.Set(s.value); err != nil {
			f.Value.Set(old) // a refused value may have changed the flag all the same
			return usageErr(cmd, "%s line %d: key %q: bad value %q: %v", name, s.line, s.key, s.value, err)
		}
	}
	return nil
}

// loadConfig applies the configuration file path (else $SKILLFS_CONFIG, if
// set) to cmd's flags, and returns what it set (nil: no file).
func loadConfig(cmd *cobra.Command, path string) (*configFile, error) {
	if path == "" {
		path = os.Getenv(configEnv)
		if path == "" {
			return nil, nil
		}
	}
	f, _, err := skills.OpenRegular(path, path, true)
	if err != nil {
		return nil, fmt.Errorf("configuration file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read configuration file %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("configuration file %s is larger than %d bytes: %w", path, maxConfigBytes, skills.ErrLimit)
	}
	settings, err := parseConfig(data)
	if err != nil {
		return nil, usageErr(cmd, "configuration file %s: %v", path, err)
	}
	if err := configure(cmd, path, settings); err != nil {
		return nil, err
	}
	return &configFile{path: path, settings: settings}, nil
}

// serveSettings applies serve's configuration file (see loadConfig) and
// checks every setting of cmd, wherever its value came from (see
// checkSettings).
func serveSettings(cmd *cobra.Command, path string) error {
	file, err := loadConfig(cmd, path)
	if err != nil {
		return err
	}
	return checkSettings(cmd, file, true)
}
