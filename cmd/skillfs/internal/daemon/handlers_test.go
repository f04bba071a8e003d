package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/server"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// The API's handlers, tested in-process over a real HTTP server with every
// request and answer checked against the OpenAPI document.

// TestBearerToken: on the TCP listener's handler, a request passes only
// with "Authorization: Bearer TOKEN", the scheme in any case and one or
// more spaces before the token (RFC 7235); every other gets 401 in the
// error shape, before any routing, and its connection is closed. (White
// space around a header value is not part of it in HTTP.)
func TestBearerToken(t *testing.T) {
	d := newTestDaemon(t)
	client := apitest.NewChecked(t, d.http.Handler("s3cret"))
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Bearer s3cretx", "Bearer s3cre", "Bearers3cret",
		"Basic czNjcmV0", "s3cret", "Bearer\ts3cret", "Bearer s3cret s3cret", "Bearer S3CRET", "Bear s3cret", "Bearer: s3cret"} {
		for _, path := range []string{"/v1/health", "/v1/no-such-route", "/v1/openapi.json"} {
			code, _, body := client.Send("GET", path, apitest.Header("Authorization", auth), nil)
			if code != http.StatusUnauthorized || apitest.ErrorCode(body) != "permission" || !client.Closed {
				t.Errorf("GET %s with Authorization %q: %d %s (connection closed: %v); want 401 permission, connection closed", path, auth, code, body, client.Closed)
			}
		}
	}
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR s3cret", "Bearer  s3cret"} {
		if code, _, body := client.Send("GET", "/v1/health", apitest.Header("Authorization", auth), nil); code != http.StatusOK {
			t.Errorf("GET /v1/health with Authorization %q: %d %s, want 200", auth, code, body)
		}
	}
	ok := apitest.Header("Authorization", "Bearer s3cret")
	if code, _, body := client.Send("GET", "/v1/no-such-route", ok, nil); code != http.StatusNotFound || apitest.ErrorCode(body) != "not_found" {
		t.Errorf("an unknown route with the token: %d %s, want 404 not_found", code, body)
	}
	// The socket's handler asks for no token.
	open := apitest.NewChecked(t, d.http.Handler(""))
	if code, _, body := open.Send("GET", "/v1/health", nil, nil); code != http.StatusOK {
		t.Errorf("GET /v1/health on the socket's handler: %d %s", code, body)
	}
}

