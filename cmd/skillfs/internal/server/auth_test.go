package server

import (
	"strings"
	"testing"
)

// FuzzBearer: a credential read from an Authorization header is never
// empty, never begins with a space, and is what follows the scheme.
func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer x", "bearer  x", "Bearer", "Bearer ", "Basic x", "Bearer\tx", "Bearer x y", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, auth string) {
		cred, ok := bearer(auth)
		if !ok {
			if cred != "" {
				t.Fatalf("%q: refused, yet credential %q", auth, cred)
			}
			return
		}
		if cred == "" || strings.HasPrefix(cred, " ") || !strings.HasSuffix(auth, " "+cred) || !strings.EqualFold(auth[:len("Bearer ")], "Bearer ") {
			t.Fatalf("%q: credential %q", auth, cred)
		}
	})
}

// FuzzPathParam: the {id} of a path fitting a session route is its third
// segment, unescaped; any path is an answer or "", never a panic.
func FuzzPathParam(f *testing.F) {
	for _, s := range []string{"/v1/sessions/abc/prompt", "/v1/sessions/a%2Fb", "/v1/sessions/%zz", "/", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got := pathParam("GET /v1/sessions/{id}/prompt", path, "id")
		seg := strings.Split(path, "/")
		if len(seg) < 4 && got != "" {
			t.Fatalf("%q: %q from a path without the segment", path, got)
		}
		if pathParam("GET /v1/skills", path, "id") != "" {
			t.Fatalf("%q: an {id} from a pattern without one", path)
		}
	})
}
