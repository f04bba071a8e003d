package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/server"
	"skillfs/fs/fusetest"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// newLoggedDaemon is newTestDaemon logging into log, at debug level.
func newLoggedDaemon(t *testing.T, log *skilltest.SyncBuffer) *Daemon {
	t.Helper()
	return newDaemonWith(t, log, Options{})
}

// newDaemonWith is newLoggedDaemon with the options opts (its host name,
// mount and logger set).
func newDaemonWith(t *testing.T, log *skilltest.SyncBuffer, opts Options) *Daemon {
	t.Helper()
	fusetest.Require(t)
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	cat, err := catalog.Open(ctx, home, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	opts.HostName, opts.FsName = "tokens", testFsName
	opts.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := New(ctx, cat, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// bearerOf is the Authorization header of token.
func bearerOf(token string) http.Header { return apitest.Header("Authorization", "Bearer "+token) }

// TestSessionTokenLifecycle: a create answers its session's token once (a
// show never does); the token reads its own session and nothing else,
// over the TCP listener's handler and the socket's; a rotation kills the
// old token, a close the new one. Neither the log nor the metrics hold a
// token, a wrong one included.
func TestSessionTokenLifecycle(t *testing.T) {
	var log skilltest.SyncBuffer
	d := newLoggedDaemon(t, &log)
	ctx := context.Background()
	install(t, d, "name: pdf\ndescription: PDFs", "global")
	s, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: []string{"pdf"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: []string{"pdf"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Token, api.SessionTokenPrefix) || len(s.Token) != len(api.SessionTokenPrefix)+43 || s.Token == other.Token {
		t.Fatalf("tokens %q and %q: want %s and 32 random bytes in base64url, each its own", s.Token, other.Token, api.SessionTokenPrefix)
	}
	if shown, err := d.SessionInfo(ctx, s.ID); err != nil || shown.Token != "" {
		t.Fatalf("a show answers the token: %+v %v", shown, err)
	}
	tcp := apitest.NewChecked(t, d.http.Handler("listener"))
	sock := apitest.NewChecked(t, d.http.Handler(""))
	for _, c := range []*apitest.Checked{tcp, sock} {
		if code, _, body := c.Send("GET", "/v1/sessions/"+s.ID+"/prompt", bearerOf(s.Token), nil); code != http.StatusOK || !bytes.Contains(body, []byte("pdf")) {
			t.Errorf("its prompt with its token: %d %s", code, body)
		}
		if code, _, body := c.Send("GET", "/v1/sessions/"+other.ID+"/prompt", bearerOf(s.Token), nil); code != http.StatusNotFound {
			t.Errorf("another session's prompt: %d %s", code, body)
		}
		if code, _, body := c.Send("GET", "/v1/skills", bearerOf(s.Token), nil); code != http.StatusNotFound {
			t.Errorf("the catalog: %d %s", code, body)
		}
	}
	wrong := api.SessionTokenPrefix + "wrongwrongwrong"
	if code, _, _ := tcp.Send("GET", "/v1/sessions/"+s.ID, bearerOf(wrong), nil); code != http.StatusUnauthorized || !tcp.Closed {
		t.Errorf("a wrong token: %d (closed %v)", code, tcp.Closed)
	}

	code, _, body := tcp.Send("POST", "/v1/sessions/"+s.ID+"/token", bearerOf("listener"), nil)
	var rotated api.SessionToken
	if err := json.Unmarshal(body, &rotated); err != nil || code != http.StatusOK || rotated.Session != s.ID || rotated.Token == s.Token ||
		!strings.HasPrefix(rotated.Token, api.SessionTokenPrefix) {
		t.Fatalf("rotate: %d %s", code, body)
	}
	if code, _, _ := tcp.Send("POST", "/v1/sessions/"+s.ID+"/token", bearerOf(rotated.Token), nil); code != http.StatusNotFound {
		t.Errorf("a session rotates its own token: %d, want 404 (not its to call)", code)
	}
	if code, _, _ := tcp.Send("GET", "/v1/sessions/"+s.ID, bearerOf(s.Token), nil); code != http.StatusUnauthorized {
		t.Errorf("the token before the rotation: %d", code)
	}
	if code, _, body := tcp.Send("GET", "/v1/sessions/"+s.ID+"/activations", bearerOf(rotated.Token), nil); code != http.StatusOK {
		t.Errorf("the rotated token: %d %s", code, body)
	}
	if err := d.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := tcp.Send("GET", "/v1/sessions/"+s.ID, bearerOf(rotated.Token), nil); code != http.StatusUnauthorized {
		t.Errorf("the token of a closed session: %d", code)
	}
	if _, err := d.RotateSessionToken(ctx, s.ID); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("rotate the token of a closed session: %v", err)
	}

	_, _, metrics := tcp.Send("GET", "/metrics", bearerOf("listener"), nil)
	for _, tok := range []string{s.Token, other.Token, rotated.Token, wrong} {
		if strings.Contains(log.String(), tok) || bytes.Contains(metrics, []byte(tok)) {
			t.Errorf("the log or the metrics hold the token %s", tok)
		}
	}
	if !strings.Contains(log.String(), "session token rotated") {
		t.Errorf("the rotation was not logged:\n%s", log.String())
	}
}

// TestSessionTokenDiesWithAMove: a session moved to another host leaves
// its token dead on both; the host serving it now makes it a new one, the
// one it left may not.
func TestSessionTokenDiesWithAMove(t *testing.T) {
	a, b := newFleet(t)
	ctx := context.Background()
	s, err := a.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.Credential(ctx, s.Token); err != nil || p.Session != s.ID || p.Role != server.RoleSession {
		t.Fatalf("the token on its host: %+v %v", p, err)
	}
	if _, err := b.Move(ctx, s.ID, true); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Daemon{a, b} {
		if _, err := d.Credential(ctx, s.Token); !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("the token after a move: %v", err)
		}
	}
	if _, err := a.RotateSessionToken(ctx, s.ID); !errors.Is(err, skills.ErrElsewhere) {
		t.Errorf("the host it left rotates its token: %v", err)
	}
	tok, err := b.RotateSessionToken(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := b.Credential(ctx, tok.Token); err != nil || p.Session != s.ID {
		t.Errorf("the token its new host made: %+v %v", p, err)
	}
}

// TestPlatformTokens: the operator makes named tokens of role operator or
// reader; a reader reads sessions and the catalog's listing but changes
// nothing and makes no token; a revoked token fails at its next request;
// the list never holds a token.
func TestPlatformTokens(t *testing.T) {
	var log skilltest.SyncBuffer
	d := newLoggedDaemon(t, &log)
	ctx := context.Background()
	tcp := apitest.NewChecked(t, d.http.Handler("listener"))
	op := bearerOf("listener")
	create := func(hdr http.Header, req api.TokenRequest) (int, api.TokenCreated, []byte) {
		t.Helper()
		b, _ := json.Marshal(req)
		hdr = hdr.Clone()
		hdr.Set("Content-Type", "application/json")
		code, _, body := tcp.Send("POST", "/v1/tokens", hdr, b)
		var got api.TokenCreated
		json.Unmarshal(body, &got)
		return code, got, body
	}
	code, reader, body := create(op, api.TokenRequest{Name: "dash", Role: "reader"})
	if code != http.StatusOK || !strings.HasPrefix(reader.Token, api.PlatformTokenPrefix) || reader.ExpiresAt != nil {
		t.Fatalf("create a reader token: %d %s", code, body)
	}
	code, admin, body := create(op, api.TokenRequest{Name: "ci.bot", Role: "operator", Expires: "24h"})
	if code != http.StatusOK || admin.ExpiresAt == nil || admin.ExpiresAt.Before(time.Now().Add(23*time.Hour)) {
		t.Fatalf("create an operator token for a day: %d %s", code, body)
	}
	for _, bad := range []api.TokenRequest{
		{Name: "dash", Role: "reader"}, // taken
		{Name: "x", Role: "admin"},     // no such role
		{Name: "", Role: "reader"},     // no name
		{Name: "-x", Role: "reader"},   // not a name
		{Name: "a/b", Role: "reader"},  // not a name
		{Name: "x", Role: "reader", Expires: "-1h"},
		{Name: "x", Role: "reader", Expires: "2001-01-01T00:00:00Z"},
		{Name: "x", Role: "reader", Expires: "soon"},
	} {
		if code, _, body := create(op, bad); code != http.StatusBadRequest && code != http.StatusConflict {
			t.Errorf("create %+v: %d %s, want 400 or 409", bad, code, body)
		}
	}

	rd := bearerOf(reader.Token)
	if code, _, body := tcp.Send("GET", "/v1/sessions", rd, nil); code != http.StatusOK {
		t.Errorf("a reader lists sessions: %d %s", code, body)
	}
	if code, _, body := tcp.Send("GET", "/v1/skills", rd, nil); code != http.StatusOK {
		t.Errorf("a reader lists the catalog: %d %s", code, body)
	}
	if code, _, _ := create(rd, api.TokenRequest{Name: "mine", Role: "operator"}); code != http.StatusForbidden {
		t.Errorf("a reader makes an operator token: %d, want 403", code)
	}
	if code, _, _ := tcp.Send("POST", "/v1/sessions", apitest.JSONHeader("Authorization", "Bearer "+reader.Token), []byte(`{"user":"operator","skills":[]}`)); code != http.StatusForbidden {
		t.Errorf("a reader opens a session: %d, want 403", code)
	}
	if code, _, body := tcp.Send("GET", "/v1/whoami", bearerOf(admin.Token), nil); code != http.StatusOK || !bytes.Contains(body, []byte(`"ci.bot"`)) {
		t.Errorf("whoami with the operator token: %d %s", code, body)
	}

	code, _, body = tcp.Send("GET", "/v1/tokens", op, nil)
	var list []api.TokenInfo
	if err := json.Unmarshal(body, &list); err != nil || code != http.StatusOK || len(list) != 2 || list[0].Name != "ci.bot" || list[1].Name != "dash" {
		t.Fatalf("list: %d %s", code, body)
	}
	if code, _, _ := tcp.Send("DELETE", "/v1/tokens/dash", op, nil); code != http.StatusOK {
		t.Fatalf("revoke: %d", code)
	}
	if code, _, _ := tcp.Send("GET", "/v1/sessions", rd, nil); code != http.StatusUnauthorized {
		t.Errorf("a revoked token: %d, want 401", code)
	}
	if code, _, _ := tcp.Send("DELETE", "/v1/tokens/nope", op, nil); code != http.StatusNotFound {
		t.Errorf("revoke an unknown token: %d", code)
	}
	_, _, body = tcp.Send("GET", "/v1/tokens", op, nil)
	if !bytes.Contains(body, []byte(`"revoked": true`)) {
		t.Errorf("the list after a revocation: %s", body)
	}
	_, _, metrics := tcp.Send("GET", "/metrics", op, nil)
	for _, tok := range []string{reader.Token, admin.Token} {
		if bytes.Contains(body, []byte(tok)) || strings.Contains(log.String(), tok) || bytes.Contains(metrics, []byte(tok)) {
			t.Errorf("the list, the log or the metrics hold the token %s", tok)
		}
	}
	if _, err := d.Credential(ctx, admin.Token); err != nil {
		t.Errorf("the operator token: %v", err)
	}
}

// TestParseExpiry: a duration from now, a time to come, or never.
func TestParseExpiry(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"24h":                  now.Add(24 * time.Hour),
		"90m":                  now.Add(90 * time.Minute),
		"2030-01-03T00:00:00Z": time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC),
	} {
		if got, err := parseExpiry(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseExpiry(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0s", "-1h", "2030-01-02T03:04:05Z", "2029-01-01T00:00:00Z", "tomorrow", "24", "9223372036854775807ns9223372036854775807ns"} {
		if _, err := parseExpiry(in, now); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("parseExpiry(%q): %v, want invalid", in, err)
		}
	}
}

// FuzzParseExpiry: any text is a time after now, never, or invalid.
func FuzzParseExpiry(f *testing.F) {
	for _, s := range []string{"", "24h", "-1h", "2030-01-03T00:00:00Z", "1e9h", "x"} {
		f.Add(s)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		at, err := parseExpiry(s, now)
		switch {
		case err != nil && !errors.Is(err, skills.ErrInvalid):
			t.Fatalf("%q: %v is not invalid input", s, err)
		case err == nil && s == "" && !at.IsZero():
			t.Fatalf("%q: %v, want never", s, at)
		case err == nil && s != "" && !at.After(now):
			t.Fatalf("%q: %v is not after now", s, at)
		}
	})
}

// TestTokenNames: names are letters, digits, '.', '_' and '-', beginning
// with a letter or digit, at most MaxTokenName.
func TestTokenNames(t *testing.T) {
	for _, ok := range []string{"a", "dash", "ci.bot", "A_1-2", strings.Repeat("x", MaxTokenName)} {
		if err := checkTokenName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".x", "_x", "-x", "a b", "a/b", "é", strings.Repeat("x", MaxTokenName+1), "a\x00"} {
		if err := checkTokenName(bad); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("%q: %v, want invalid", bad, err)
		}
	}
}

