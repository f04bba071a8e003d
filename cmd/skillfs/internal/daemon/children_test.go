package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/server"
	"skillfs/skills"
)

// familyDaemon is a daemon serving its API over skills a, b (depending on
// c), c, d and e, all readable by everyone, with a parent session of alice
// reading a, b (with c) and d.
func familyDaemon(t *testing.T) (*Daemon, *httptest.Server, *api.SessionInfo) {
	d, srv, parent, _ := familyDaemonA(t)
	return d, srv, parent
}

// familyDaemonA is familyDaemon, and the folder skill a is imported from.
func familyDaemonA(t *testing.T) (*Daemon, *httptest.Server, *api.SessionInfo, string) {
	t.Helper()
	ctx := context.Background()
	d := newTestDaemon(t)
	if err := d.cat.PutUser(ctx, "", skills.User{UID: "alice", Role: skills.RoleUser}, true); err != nil {
		t.Fatal(err)
	}
	if err := d.cat.PutUser(ctx, "", skills.User{UID: "bob", Role: skills.RoleUser}, true); err != nil {
		t.Fatal(err)
	}
	install(t, d, "name: c\ndescription: c", skills.ScopeGlobal)
	srcA := filepath.Join(t.TempDir(), "a")
	installFrom(t, d, srcA, "---\nname: a\ndescription: a\n---\nbody\n")
	install(t, d, "name: b\ndescription: b\nskill_dependencies: [c]", skills.ScopeGlobal)
	install(t, d, "name: d\ndescription: d", skills.ScopeGlobal)
	install(t, d, "name: e\ndescription: e", skills.ScopeGlobal)
	srv := httptest.NewServer(d.http.Handler(""))
	t.Cleanup(srv.Close)
	parent, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"a", "b", "d"}})
	if err != nil {
		t.Fatal(err)
	}
	return d, srv, parent, srcA
}

// readIn reads rel in session id's mount.
func readIn(d *Daemon, id, rel string) error {
	_, err := os.ReadFile(filepath.Join(d.mountRoot, id, rel))
	return err
}

// TestChildReadsASubsetOfItsParent: a sub-agent session reads what it asks
// for (with dependencies) of its parent's set through the mount, and
// nothing else; its activations are its own and its events are in its
// parent's stream with its id; bad requests open nothing.
func TestChildReadsASubsetOfItsParent(t *testing.T) {
	ctx := context.Background()
	d, srv, parent := familyDaemon(t)
	resp, _ := openEvents(t, srv.URL, "/v1/sessions/"+parent.ID+"/events", "")
	defer resp.Body.Close()

	child, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID, Skills: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if child.User != "alice" || child.Parent != parent.ID || !slices.Equal(child.Readable, []string{"b", "c"}) {
		t.Fatalf("child %+v, want alice's, of the parent, reading b and c", child)
	}
	if err := readIn(d, child.ID, "b/SKILL.md"); err != nil {
		t.Fatalf("the child reads b: %v", err)
	}
	for _, slug := range []string{"a", "d", "e"} {
		if err := readIn(d, child.ID, slug+"/SKILL.md"); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("the child reads %s: %v, want ENOENT", slug, err)
		}
	}
	if ok, err := d.IsChild(ctx, child.ID); err != nil || !ok {
		t.Errorf("IsChild(child) = %v, %v", ok, err)
	}
	if ok, err := d.IsChild(ctx, parent.ID); err != nil || ok {
		t.Errorf("IsChild(parent) = %v, %v", ok, err)
	}
	all, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID})
	if err != nil || !slices.Equal(all.Readable, parent.Readable) {
		t.Fatalf("a child asking for nothing: %+v, %v; want the parent's set %v", all, err, parent.Readable)
	}

	act, err := d.Activations(ctx, child.ID)
	if err != nil || len(act.Activated) != 1 || act.Activated[0].Slug != "b" {
		t.Errorf("the child's activations: %+v, %v", act, err)
	}
	if act, err := d.Activations(ctx, parent.ID); err != nil || len(act.Activated) != 0 {
		t.Errorf("the parent's activations: %+v, %v; want none (the child's are its own)", act, err)
	}
	readSKILL(t, d, parent.ID, "a")
	if err := d.CloseSession(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	var got []string
	apitest.ParseSSE(t, resp.Body, func(e apitest.SSE) bool {
		got = append(got, fmt.Sprintf("%s %s %s %s", e.Data.Type, e.Data.Session, e.Data.Parent, e.Data.Slug))
		return true
	})
	want := []string{
		"activated " + child.ID + " " + parent.ID + " b",
		"activated " + parent.ID + "  a",
		"closed " + child.ID + " " + parent.ID + " ",
		"closed " + all.ID + " " + parent.ID + " ",
		"closed " + parent.ID + "  ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the parent's stream:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The replay too has them, resumed from before the first.
	resp2, _ := openEvents(t, srv.URL, "/v1/sessions/"+parent.ID+"/events?after=0", "")
	defer resp2.Body.Close()
	var replay []string
	apitest.ParseSSE(t, resp2.Body, func(e apitest.SSE) bool {
		if e.Data.Type == skills.EventActivated || e.Data.Type == skills.EventClosed {
			replay = append(replay, fmt.Sprintf("%s %s %s %s", e.Data.Type, e.Data.Session, e.Data.Parent, e.Data.Slug))
		}
		return true
	})
	if !slices.Equal(replay, want) {
		t.Errorf("the parent's replay:\n%s\nwant\n%s", strings.Join(replay, "\n"), strings.Join(want, "\n"))
	}
	for _, id := range []string{child.ID, all.ID} {
		if closed, err := d.SessionClosed(ctx, id); err != nil || !closed {
			t.Errorf("child %s after its parent closed: closed %v, %v", id, closed, err)
		}
		if _, err := os.Stat(filepath.Join(d.mountRoot, id)); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("child %s still served: %v", id, err)
		}
	}
}