// TestTCPListenerNeedsAToken: the daemon refuses a TCP listener without a
// token (server's TestTCPListenerIsLoopbackOnly: and on any address but
// loopback).
func TestTCPListenerNeedsAToken(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	cat, err := catalog.Open(ctx, home, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if err := Run(ctx, cat, Options{TCPAddr: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "needs a token") {
		t.Errorf("Run with a TCP listener and no token: %v", err)
	}
}

// TestActAs: catalog calls act for the user X-Skillfs-As names, the
// operator without it, and any user the header names (whoever reaches the
// API is trusted to say whom it acts for); an unregistered user is a 404.
// Session calls act for the session's own user and ignore the header.
func TestActAs(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	for _, uid := range []string{"alice", "bob"} {
		if err := d.cat.PutUser(ctx, "", skills.User{UID: uid, Role: skills.RoleUser}, true); err != nil {
			t.Fatal(err)
		}
	}
	install(t, d, "name: pub\ndescription: for everyone", skills.ScopeGlobal)
	install(t, d, "name: secret\ndescription: the operator's", "")
	client := apitest.NewChecked(t, d.http.Handler(""))
	list := func(as string) (int, []string) {
		t.Helper()
		code, _, body := client.Send("GET", "/v1/skills", apitest.Header(api.ActAsHeader, as), nil)
		var out []catalog.Summary
		json.Unmarshal(body, &out)
		var slugs []string
		for _, s := range out {
			slugs = append(slugs, s.Slug)
		}
		return code, slugs
	}
	if code, got := list(""); code != http.StatusOK || !slices.Equal(got, []string{"pub", "secret"}) {
		t.Errorf("the operator lists %d %v", code, got)
	}
	if code, got := list("alice"); code != http.StatusOK || !slices.Equal(got, []string{"pub"}) {
		t.Errorf("alice lists %d %v", code, got)
	}
	if code, _, body := client.Send("GET", "/v1/skills", apitest.Header(api.ActAsHeader, "mallory"), nil); code != http.StatusNotFound || apitest.ErrorCode(body) != "not_found" {
		t.Errorf("an unregistered user lists: %d %s", code, body)
	}
	if code, _, body := client.Send("GET", "/v1/skills/secret", apitest.Header(api.ActAsHeader, "alice"), nil); code != http.StatusNotFound {
		t.Errorf("alice shows the operator's private skill: %d %s", code, body)
	}
	if code, _, body := client.Send("POST", "/v1/skills/pub/disable", apitest.Header(api.ActAsHeader, "alice"), nil); code != http.StatusForbidden || apitest.ErrorCode(body) != "permission" {
		t.Errorf("alice disables the operator's skill: %d %s, want 403", code, body)
	}
	// Alice uploads a skill of her own: it is hers, not bob's.
	code, _, body := client.Send("POST", "/v1/drafts?name=notes.md", apitest.Header(api.ActAsHeader, "alice", "Content-Type", "text/markdown"),
		[]byte("---\nname: notes\ndescription: alice's\n---\nbody\n"))
	var draft catalog.Draft
	if code != http.StatusOK || json.Unmarshal(body, &draft) != nil {
		t.Fatalf("alice uploads a skill: %d %s", code, body)
	}
	if draft.Creator != "alice" {
		t.Errorf("alice's draft is %q's", draft.Creator)
	}
	if code, _, body := client.Send("POST", "/v1/drafts/"+draft.ID+"/confirm", apitest.JSONHeader(api.ActAsHeader, "bob"), []byte(`{}`)); code != http.StatusNotFound {
		t.Errorf("bob confirms alice's draft: %d %s, want 404", code, body)
	}
	if code, _, body := client.Send("POST", "/v1/drafts/"+draft.ID+"/confirm", apitest.JSONHeader(api.ActAsHeader, "alice"), []byte(`{}`)); code != http.StatusOK {
		t.Fatalf("alice confirms her draft: %d %s", code, body)
	}
	if _, got := list("alice"); !slices.Equal(got, []string{"notes", "pub"}) {
		t.Errorf("alice lists %v after installing notes", got)
	}
	if _, got := list("bob"); !slices.Equal(got, []string{"pub"}) {
		t.Errorf("bob lists %v", got)
	}
	if code, _, body := client.Send("PUT", "/v1/skills/notes/share", apitest.JSONHeader(api.ActAsHeader, "bob"), []byte(`{"read":"global"}`)); code != http.StatusNotFound {
		t.Errorf("bob shares alice's private skill: %d %s, want 404", code, body)
	}
	if code, _, body := client.Send("PUT", "/v1/skills/notes/share", apitest.JSONHeader(api.ActAsHeader, "alice"), []byte(`{"read":"global"}`)); code != http.StatusForbidden {
		t.Errorf("alice shares her skill with everyone: %d %s, want 403 (users share only with themselves)", code, body)
	}
	// A session acts for its own user, whatever the header says.
	code, _, body = client.Send("POST", "/v1/sessions", apitest.JSONHeader(api.ActAsHeader, "mallory"), []byte(`{"user":"alice","all":true}`))
	var info api.SessionInfo
	if code != http.StatusOK || json.Unmarshal(body, &info) != nil {
		t.Fatalf("create a session with an unregistered X-Skillfs-As: %d %s", code, body)
	}
	if info.User != "alice" || !slices.Equal(info.Readable, []string{"notes", "pub"}) {
		t.Errorf("alice's session: user %q, readable %v", info.User, info.Readable)
	}
	if code, _, body := client.Send("GET", "/v1/sessions/"+info.ID, apitest.Header(api.ActAsHeader, "bob"), nil); code != http.StatusOK {
		t.Errorf("get alice's session with X-Skillfs-As bob: %d %s", code, body)
	}
}

// TestErrorStatuses: every error status the API answers, each in the error
// shape with its code.
func TestErrorStatuses(t *testing.T) {
	ctx := context.Background()
	two := t.TempDir()
	for _, name := range []string{"one", "two"} {
		skilltest.WriteDir(t, filepath.Join(two, name), fstest.MapFS{
			"SKILL.md": skilltest.File(skilltest.Manifest("name: "+name+"\ndescription: one of two", "")),
		})
	}
	d := newTestDaemonRoots(t, two)
	if err := d.cat.PutUser(ctx, "", skills.User{UID: "alice", Role: skills.RoleUser}, true); err != nil {
		t.Fatal(err)
	}
	install(t, d, "name: pub\ndescription: for everyone", skills.ScopeGlobal)
	drafts, _ := json.Marshal(map[string]string{"source": two})
	// A daemon whose mount root is no FUSE mount: not ready.
	detached := server.New(server.Config{Health: &Daemon{cat: d.cat, db: d.db, fs: d.fs, events: d.events, log: d.log, mountRoot: t.TempDir()}})
	for _, tc := range []struct {
		name, method, path string
		h                  http.Handler
		header             http.Header
		body               string
		status             int
		code               string
	}{
		{"malformed body", "POST", "/v1/sessions", nil, apitest.JSONHeader(), `{"user":`, 400, "invalid"},
		{"unknown field", "POST", "/v1/sessions", nil, apitest.JSONHeader(), `{"usr":"alice"}`, 400, "invalid"},
		{"two values", "POST", "/v1/sessions", nil, apitest.JSONHeader(), `{}{}`, 400, "invalid"},
		{"skills and all", "POST", "/v1/sessions", nil, apitest.JSONHeader(), `{"skills":["pub"],"all":true}`, 400, "invalid"},
		{"bad limit", "GET", "/v1/sessions?limit=0", nil, nil, "", 400, "invalid"},
		{"bad pid", "DELETE", "/v1/sessions/x/mounts?target=/t&pid=x", nil, nil, "", 400, "invalid"},
		{"bad prompt format", "GET", "/v1/sessions/SESSION/prompt?format=html", nil, nil, "", 400, "invalid"},
		{"bad turn format", "POST", "/v1/sessions/SESSION/turn", nil, apitest.JSONHeader(), `{"format":"html"}`, 400, "invalid"},
		{"a globs path too long", "POST", "/v1/sessions/SESSION/globs", nil, apitest.JSONHeader(), `{"paths":["` + strings.Repeat("a", api.MaxGlobPathLen+1) + `"]}`, 400, "invalid"},
		{"not a skill:// URL", "GET", "/v1/sessions/SESSION/resolve?uri=http://x", nil, nil, "", 400, "invalid"},
		{"a path out of the skill", "GET", "/v1/sessions/SESSION/resolve?uri=skill://pub/../../etc/passwd", nil, nil, "", 400, "invalid"},
		{"bad share scope", "PUT", "/v1/skills/pub/share", nil, apitest.JSONHeader(), `{"read":"galaxy"}`, 400, "invalid"},
		{"no token", "GET", "/v1/health", d.http.Handler("t"), nil, "", 401, "permission"},
		{"not the skill's manager", "POST", "/v1/skills/pub/disable", nil, apitest.Header(api.ActAsHeader, "alice"), "", 403, "permission"},
		{"a local path, not an admin", "POST", "/v1/drafts", nil, apitest.JSONHeader(api.ActAsHeader, "alice"), string(drafts), 403, "permission"},
		{"no such session", "GET", "/v1/sessions/nope", nil, nil, "", 404, "not_found"},
		{"no such skill", "GET", "/v1/skills/nope", nil, nil, "", 404, "not_found"},
		{"no such draft", "DELETE", "/v1/drafts/0123456789abcdef0123456789abcdef", nil, nil, "", 404, "not_found"},
		{"no such user", "POST", "/v1/sessions", nil, apitest.JSONHeader(), `{"user":"nobody"}`, 404, "not_found"},
		{"no events of no session", "GET", "/v1/sessions/nope/events", nil, nil, "", 404, "not_found"},
		{"no turn of no session", "POST", "/v1/sessions/nope/turn", nil, apitest.JSONHeader(), `{"message":"$pub"}`, 404, "not_found"},
		{"an unreadable skill:// URL in the SEP-2640 form", "GET", "/v1/sessions/SESSION/resolve?uri=skill://nope/SKILL.md", nil, nil, "", 404, "not_found"},
		{"no such file", "GET", "/v1/sessions/SESSION/resolve?uri=skill://pub/none.md", nil, nil, "", 404, "not_found"},
		{"no such route", "GET", "/v1/nope", nil, nil, "", 404, "not_found"},
		{"no such version", "GET", "/v2/health", nil, nil, "", 404, "not_found"},
		{"wrong method", "DELETE", "/v1/health", nil, nil, "", 405, "invalid"},
		{"wrong method on a catalog route", "PATCH", "/v1/skills/pub", nil, nil, "", 405, "invalid"},
		{"a source of several skills, none chosen", "POST", "/v1/drafts", nil, apitest.JSONHeader(), string(drafts), 409, "conflict"},
		{"not ready", "GET", "/v1/ready", detached.Handler(""), nil, "", 503, "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			if h == nil {
				h = d.http.Handler("")
			}
			path := tc.path
			if strings.Contains(path, "SESSION") {
				info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"pub"}})
				if err != nil {
					t.Fatal(err)
				}
				path = strings.Replace(path, "SESSION", info.ID, 1)
			}
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			code, h2, got := apitest.NewChecked(t, h).Send(tc.method, path, tc.header, body)
			if code != tc.status || apitest.ErrorCode(got) != tc.code {
				t.Fatalf("%s %s: %d %s; want %d %s", tc.method, path, code, got, tc.status, tc.code)
			}
			if code == http.StatusMethodNotAllowed && h2.Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
		})
	}
}