// BenchmarkCredentials measures what proving a credential costs a request,
// in one run: the same read (a session's activations) through the socket's
// handler without a token (the operator: nothing to look up), with the
// session's own token and with a platform token of role reader (each
// looked up in the index at every request, so that a close, a revocation
// or an expiry holds at the next one). ratio is each against the socket.
func BenchmarkCredentials(b *testing.B) {
	d := newTestDaemon(b)
	ctx := context.Background()
	install(b, d, "name: pdf\ndescription: PDFs", skills.ScopeGlobal)
	s, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: []string{"pdf"}})
	if err != nil {
		b.Fatal(err)
	}
	reader, err := d.CreateToken(ctx, api.TokenRequest{Name: "dashboard", Role: "reader"})
	if err != nil {
		b.Fatal(err)
	}
	h := d.http.Handler("")
	path := "/v1/sessions/" + s.ID + "/activations"
	perOp := map[string]float64{}
	for _, c := range []struct{ name, token string }{{"socket", ""}, {"session-token", s.Token}, {"reader-token", reader.Token}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				r := httptest.NewRequest("GET", path, nil)
				if c.token != "" {
					r.Header.Set("Authorization", "Bearer "+c.token)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", c.name, w.Code, w.Body)
				}
			}
			perOp[c.name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if base := perOp["socket"]; base > 0 {
				b.ReportMetric(perOp[c.name]/base, "ratio")
			}
		})
	}
}