// TestChildRequestsRefused: a skill outside the parent's set (existing or
// not, in the same words), a version, another user, a grandchild, a closed
// parent: refused, nothing opened.
func TestChildRequestsRefused(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	child, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID, Skills: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := d.db.OpenSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  api.CreateRequest
		want error
		says string
	}{
		{"outside the parent", api.CreateRequest{Parent: parent.ID, Skills: []string{"a", "e"}}, skills.ErrInvalid,
			`skill "e": not in the parent session's readable set`},
		{"no such skill", api.CreateRequest{Parent: parent.ID, Skills: []string{"nope"}}, skills.ErrInvalid,
			`skill "nope": not in the parent session's readable set`},
		{"a version", api.CreateRequest{Parent: parent.ID, Skills: []string{"a@abcd"}}, skills.ErrInvalid, "its parent's versions"},
		{"another user", api.CreateRequest{Parent: parent.ID, User: "bob"}, skills.ErrInvalid, `parent's user "alice"`},
		{"a grandchild", api.CreateRequest{Parent: child.ID}, skills.ErrPermission, "may not open sub-agent sessions"},
		{"no parent", api.CreateRequest{Parent: "0123"}, skills.ErrNotFound, "0123"},
		{"preload outside", api.CreateRequest{Parent: parent.ID, Skills: []string{"a"}, Preload: []string{"d"}}, skills.ErrInvalid, "preload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.CreateSession(ctx, tc.req)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("CreateSession = %v, want %v saying %q", err, tc.want, tc.says)
			}
		})
	}
	if after, err := d.db.OpenSessions(ctx); err != nil || len(after) != len(before) {
		t.Errorf("open sessions after the refused creates: %d, want %d (%v)", len(after), len(before), err)
	}
	// Set: the same rule.
	if _, err := d.SetSkills(ctx, child.ID, api.SetRequest{Skills: []string{"e"}}); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("set a child's skills outside its parent: %v", err)
	}
	if info, err := d.SetSkills(ctx, child.ID, api.SetRequest{Skills: []string{"b"}}); err != nil || !slices.Equal(info.Readable, []string{"b", "c"}) {
		t.Errorf("set a child's skills within its parent: %+v, %v", info, err)
	}
	if _, err := d.Move(ctx, child.ID, true); !errors.Is(err, skills.ErrInvalid) || !strings.Contains(err.Error(), "moves with it") {
		t.Errorf("move a child alone: %v", err)
	}
}

