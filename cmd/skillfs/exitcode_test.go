package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"skillfs/skills"
)

// update rewrites the golden files and the generated tables of the README
// and the reference pages.
var update = flag.Bool("update", false, "rewrite golden files and the generated tables of the README and the reference pages")

// exitTable renders every exit code, the command line's own and the error
// classes', as the README's table.
func exitTable() string {
	rows := append(slices.Clone(cliExits), skills.Classes...)
	slices.SortFunc(rows, func(a, b skills.ExitClass) int { return a.Exit - b.Exit })
	var b strings.Builder
	b.WriteString("| code | meaning |\n|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s |\n", r.Exit, r.Meaning)
	}
	return b.String()
}

// TestREADMEExitCodes: the README's exit-code table is the one the code
// has (with -update, the README's table is rewritten from it).
func TestREADMEExitCodes(t *testing.T) {
	const path = "../../README.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	sec := strings.Index(readme, "## Exit codes\n")
	if sec < 0 {
		t.Fatal("README has no \"## Exit codes\" section")
	}
	start := sec + strings.Index(readme[sec:], "| code | meaning |")
	end := start + strings.Index(readme[start:], "\n\n") + 1
	if start < sec || end <= start {
		t.Fatal("README's exit-code section has no table")
	}
	want := exitTable()
	if got := readme[start:end]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(readme[:start]+want+readme[end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("README's exit-code table differs from the code's (go test -run TestREADMEExitCodes -update rewrites it):\n got:\n%s\nwant:\n%s", got, want)
	}
}

// TestExitCode: the command line's own errors, then the kinds' codes.
func TestExitCode(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{fmt.Errorf("bad flag: %w", errUsage), 2},
		{fmt.Errorf("no socket: %w", errNoDaemon), 7},
		{fmt.Errorf("skill x: %w", skills.ErrNotFound), 3},
		{kindError{Msg: "3 of 4 failed", Kind: skills.ErrInvalid}, 5},
		{&validateError{n: 2}, 1},
		{errors.New("disk on fire"), 1},
	}
	for _, tc := range cases {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
