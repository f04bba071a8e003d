package api

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestAPIPageCoversEveryRoute: the table of routes in API.md has a row for
// every operation of openapi.json, one per row, and none the document does
// not have.
func TestAPIPageCoversEveryRoute(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	data, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var inDocument []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				inDocument = append(inDocument, strings.ToUpper(method)+" "+path)
			}
		}
	}
	page, err := os.ReadFile("API.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z]+ /[^`]*)` \\|")
	var inPage []string
	for _, m := range row.FindAllStringSubmatch(string(page), -1) {
		inPage = append(inPage, m[1])
	}
	if len(inPage) == 0 {
		t.Fatal("API.md has no table of routes (rows starting with | `METHOD /path` |)")
	}
	for _, r := range inDocument {
		if !slices.Contains(inPage, r) {
			t.Errorf("%s is in openapi.json but not in API.md", r)
		}
	}
	seen := map[string]bool{}
	for _, r := range inPage {
		if !slices.Contains(inDocument, r) {
			t.Errorf("API.md lists %s, which openapi.json does not have", r)
		}
		if seen[r] {
			t.Errorf("API.md lists %s twice", r)
		}
		seen[r] = true
	}
}