// TestChildFollowsItsParent: a revocation reaches the child's mount; a set
// of the parent's skills takes what the parent lost from the child; a
// refresh moves a child to its parent's new versions; a deleted user's
// sessions close, the children with their parents.
func TestChildFollowsItsParent(t *testing.T) {
	ctx := context.Background()
	d, _, parent, srcA := familyDaemonA(t)
	child, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(filepath.Join(d.mountRoot, child.ID, "d", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// Revocation: d disabled.
	if _, err := d.cat.SetEnabled(ctx, "", "d", false); err != nil {
		t.Fatal(err)
	}
	if err := d.Reevaluate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := readIn(d, child.ID, "d/SKILL.md"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("the child reads a revoked skill: %v", err)
	}
	if _, err := held.ReadAt(make([]byte, 4), 0); err == nil {
		t.Error("a handle of the child on a revoked skill still reads")
	}
	// A set of the parent.
	if _, err := d.SetSkills(ctx, parent.ID, api.SetRequest{Skills: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	info, err := d.SessionInfo(ctx, child.ID)
	if err != nil || !slices.Equal(info.Readable, []string{"a"}) {
		t.Fatalf("the child after its parent's set to a: %+v, %v", info, err)
	}
	if err := readIn(d, child.ID, "b/SKILL.md"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("the child reads b its parent lost: %v", err)
	}
	// A refresh: a new version of a reaches the child with its parent.
	installFrom(t, d, srcA, "---\nname: a\ndescription: a, version two\n---\nbody\n")
	if _, err := d.Refresh(ctx, child.ID); err != nil {
		t.Fatal(err)
	}
	read := func(id string) string {
		b, _ := os.ReadFile(filepath.Join(d.mountRoot, id, "a", "SKILL.md"))
		return string(b)
	}
	if strings.Contains(read(child.ID), "version two") {
		t.Error("the child's own refresh went past its parent's version")
	}
	if _, err := d.Refresh(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(read(parent.ID), "version two") || !strings.Contains(read(child.ID), "version two") {
		t.Errorf("after the parent's refresh: parent reads %q, child %q; want version two in both", read(parent.ID), read(child.ID))
	}
	p, _ := d.db.Session(ctx, parent.ID)
	c, _ := d.db.Session(ctx, child.ID)
	if !slices.Equal(p.Pins, c.Pins) {
		t.Errorf("pins: parent %v, child %v", p.Pins, c.Pins)
	}
	page, err := d.db.Events(ctx, child.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var evs []string
	for _, e := range page.Events {
		if e.Type != skills.EventActivated { // recorded when the recorder flushes
			evs = append(evs, string(e.Type)+" "+e.Slug)
		}
	}
	want := []string{"revoked d", "revoked b", "revoked c", "refreshed ", "refreshed "}
	if !slices.Equal(evs, want) {
		t.Errorf("the child's events %q, want %q", evs, want)
	}
	// The user deleted: both close.
	if _, err := d.DeleteUser(ctx, "", "alice", "", true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{parent.ID, child.ID} {
		if closed, err := d.SessionClosed(ctx, id); err != nil || !closed {
			t.Errorf("session %s after its user was deleted: closed %v, %v", id, closed, err)
		}
	}
}

// TestSessionKeyIsIdempotent: 20 concurrent creates with one key open one
// session, the others answered it (Existing); another user's key is
// another; a closed session's key is free again; bad keys and labels are
// refused; labels are found.
func TestSessionKeyIsIdempotent(t *testing.T) {
	ctx := context.Background()
	d, _, _ := familyDaemon(t)
	info := createAtOnce(t, 20, func(int) (*api.SessionInfo, error) {
		return d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"a"}, Key: "thread-7",
			Labels: map[string]string{"team": "x"}})
	})
	id := info.ID
	if info.Key != "thread-7" || info.Labels["team"] != "x" {
		t.Errorf("the session: %+v", info)
	}
	list, err := d.Sessions(ctx, api.SessionQuery{User: "alice", Key: "thread-7"}, "", -1)
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("find by key: %v, %v", list, err)
	}
	list, err = d.Sessions(ctx, api.SessionQuery{Labels: map[string]string{"team": "x"}}, "", -1)
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("find by label: %v, %v", list, err)
	}
	bobs, err := d.CreateSession(ctx, api.CreateRequest{User: "bob", Skills: []string{"a"}, Key: "thread-7"})
	if err != nil || bobs.Existing || bobs.ID == id {
		t.Errorf("bob's create with alice's key: %+v, %v; want a session of his own", bobs, err)
	}
	if err := d.CloseSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	again, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"a"}, Key: "thread-7"})
	if err != nil || again.Existing || again.ID == id {
		t.Errorf("create with a closed session's key: %+v, %v; want a new session", again, err)
	}
	for _, req := range []api.CreateRequest{
		{User: "alice", Skills: []string{"a"}, Key: "has space"},
		{User: "alice", Skills: []string{"a"}, Labels: map[string]string{"bad key": "v"}},
		{User: "alice", Skills: []string{"a"}, Labels: map[string]string{"k": "bad\nvalue"}},
	} {
		if _, err := d.CreateSession(ctx, req); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("create %+v: %v, want ErrInvalid", req, err)
		}
	}
	if _, err := d.Sessions(ctx, api.SessionQuery{Key: "has space"}, "", -1); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("find by a bad key: %v", err)
	}
	// The operator too goes by the key of the user it asks for.
	if _, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"a"}, Key: "thread-7"}); err != nil {
		t.Errorf("the operator's own session with the key: %v", err)
	}
}