// TestEventStream: a subscriber gets ": subscribed", then each event of
// its session as the Event schema says, and the stream ends with the
// session's closed event; a subscriber of every session that goes away is
// unsubscribed.
func TestEventStream(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	install(t, d, "name: pub\ndescription: for everyone", skills.ScopeGlobal)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"pub"}})
	if err != nil {
		t.Fatal(err)
	}
	client := apitest.NewChecked(t, d.http.Handler(""))
	c := apitest.Document(t)
	open := func(path string) (*bufio.Reader, context.CancelFunc) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, hang)
		req, _ := http.NewRequestWithContext(sctx, "GET", client.URL+path, nil)
		resp, err := client.Client.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		client.Conform()
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			cancel()
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		br := bufio.NewReader(resp.Body)
		if line, err := br.ReadString('\n'); err != nil || line != ": subscribed\n" {
			cancel()
			t.Fatalf("GET %s: first line %q, %v", path, line, err)
		}
		return br, cancel
	}
	// next reads the next event, skipping comments, and checks its data
	// against the document.
	next := func(br *bufio.Reader) (string, api.Event) {
		t.Helper()
		var typ string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended: %v", err)
			}
			switch {
			case strings.HasPrefix(line, "event: "):
				typ = strings.TrimSpace(strings.TrimPrefix(line, "event: "))
			case strings.HasPrefix(line, "data: "):
				data := []byte(strings.TrimPrefix(line, "data: "))
				if err := c.CheckSchema("Event", "application/json", data); err != nil {
					t.Errorf("event %s: %v", data, err)
				}
				var e api.Event
				if err := json.Unmarshal(data, &e); err != nil {
					t.Fatal(err)
				}
				if string(e.Type) != typ {
					t.Errorf("event: %s carries data of type %s", typ, e.Type)
				}
				return typ, e
			}
		}
	}
	session, stopSession := open("/v1/sessions/" + info.ID + "/events")
	defer stopSession()
	all, stopAll := open("/v1/events")
	if code, _, body := client.Send("POST", "/v1/sessions/"+info.ID+"/mentions", apitest.JSONHeader(), []byte(`{"text":"use $pub now"}`)); code != http.StatusOK {
		t.Fatalf("mention: %d %s", code, body)
	}
	for name, br := range map[string]*bufio.Reader{"session": session, "all": all} {
		if typ, e := next(br); typ != "activated" || e.Session != info.ID || e.Slug != "pub" || e.At.IsZero() {
			t.Errorf("%s stream: %s %+v, want pub activated", name, typ, e)
		}
	}
	// The subscriber of every session goes away: it is unsubscribed.
	stopAll()
	deadline := time.Now().Add(hang)
	for subscribers(d) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers after one went away, want 1", subscribers(d))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, _, body := client.Send("DELETE", "/v1/sessions/"+info.ID, nil, nil); code != http.StatusOK {
		t.Fatalf("close: %d %s", code, body)
	}
	if typ, e := next(session); typ != "closed" || e.Session != info.ID {
		t.Errorf("after the close: %s %+v", typ, e)
	}
	if end, err := session.ReadString('\n'); end != "\n" || err != nil {
		t.Errorf("the closed event ends with %q, %v", end, err)
	}
	if rest, err := session.ReadString('\n'); err == nil {
		t.Errorf("the session's stream goes on after its closed event: %q", rest)
	}
}

