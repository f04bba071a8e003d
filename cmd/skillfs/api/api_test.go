package api

import "testing"

// TestNextPage reads the next page out of a Link header.
func TestNextPage(t *testing.T) {
	for link, want := range map[string]string{
		"": "",
		`</v1/sessions?after=ab&limit=2>; rel="next"`:                          "/v1/sessions?after=ab&limit=2",
		`</v1/x?p=1>; rel="prev", </v1/sessions?after=cd&limit=5>; rel="next"`: "/v1/sessions?after=cd&limit=5",
		`</v1/sessions?after=ab>; rel="prev"`:                                  "",
		`garbage`:                                                              "",
		`<http://skillfs/v1/sessions?after=ef&limit=1>; rel="next"`:            "/v1/sessions?after=ef&limit=1",
	} {
		if got := NextPage(link); got != want {
			t.Errorf("NextPage(%q) = %q, want %q", link, got, want)
		}
	}
}
