package api

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
)

// TestClientSendsItsToken: a client with a token sends it as a bearer
// token, and one without sends no Authorization header.
func TestClientSendsItsToken(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Auth", r.Header.Get("Authorization"))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	for token, want := range map[string]string{"": "", SessionTokenPrefix + "abc": "Bearer " + SessionTokenPrefix + "abc"} {
		hdr, err := (&Client{Socket: sock, Token: token}).Call(context.Background(), "GET", "/v1/whoami", nil, nil)
		if err != nil || hdr.Get("X-Auth") != want {
			t.Errorf("token %q: Authorization %q, %v; want %q", token, hdr.Get("X-Auth"), err, want)
		}
	}
}
