package claims

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const example = `claims:
  - namespace: agents
    serviceAccounts: [runner]
    users: [alice, bob]
    skills: [pdf, release-notes]
  - namespace: agents
    serviceAccounts: [runner]
    users: [alice]
    skills: [docx]
  - namespace: "*"
    serviceAccounts: [trusted]
    users: ["*"]
`

func TestAllow(t *testing.T) {
	p, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	if p.Claims[0].Line != 2 || p.Claims[2].Line != 10 {
		t.Errorf("rule lines %d, %d; want 2, 10", p.Claims[0].Line, p.Claims[2].Line)
	}
	cases := []struct {
		name string
		c    Claim
		deny string // what the denial says, "" for allowed
	}{
		{"listed skills", Claim{Namespace: "agents", ServiceAccount: "runner", User: "bob", Skills: []string{"pdf"}}, ""},
		{"skills of two rules add up", Claim{Namespace: "agents", ServiceAccount: "runner", User: "alice", Skills: []string{"pdf", "docx"}, Preload: []string{"docx"}}, ""},
		{"no skills asked", Claim{Namespace: "agents", ServiceAccount: "runner", User: "bob"}, ""},
		{"skill of another user's rule", Claim{Namespace: "agents", ServiceAccount: "runner", User: "bob", Skills: []string{"docx"}}, `may not claim skills docx of user "bob"`},
		{"preload outside", Claim{Namespace: "agents", ServiceAccount: "runner", User: "bob", Skills: []string{"pdf"}, Preload: []string{"secret"}}, "skills secret"},
		{"all with listed skills", Claim{Namespace: "agents", ServiceAccount: "runner", User: "alice", All: true}, "may not claim all skills"},
		{"user not listed", Claim{Namespace: "agents", ServiceAccount: "runner", User: "carol"}, `may not claim user "carol"`},
		{"other service account", Claim{Namespace: "agents", ServiceAccount: "default", User: "alice"}, `namespace "agents" with service account "default" may claim no user`},
		{"other namespace", Claim{Namespace: "prod", ServiceAccount: "runner", User: "alice"}, `namespace "prod"`},
		{"wildcards", Claim{Namespace: "prod", ServiceAccount: "trusted", User: "anyone", All: true}, ""},
		{"no pod info", Claim{User: "alice"}, "podInfoOnMount"},
		{"exact names only", Claim{Namespace: "agents-2", ServiceAccount: "runner", User: "alice"}, "may claim no user"},
	}
	for _, c := range cases {
		err := p.Allow(c.c)
		switch {
		case c.deny == "" && err != nil:
			t.Errorf("%s: denied: %v", c.name, err)
		case c.deny != "" && (err == nil || !strings.Contains(err.Error(), c.deny)):
			t.Errorf("%s: %v, want a denial saying %q", c.name, err, c.deny)
		case err != nil && !errors.As(err, new(*Denied)):
			t.Errorf("%s: %T is not a *Denied", c.name, err)
		}
	}
	if err := (&Policy{}).Allow(Claim{Namespace: "a", ServiceAccount: "b", User: "c"}); err == nil {
		t.Error("the empty policy allowed a claim")
	}
}