// TestSessionCredentialOpensChildren: through the API with a session's
// principal, a create opens a sub-agent of that session (a retry with its
// key answers the same one); with a child's principal it is 403.
func TestSessionCredentialOpensChildren(t *testing.T) {
	d, _, parent := familyDaemon(t)
	as := func(id string) *apitest.Checked {
		h := d.http.Handler("")
		return apitest.NewChecked(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(server.WithPrincipal(r.Context(), server.Principal{Role: server.RoleSession, Session: id, Via: "sandbox-socket"})))
		}))
	}
	create := func(c *apitest.Checked, body string) (int, api.SessionInfo, string) {
		t.Helper()
		code, _, out := c.Send("POST", "/v1/sessions", apitest.JSONHeader(), []byte(body))
		var info api.SessionInfo
		if code == http.StatusOK {
			if err := json.Unmarshal(out, &info); err != nil {
				t.Fatal(err)
			}
		}
		return code, info, string(out)
	}
	code, child, out := create(as(parent.ID), `{"skills":["a"],"key":"sub-1"}`)
	if code != http.StatusOK || child.Parent != parent.ID || !slices.Equal(child.Readable, []string{"a"}) || child.Existing {
		t.Fatalf("create as the parent: %d %s", code, out)
	}
	code, again, out := create(as(parent.ID), `{"skills":["b"],"key":"sub-1"}`)
	if code != http.StatusOK || again.ID != child.ID || !again.Existing {
		t.Errorf("the retry with the key: %d %s, want session %s, existing", code, out, child.ID)
	}
	if code, _, out := create(as(parent.ID), `{"skills":["e"]}`); code != http.StatusBadRequest || !strings.Contains(out, notInParent) {
		t.Errorf("a skill outside the parent: %d %s", code, out)
	}
	if code, _, out := create(as(child.ID), `{}`); code != http.StatusForbidden {
		t.Errorf("create as the child: %d %s, want 403", code, out)
	}
	if kids, err := d.db.OpenChildren(context.Background(), parent.ID); err != nil || len(kids) != 1 {
		t.Errorf("children: %v, %v; want the one", kids, err)
	}
}

// TestChildMovesWithItsParent: a child is never moved alone; moving its
// parent to another host moves it too, served there with its set, and
// its binds on the old host are reported dropped.
func TestChildMovesWithItsParent(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	install(t, a, "name: x\ndescription: x", skills.ScopeGlobal)
	install(t, a, "name: y\ndescription: y", skills.ScopeGlobal)
	parent, err := a.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"x", "y"}})
	if err != nil {
		t.Fatal(err)
	}
	child, err := a.CreateSession(ctx, api.CreateRequest{Parent: parent.ID, Skills: []string{"y"}})
	if err != nil {
		t.Fatal(err)
	}
	target := bindTarget(t)
	if _, err := a.Bind(ctx, child.ID, skills.Bind{Target: target}); err != nil {
		t.Fatal(err)
	}
	share(t, a, b)
	if _, err := b.Move(ctx, child.ID, true); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("move a child alone: %v", err)
	}
	if s, _ := b.Session(ctx, child.ID); s.Host != a.host {
		t.Fatalf("a refused move moved the child to %s", s.Host)
	}
	m, err := b.Move(ctx, parent.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Dropped, []skills.Bind{{Target: target}}) {
		t.Errorf("dropped binds %v, want the child's", m.Dropped)
	}
	if s, err := b.Session(ctx, child.ID); err != nil || s.Host != b.host {
		t.Fatalf("the child after its parent's move: %+v, %v; want served by b", s, err)
	}
	if got := served(t, b, child.ID); !slices.Equal(got, []string{"y"}) {
		t.Errorf("b serves the child %v, want y", got)
	}
	if err := b.CloseSession(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	if closed, err := b.SessionClosed(ctx, child.ID); err != nil || !closed {
		t.Errorf("the moved child after its parent closed: %v, %v", closed, err)
	}
}

// TestSessionKeyAcrossHosts: creates with one key racing on two hosts of
// one index open one session; every other create, on either host, is
// answered that one, and no host serves a view for the creates that lost.
func TestSessionKeyAcrossHosts(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	install(t, a, "name: x\ndescription: x", skills.ScopeGlobal)
	share(t, a, b)
	createAtOnce(t, 20, func(i int) (*api.SessionInfo, error) {
		return []*Daemon{a, b}[i%2].CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"x"}, Key: "thread"})
	})
	if got := a.fs.NumSessions() + b.fs.NumSessions(); got != 1 {
		t.Errorf("the hosts serve %d views, want 1", got)
	}
}

// createAtOnce runs n creates of one key at once and checks that they
// answered one session, which one of them made; it returns that session.
func createAtOnce(t *testing.T, n int, create func(i int) (*api.SessionInfo, error)) *api.SessionInfo {
	t.Helper()
	infos := make([]*api.SessionInfo, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			infos[i], errs[i] = create(i)
		}()
	}
	wg.Wait()
	made := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if infos[i].ID != infos[0].ID {
			t.Fatalf("two sessions for one key: %s and %s", infos[0].ID, infos[i].ID)
		}
		if !infos[i].Existing {
			made++
		}
	}
	if made != 1 {
		t.Errorf("%d creates made the session, want 1", made)
	}
	return infos[0]
}
