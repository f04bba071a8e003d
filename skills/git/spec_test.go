package git

import "testing"

func TestSpecIsRemote(t *testing.T) {
	for s, want := range map[string]bool{
		"https://example.org/r.git":       true,
		"https://example.org/r.git#v1":    true,
		"ssh://git@example.org/r":         true,
		"git@example.org:team/r.git":      true,
		"git://example.org/r":             true,
		"file:///srv/r":                   false,
		"/srv/r":                          false,
		"./r":                             false,
		"r.git":                           false,
		"https://":                        false,
		"-uhttps://x":                     false,
		"https://example.org/r\nx":        false,
		"ftp://example.org/r":             false,
		"/etc/passwd#https://example.org": false,
	} {
		if got := ParseSpec(s).IsRemote(); got != want {
			t.Errorf("ParseSpec(%q).IsRemote() = %v, want %v", s, got, want)
		}
	}
}