func subscribers(d *Daemon) int { return d.events.Subscribers() }

// TestUserRoutesTellNothingOfOthers: an ordinary user deleting another user
// gets the answer a missing user gets, byte for byte but the uid, whether
// the other is an ordinary user, an admin or a superadmin.
func TestUserRoutesTellNothingOfOthers(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	for _, u := range []skills.User{{UID: "alice", Role: skills.RoleUser}, {UID: "bob", Role: skills.RoleUser},
		{UID: "adm", Role: skills.RoleAdmin}, {UID: "root", Role: skills.RoleSuperadmin}} {
		if err := d.cat.PutUser(ctx, "", u, true); err != nil {
			t.Fatal(err)
		}
	}
	client := apitest.NewChecked(t, d.http.Handler(""))
	answer := func(uid, query string) string {
		t.Helper()
		code, _, body := client.Send("DELETE", "/v1/users/"+uid+query, apitest.Header(api.ActAsHeader, "alice"), nil)
		return strconv.Itoa(code) + " " + strings.ReplaceAll(strings.TrimSpace(string(body)), `\"`+uid+`\"`, `\"UID\"`)
	}
	for _, query := range []string{"", "?force=true"} {
		missing := answer("nobody", query)
		if !strings.HasPrefix(missing, "404 ") {
			t.Fatalf("DELETE a missing user%s as alice: %s, want 404", query, missing)
		}
		for _, uid := range []string{"bob", "adm", "root", "operator"} {
			if got := answer(uid, query); got != missing {
				t.Errorf("DELETE /v1/users/%s%s as alice: %s, want what a missing user gets: %s", uid, query, got, missing)
			}
		}
	}
	for _, uid := range []string{"alice", "bob", "adm", "root"} {
		if _, err := d.db.User(ctx, uid); err != nil {
			t.Errorf("%s after the refusals: %v", uid, err)
		}
	}
	// An admin deletes bob, handing his skills to root.
	dir := skilltest.WriteDir(t, filepath.Join(t.TempDir(), "bobs"), fstest.MapFS{
		"SKILL.md": skilltest.File(skilltest.Manifest("name: bobs\ndescription: bob's", "")),
	})
	if _, err := d.cat.Import(ctx, catalog.ImportRequest{Source: dir, As: "bob"}); err != nil {
		t.Fatal(err)
	}
	code, _, body := client.Send("DELETE", "/v1/users/bob?to=root", apitest.Header(api.ActAsHeader, "adm"), nil)
	var del catalog.UserDeleted
	if code != http.StatusOK || json.Unmarshal(body, &del) != nil || del.Owner != "root" || !slices.Equal(del.Handed, []string{"bobs"}) {
		t.Fatalf("an admin deletes bob --to root: %d %s", code, body)
	}
}

