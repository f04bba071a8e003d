package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// installFrom imports the skill in dir (a new version when dir was
// imported before), readable by everyone.
func installFrom(t testing.TB, d *Daemon, dir, manifest string) {
	t.Helper()
	skilltest.WriteDir(t, dir, fstest.MapFS{"SKILL.md": skilltest.File(manifest)})
	req := catalog.ImportRequest{Source: dir, Share: &skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}}
	if _, err := d.cat.Import(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// TestSetSkills: PATCH /v1/sessions/{id} gives a live session a new skill
// set: same id and mount, kept skills at their pinned version with their
// activations, dropped skills gone from the mount at once with a revoked
// event each, then a changed event; bad requests change nothing.
func TestSetSkills(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	if err := d.cat.PutUser(ctx, "", skills.User{UID: "alice", Role: skills.RoleUser}, true); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	installFrom(t, d, filepath.Join(src, "keep"), "---\nname: keep\ndescription: kept, version one\n---\none\n")
	installFrom(t, d, filepath.Join(src, "drop"), "---\nname: drop\ndescription: dropped\n---\ndrop\n")
	installFrom(t, d, filepath.Join(src, "add"), "---\nname: add\ndescription: added\n---\nadd\n")
	client := apitest.NewChecked(t, d.http.Handler(""))

	info, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"keep", "drop"}, Preload: []string{"drop"}})
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) (string, error) {
		data, err := os.ReadFile(filepath.Join(info.Path, rel))
		return string(data), err
	}
	for _, rel := range []string{"keep/SKILL.md", "drop/SKILL.md"} {
		if _, err := read(rel); err != nil {
			t.Fatalf("read %s before the set: %v", rel, err)
		}
	}
	held, err := os.Open(filepath.Join(info.Path, "drop", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	installFrom(t, d, filepath.Join(src, "keep"), "---\nname: keep\ndescription: kept, version two\n---\ntwo\n")

	patch := func(body string) (int, api.SessionInfo, []byte) {
		t.Helper()
		code, _, out := client.Send("PATCH", "/v1/sessions/"+info.ID, apitest.JSONHeader(), []byte(body))
		var got api.SessionInfo
		if code == http.StatusOK {
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
		}
		return code, got, out
	}
	code, got, body := patch(`{"skills":["keep","add"],"preload":["add"]}`)
	if code != http.StatusOK {
		t.Fatalf("PATCH: %d %s", code, body)
	}
	if got.ID != info.ID || got.Path != info.Path || !slices.Equal(got.Readable, []string{"keep", "add"}) ||
		!slices.Equal(got.Preload, []string{"add"}) {
		t.Errorf("after the set: %+v, want the same id and path, keep and add readable, add preloaded", got)
	}

	// The dropped skill is gone from the live mount, its open handle too.
	if _, err := os.Stat(filepath.Join(info.Path, "drop")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat of the dropped skill: %v, want ENOENT", err)
	}
	if n, err := held.ReadAt(make([]byte, 8), 0); err == nil {
		t.Errorf("a handle on the dropped skill still reads (%d bytes)", n)
	}
	// Kept: its pinned version, not the one installed since; added: current.
	if s, err := read("keep/SKILL.md"); err != nil || !strings.Contains(s, "version one") {
		t.Errorf("kept skill reads %q, %v; want its pinned version one", s, err)
	}
	if s, err := read("add/SKILL.md"); err != nil || !strings.Contains(s, "add") {
		t.Errorf("added skill reads %q, %v", s, err)
	}
	a, err := d.Activations(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	var activated []string
	for _, x := range a.Activated {
		activated = append(activated, x.Slug)
	}
	if !slices.Equal(activated, []string{"keep", "add"}) || !slices.Equal(a.Preloaded, []string{"add"}) {
		t.Errorf("activations after the set: %v, preloaded %v; want keep (kept) and add (read since), add preloaded", activated, a.Preloaded)
	}
	page, err := d.db.Events(ctx, info.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var evs []string
	for _, e := range page.Events {
		evs = append(evs, strings.TrimSpace(string(e.Type)+" "+e.Slug))
	}
	if !slices.Equal(evs, []string{"activated keep", "activated drop", "revoked drop", "changed", "activated add"}) {
		t.Errorf("events: %q", evs)
	}

	// Bad requests change nothing.
	for _, tc := range []struct {
		body   string
		status int
	}{
		{`{}`, http.StatusBadRequest},
		{`{"preload":["keep"]}`, http.StatusBadRequest},
		{`{"skills":["keep"],"all":true}`, http.StatusBadRequest},
		{`{"skills":["keep"],"preload":["add"]}`, http.StatusBadRequest},
		{`{"all":true,"preload":["nope"]}`, http.StatusBadRequest},
		{`{"skills":["keep"],"user":"bob"}`, http.StatusBadRequest},
	} {
		if code, _, body := patch(tc.body); code != tc.status {
			t.Errorf("PATCH %s: %d %s, want %d", tc.body, code, body, tc.status)
		}
	}
	if code, _, body := client.Send("PATCH", "/v1/sessions/nope", apitest.JSONHeader(), []byte(`{"all":true}`)); code != http.StatusNotFound {
		t.Errorf("PATCH of an unknown session: %d %s, want 404", code, body)
	}
	now, err := d.SessionInfo(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(now.Readable, []string{"keep", "add"}) || !slices.Equal(now.Preload, []string{"add"}) {
		t.Errorf("after refused sets: %+v", now)
	}

	// All: the dropped skill comes back at its current version, and keep
	// still reads its pinned one; preload left out is none.
	code, got, body = patch(`{"all":true}`)
	if code != http.StatusOK {
		t.Fatalf("PATCH all: %d %s", code, body)
	}
	if slices.Sort(got.Readable); !slices.Contains(got.Readable, "drop") || len(got.Preload) != 0 {
		t.Errorf("after setting all: %+v", got)
	}
	if s, err := read("drop/SKILL.md"); err != nil || !strings.Contains(s, "dropped") {
		t.Errorf("the skill given back reads %q, %v", s, err)
	}
	if s, err := read("keep/SKILL.md"); err != nil || !strings.Contains(s, "version one") {
		t.Errorf("kept skill reads %q, %v after a second set; want version one", s, err)
	}
	// An empty list is a set too: nothing readable.
	if code, got, body = patch(`{"skills":[]}`); code != http.StatusOK || len(got.Readable) != 0 {
		t.Fatalf("PATCH to no skills: %d %s", code, body)
	}
	if names, err := os.ReadDir(info.Path); err != nil || len(names) != 0 {
		t.Errorf("the session's directory after setting no skills: %v, %v", names, err)
	}
	if err := d.CloseSession(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if code, _, body := patch(`{"all":true}`); code != http.StatusNotFound {
		t.Errorf("PATCH of a closed session: %d %s, want 404", code, body)
	}
}
