package server

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/skills"
)

// askedSessions is a fake Sessions that keeps what it was asked: the
// creates, and the query and limit of the last list, answered with limit
// sessions.
type askedSessions struct {
	sessions // what the tests call none of
	creates  []api.CreateRequest
	query    api.SessionQuery
	after    string
}

func sessionNamed(id string) *api.SessionInfo {
	return &api.SessionInfo{ID: id, User: "alice", Readable: []string{}, Preload: []string{}, Skipped: []api.Skipped{},
		Binds: []skills.Bind{}, Pinned: []string{}}
}

func (f *askedSessions) CreateSession(_ context.Context, req api.CreateRequest) (*api.SessionInfo, error) {
	f.creates = append(f.creates, req)
	info := sessionNamed("new")
	info.Parent = req.Parent
	return info, nil
}

func (f *askedSessions) Sessions(_ context.Context, q api.SessionQuery, after string, limit int) ([]*api.SessionInfo, error) {
	f.query, f.after = q, after
	out := []*api.SessionInfo{}
	for range limit {
		out = append(out, sessionNamed("s"))
	}
	return out, nil
}

// asPrincipal serves h to requests carrying p, as the authentication
// middleware or the sandbox socket's listener sets it.
func asPrincipal(h http.Handler, p Principal) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// TestListSessionsNarrowed: GET /v1/sessions passes user, key and every
// label on, keeps them in the next page's link, and refuses a bad label
// with 400 naming the parameter.
func TestListSessionsNarrowed(t *testing.T) {
	f := &askedSessions{}
	client := apitest.NewChecked(t, New(Config{Sessions: f}).Handler(""))
	q := url.Values{"user": {"alice"}, "key": {"thread-1"}, "label": {"team=x", "env=a=b"}, "limit": {"2"}, "host": {"h1"}}
	code, h, body := client.Send("GET", "/v1/sessions?"+q.Encode(), nil, nil)
	if code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, body)
	}
	want := api.SessionQuery{Host: "h1", User: "alice", Key: "thread-1", Labels: map[string]string{"team": "x", "env": "a=b"}}
	if f.query.Host != want.Host || f.query.User != want.User || f.query.Key != want.Key || !maps.Equal(f.query.Labels, want.Labels) {
		t.Errorf("asked %+v, want %+v", f.query, want)
	}
	next := api.NextPage(h.Get("Link"))
	u, err := url.Parse(next)
	if err != nil || next == "" {
		t.Fatalf("Link %q", h.Get("Link"))
	}
	nq := u.Query()
	if nq.Get("user") != "alice" || nq.Get("key") != "thread-1" || nq.Get("host") != "h1" || strings.Join(nq["label"], " ") != "team=x env=a=b" ||
		nq.Get("after") != "s" {
		t.Errorf("next page %q keeps not the narrowing", next)
	}
	code, _, body = client.Send("GET", "/v1/sessions?label=nokey", nil, nil)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "query parameter label") {
		t.Errorf("a bad label: %d %s", code, body)
	}
}

// TestSessionCallerCreatesItsChild: with a session's credential, a create
// is of a sub-agent of the caller's session; naming another parent is
// answered as a missing session; a label of the CSI plugin's prefixes
// (csi., k8s.) is refused with 403; the operator names any parent and
// gives any label.
func TestSessionCallerCreatesItsChild(t *testing.T) {
	f := &askedSessions{}
	a := New(Config{Sessions: f})
	sess := apitest.NewChecked(t, asPrincipal(a.Handler(""), Principal{Role: RoleSession, Session: "p1", Via: "sandbox-socket"}))
	op := apitest.NewChecked(t, asPrincipal(a.Handler(""), Principal{Role: RoleOperator, Via: "socket"}))
	for _, tc := range []struct {
		name   string
		client *apitest.Checked
		body   string
		code   int
		parent string // the parent asked for; on a refusal, what the answer names
	}{
		{"implied", sess, `{"skills":["a"]}`, http.StatusOK, "p1"},
		{"named, its own", sess, `{"parent":"p1"}`, http.StatusOK, "p1"},
		{"named, another", sess, `{"parent":"p2"}`, http.StatusNotFound, `"p2"`},
		{"the plugin's label", sess, `{"labels":{"team":"x","csi.driver":"csi.skillfs"}}`, http.StatusForbidden, `"csi.driver"`},
		{"a pod's label", sess, `{"labels":{"k8s.pod-uid":"u"}}`, http.StatusForbidden, `"k8s.pod-uid"`},
		{"labels of its own", sess, `{"labels":{"team":"x","csix":"y"}}`, http.StatusOK, "p1"},
		{"operator, a top-level session", op, `{"user":"alice"}`, http.StatusOK, ""},
		{"operator, any parent", op, `{"parent":"p2"}`, http.StatusOK, "p2"},
		{"operator, the plugin's labels", op, `{"user":"alice","labels":{"csi.driver":"csi.skillfs"}}`, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.creates = nil
			code, _, body := tc.client.Send("POST", "/v1/sessions", apitest.JSONHeader(), []byte(tc.body))
			if code != tc.code {
				t.Fatalf("POST %s: %d %s, want %d", tc.body, code, body, tc.code)
			}
			if code != http.StatusOK {
				if len(f.creates) != 0 {
					t.Errorf("the refused create reached the daemon: %+v", f.creates)
				}
				var e api.Error
				if json.Unmarshal(body, &e); !strings.Contains(e.Error, tc.parent) {
					t.Errorf("answer %s", body)
				}
				return
			}
			if len(f.creates) != 1 || f.creates[0].Parent != tc.parent {
				t.Errorf("asked %+v, want parent %q", f.creates, tc.parent)
			}
		})
	}
}
