package server

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the permission table of API.md")

// apiPage is the API's reference page.
const apiPage = "../../api/API.md"

// The markers around the generated permission table in API.md.
const (
	accessBegin = "<!-- access table: generated from server/access.go by `go test ./cmd/skillfs/internal/server -run TestCredentialsDocumented -update` -->\n"
	accessEnd   = "<!-- /access table -->"
)

// TestCredentialsDocumented: the permission table of API.md's Credentials
// section is the access table of the routes the API registers.
func TestCredentialsDocumented(t *testing.T) {
	page, err := os.ReadFile(apiPage)
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	before, rest, ok := strings.Cut(text, accessBegin)
	if !ok {
		t.Fatalf("%s has no permission table (a line %q)", apiPage, strings.TrimSpace(accessBegin))
	}
	table, after, ok := strings.Cut(rest, accessEnd)
	if !ok {
		t.Fatalf("%s: the permission table has no end (%q)", apiPage, accessEnd)
	}
	want := accessRows(New(Config{}).Routes().Patterns())
	if table == want {
		return
	}
	if *update {
		if err := os.WriteFile(apiPage, []byte(before+accessBegin+want+accessEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the permission table of %s is not the access table's (go test -run TestCredentialsDocumented -update rewrites it):\n%s\nwant:\n%s", apiPage, table, want)
}