func TestParseRefuses(t *testing.T) {
	cases := map[string]string{
		"claims:\n  - namespace: a\n    serviceAccount: [x]\n    users: [u]\n":                  "line 3: field serviceAccount not found",
		"claims:\n  - namespace: a\n    serviceAccounts: []\n    users: [u]\n":                  "line 2: claims[0]: serviceAccounts: want at least one name",
		"claims:\n  - namespace: a\n    serviceAccounts: [x]\n":                                 "users: want at least one name",
		"claims:\n  - serviceAccounts: [x]\n    users: [u]\n":                                   "namespace: name \"\"",
		"claims:\n  - namespace: a*\n    serviceAccounts: [x]\n    users: [u]\n":                "stands alone",
		"claims:\n  - namespace: a\n    serviceAccounts: [x]\n    users: [u]\n    skills: []\n": "skills: want at least one name",
		"claims:\n  - namespace: a\n    serviceAccounts: [x]\n    users: [\"a b\"]\n":           "not printable ASCII without spaces",
		"claims: {}\n":                  "line 1",
		"claims: []\n---\n":             "line 2: a second YAML document",
		"rules: []\n":                   "line 1: field rules not found",
		"claims:\n  - namespace: [a]\n": "line 2",
	}
	for text, want := range cases {
		_, err := Parse([]byte(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", text, err, want)
		}
	}
	// An alias bomb is bounded before it is decoded.
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i, prev := 0, "a"; i < 8; i++ {
		name := string(rune('b' + i))
		bomb += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	if _, err := Parse([]byte(bomb)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("alias bomb: %v", err)
	}
	if _, err := Parse(bytes.Repeat([]byte("#"), MaxFileSize+1)); err == nil {
		t.Error("a file over the size limit was read")
	}
	if p, err := Parse(nil); err != nil || len(p.Claims) != 0 {
		t.Errorf("an empty file: %v, %v; want a policy of no rules", p, err)
	}
}

func TestStoreReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	var logs bytes.Buffer
	s := Open(path, slog.New(slog.NewTextHandler(&logs, nil)))
	alice := Claim{Namespace: "agents", ServiceAccount: "runner", User: "alice"}
	if s.Policy().Allow(alice) == nil || !strings.Contains(logs.String(), "no policy file") {
		t.Fatalf("no file at start: allowed, or not logged:\n%s", logs.String())
	}
	write := func(text string) {
		t.Helper()
		tmp := filepath.Join(dir, "new")
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // as a ConfigMap's update replaces the file
			t.Fatal(err)
		}
	}
	write("claims:\n  - namespace: agents\n    serviceAccounts: [runner]\n    users: [alice]\n")
	if !s.Reload() || s.Policy().Allow(alice) != nil {
		t.Fatal("the new file was not taken")
	}
	if s.Reload() {
		t.Fatal("an unchanged file was read again as new")
	}
	write("claims:\n  - namespace: agents\n    bogus: 1\n")
	if s.Reload() || s.Policy().Allow(alice) != nil || !strings.Contains(logs.String(), "line 3") {
		t.Fatalf("a bad file replaced the good one, or was not logged with its line:\n%s", logs.String())
	}
	os.Remove(path)
	if s.Reload() || s.Policy().Allow(alice) != nil {
		t.Fatal("a removed file dropped the last good policy")
	}
	write("claims: []\n")
	if !s.Reload() || s.Policy().Allow(alice) == nil {
		t.Fatal("the file denying everything was not taken")
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(example))
	f.Add([]byte("claims:\n  - namespace: \"*\"\n    serviceAccounts: [\"*\"]\n    users: [\"*\"]\n    skills: [\"*\"]\n"))
	f.Add([]byte("claims: [{namespace: a, serviceAccounts: [b], users: [c], skills: [d]}]\n---\n"))
	f.Add([]byte("a: &a [x, x]\nb: [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			return
		}
		if len(p.Claims) > MaxRules {
			t.Fatalf("%d rules parsed, over the limit", len(p.Claims))
		}
		for i, r := range p.Claims {
			if r.check() != nil || r.Line <= 0 {
				t.Fatalf("rule %d parsed but not valid: %+v", i, r)
			}
			// A rule allows what it names, and a claim it allows is one
			// of its names.
			user := r.Users[0]
			sa := r.ServiceAccounts[0]
			c := Claim{Namespace: r.Namespace, ServiceAccount: sa, User: user, Skills: r.Skills}
			if c.Namespace == Any {
				c.Namespace = "some-namespace"
			}
			if err := p.Allow(c); err != nil {
				t.Fatalf("rule %d does not allow what it names: %v", i, err)
			}
		}
	})
}