// TestSessionLeftOutToldToManagers: a skill left out of a session because
// its share does not reach the session's user is said to be "not readable"
// to a caller who manages it (the operator, who imported it private to
// itself and opens sessions for others), with how to share it; to anyone
// else, the session's user included, it is missing like a slug that names
// no skill.
func TestSessionLeftOutToldToManagers(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	for _, uid := range []string{"alice", "bob"} {
		if err := d.cat.PutUser(ctx, "", skills.User{UID: uid, Role: skills.RoleUser}, true); err != nil {
			t.Fatal(err)
		}
	}
	install(t, d, "name: pub\ndescription: for everyone", skills.ScopeGlobal)
	install(t, d, "name: pdf\ndescription: the operator's own", "")
	client := apitest.NewChecked(t, d.http.Handler(""))
	for _, tc := range []struct{ as, want string }{
		{"", policy.SkipNotReadable},               // the operator manages pdf
		{"bob", policy.SkipMissing},                // bob does not know pdf
		{"alice", policy.SkipMissing},              // nor does the session's own user
		{"mallory", policy.SkipMissing},            // an unregistered caller is no one
		{catalog.Operator, policy.SkipNotReadable}, // named
	} {
		code, _, body := client.Send("POST", "/v1/sessions", apitest.JSONHeader(api.ActAsHeader, tc.as), []byte(`{"user":"alice","skills":["pdf"]}`))
		var e api.Error
		json.Unmarshal(body, &e)
		msg := e.Error
		if code != http.StatusNotFound || !strings.Contains(msg, `"pdf" (`+tc.want+`)`) ||
			strings.Contains(msg, "skill share") != (tc.want == policy.SkipNotReadable) {
			t.Errorf("as %q, alice's session of pdf alone: %d %s, want 404 saying %q", tc.as, code, body, tc.want)
		}
		code, _, body = client.Send("POST", "/v1/sessions", apitest.JSONHeader(api.ActAsHeader, tc.as), []byte(`{"user":"alice","skills":["pub","pdf"]}`))
		var info api.SessionInfo
		if code != http.StatusOK || json.Unmarshal(body, &info) != nil {
			t.Fatalf("as %q, alice's session of pub and pdf: %d %s", tc.as, code, body)
		}
		if len(info.Skipped) != 1 || info.Skipped[0].Slug != "pdf" || info.Skipped[0].Reason != tc.want {
			t.Errorf("as %q, left out %+v, want pdf (%s)", tc.as, info.Skipped, tc.want)
		}
		code, _, body = client.Send("PATCH", "/v1/sessions/"+info.ID, apitest.JSONHeader(api.ActAsHeader, tc.as), []byte(`{"skills":["pdf","pub"]}`))
		info = api.SessionInfo{}
		if code != http.StatusOK || json.Unmarshal(body, &info) != nil || len(info.Skipped) != 1 || info.Skipped[0].Reason != tc.want {
			t.Errorf("as %q, set alice's session to pdf and pub: %d %s, want pdf (%s)", tc.as, code, body, tc.want)
		}
	}
}
