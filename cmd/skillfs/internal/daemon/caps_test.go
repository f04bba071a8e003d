package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/index"
	"skillfs/skills"
)

// createAll runs n creates at once and returns what each answered.
func createAll(n int, create func(i int) (*api.SessionInfo, error)) ([]*api.SessionInfo, []error) {
	infos := make([]*api.SessionInfo, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { infos[i], errs[i] = create(i) })
	}
	wg.Wait()
	return infos, errs
}

// mustCapRefusal fails the test unless err is the refusal of a create for
// cap (an index.CapError of its name, max and whom it counts), ErrLimit,
// its message naming the setting.
func mustCapRefusal(t *testing.T, err error, cap, of string, max int) {
	t.Helper()
	var ce *index.CapError
	if !errors.As(err, &ce) || ce.Cap != cap || ce.Of != of || ce.Max != max || ce.Open != max || !errors.Is(err, skills.ErrLimit) ||
		!strings.Contains(err.Error(), "--"+capSettings[cap]) {
		t.Fatalf("a create over the cap %s of %s: %v, want it refused naming --%s", cap, of, err, capSettings[cap])
	}
}

// TestChildrenCapped: a session opens at most MaxChildren open sub-agent
// sessions, also when ten creates race; one more is refused naming the
// cap, with no view served and nothing stored for it; a retry with the
// key of an open child still answers that child; a closed child makes
// room for another.
func TestChildrenCapped(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	d.opts.Caps.MaxChildren = 4
	first, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID, Skills: []string{"a"}, Key: "task-1"})
	if err != nil {
		t.Fatal(err)
	}
	infos, errs := createAll(10, func(int) (*api.SessionInfo, error) {
		return d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID, Skills: []string{"b"}})
	})
	made := 0
	for i, err := range errs {
		if err == nil {
			made++
			continue
		}
		mustCapRefusal(t, err, index.CapChildren, parent.ID, 4)
		if infos[i] != nil {
			t.Errorf("a refused create answered %+v", infos[i])
		}
	}
	if made != 3 {
		t.Fatalf("%d of the racing creates opened a child, want 3 (the cap of 4, one open before)", made)
	}
	kids, err := d.db.OpenChildren(ctx, parent.ID)
	if err != nil || len(kids) != 4 {
		t.Fatalf("open children %v, %v; want 4", kids, err)
	}
	if got := d.fs.NumSessions(); got != 5 {
		t.Errorf("the mount serves %d views, want 5 (the parent and its 4 children)", got)
	}
	again, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID, Key: "task-1"})
	if err != nil || again.ID != first.ID || !again.Existing {
		t.Fatalf("a keyed retry at the cap: %+v, %v; want child %s, existing", again, err, first.ID)
	}
	// Another session of the user is not counted against this parent.
	other, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateSession(ctx, api.CreateRequest{Parent: other.ID}); err != nil {
		t.Fatalf("a child of another parent: %v", err)
	}
	if err := d.CloseSession(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID, Key: "task-1"}); err != nil {
		t.Fatalf("a child after one closed: %v", err)
	}
}

// TestUserSessionsCapped: a user has at most MaxUserSessions open
// sessions, sub-agent sessions counted; one more, top-level or child, is
// refused naming the cap, with nothing served or stored; another user is
// not counted; a close makes room.
func TestUserSessionsCapped(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t) // alice's first session
	d.opts.Caps.MaxUserSessions = 3
	if _, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID}); err != nil {
		t.Fatal(err)
	}
	top, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"d"}})
	if err != nil {
		t.Fatal(err)
	}
	served := d.fs.NumSessions()
	_, err = d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"d"}})
	mustCapRefusal(t, err, index.CapPerUser, "alice", 3)
	_, err = d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID})
	mustCapRefusal(t, err, index.CapPerUser, "alice", 3)
	if got := d.fs.NumSessions(); got != served {
		t.Errorf("the mount serves %d views after the refusals, want %d", got, served)
	}
	if ids, err := d.db.OpenSessionIDs(ctx, "alice"); err != nil || len(ids) != 3 {
		t.Errorf("alice's open sessions %v, %v; want 3", ids, err)
	}
	if _, err := d.CreateSession(ctx, api.CreateRequest{User: "bob", Skills: []string{"d"}}); err != nil {
		t.Fatalf("bob's session: %v", err)
	}
	if err := d.CloseSession(ctx, top.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"d"}}); err != nil {
		t.Fatalf("a session after one closed: %v", err)
	}
}

// TestSessionCapsThroughTheAPI: a session's own token opens children
// through POST /v1/sessions up to the cap; the next is a 400 invalid whose
// message names the cap and its setting; so is a child over its user's cap.
func TestSessionCapsThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	d.opts.Caps = Caps{MaxChildren: 2, MaxUserSessions: 4}
	c := apitest.NewChecked(t, d.http.Handler(""))
	message := func(body []byte) string {
		var e api.Error
		json.Unmarshal(body, &e)
		return e.Error
	}
	create := func() (int, []byte) {
		code, _, body := c.Send("POST", "/v1/sessions", apitest.JSONHeader("Authorization", "Bearer "+parent.Token), []byte(`{"skills":["a"]}`))
		return code, body
	}
	for range 2 {
		if code, body := create(); code != http.StatusOK {
			t.Fatalf("a child with the parent's token: %d %s", code, body)
		}
	}
	code, body := create()
	if code != http.StatusBadRequest || apitest.ErrorCode(body) != "invalid" || !strings.Contains(message(body), "has 2 open sub-agent sessions, the most it may have is 2 (serve's --max-children): close one first") {
		t.Fatalf("a child over the cap: %d %s, want 400 invalid naming --max-children", code, body)
	}
	// alice: the parent and its two children, and one more session.
	other, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	code, _, body = c.Send("POST", "/v1/sessions", apitest.JSONHeader("Authorization", "Bearer "+other.Token), []byte(`{}`))
	if code != http.StatusBadRequest || apitest.ErrorCode(body) != "invalid" || !strings.Contains(message(body), `user "alice" has 4 open sessions, the most it may have is 4 (serve's --max-user-sessions): close one first`) {
		t.Fatalf("a child over its user's cap: %d %s, want 400 invalid naming --max-user-sessions", code, body)
	}
}

// TestUserSessionsCappedAcrossHosts: creates of one user racing on two
// hosts of one index open no more sessions than the user's cap, each
// host's refusals counted in the index's transaction; neither host serves
// a view for a refused create.
func TestUserSessionsCappedAcrossHosts(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	install(t, a, "name: x\ndescription: x", skills.ScopeGlobal)
	share(t, a, b)
	a.opts.Caps.MaxUserSessions, b.opts.Caps.MaxUserSessions = 5, 5
	_, errs := createAll(16, func(i int) (*api.SessionInfo, error) {
		return []*Daemon{a, b}[i%2].CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"x"}})
	})
	made := 0
	for _, err := range errs {
		if err == nil {
			made++
			continue
		}
		mustCapRefusal(t, err, index.CapPerUser, "alice", 5)
	}
	ids, err := a.db.OpenSessionIDs(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if made != 5 || len(ids) != 5 {
		t.Fatalf("%d creates succeeded, alice has %d open sessions; want 5", made, len(ids))
	}
	if got := a.fs.NumSessions() + b.fs.NumSessions(); got != 5 {
		t.Errorf("the hosts serve %d views, want 5", got)
	}
}
