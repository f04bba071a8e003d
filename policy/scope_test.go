package policy

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"skillfs/skills"
)

func TestParseScope(t *testing.T) {
	tests := []struct {
		in      string
		want    skills.Scope
		wantErr bool
	}{
		{in: "global", want: scope("global")},
		{in: "  global\n", want: scope("global")},
		{in: "department:eng", want: scope("department", "eng")},
		{in: "department: sales , eng,eng ", want: scope("department", "eng", "sales")},
		{in: "user:bob,alice,bob", want: scope("user", "alice", "bob")},
		{in: "user:a:b", want: scope("user", "a:b")},
		{in: "user:名前", want: scope("user", "名前")},
		{in: "", wantErr: true},
		{in: "   ", wantErr: true},
		{in: "global:", wantErr: true},
		{in: "global:x", wantErr: true},
		{in: "Global", wantErr: true},
		{in: "everyone", wantErr: true},
		{in: "department", wantErr: true},
		{in: "department:", wantErr: true},
		{in: "department: , ", wantErr: true},
		{in: "user:alice,", wantErr: true},
		{in: "user:,alice", wantErr: true},
		{in: "user:al\x00ice", wantErr: true},
		{in: "user:\xff", wantErr: true},
		{in: ":alice", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseScope(tc.in)
			if tc.wantErr {
				if !errors.Is(err, skills.ErrInvalid) {
					t.Fatalf("ParseScope(%q) = %v, %v; want an error wrapping ErrInvalid", tc.in, got, err)
				}
				if !strings.Contains(err.Error(), strconv.Quote(tc.in)) {
					t.Errorf("error %q does not quote the input", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseScope(%q): %v", tc.in, err)
			}
			if got.Kind != tc.want.Kind || !slices.Equal(got.IDs, tc.want.IDs) {
				t.Fatalf("ParseScope(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			back, err := ParseScope(FormatScope(got))
			if err != nil || back.Kind != got.Kind || !slices.Equal(back.IDs, got.IDs) {
				t.Fatalf("round trip of %q through %q = %+v, %v", tc.in, FormatScope(got), back, err)
			}
		})
	}
}

func TestFormatScope(t *testing.T) {
	tests := []struct {
		name string
		sc   skills.Scope
		want string
	}{
		{"unset", skills.Scope{}, ""},
		{"global", scope("global"), "global"},
		{"departments", scope("department", "eng", "ops"), "department:eng,ops"},
		{"users", scope("user", "alice"), "user:alice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FormatScope(tc.sc); got != tc.want {
				t.Errorf("FormatScope = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNormalizeScope(t *testing.T) {
	in := scope("user", "bob", " alice", "bob")
	got, err := NormalizeScope(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.IDs, []string{"alice", "bob"}) {
		t.Errorf("ids = %q, want [alice bob]", got.IDs)
	}
	if !slices.Equal(in.IDs, []string{"bob", " alice", "bob"}) {
		t.Errorf("input modified: %q", in.IDs)
	}
	for name, bad := range map[string]skills.Scope{
		"global with ids":  scope("global", "x"),
		"unset":            {},
		"comma in id":      scope("user", "a,b"),
		"no ids":           scope("department"),
		"only a blank id":  scope("department", " "),
		"newline inside":   scope("user", "a\nb"),
		"unknown kind":     scope("group", "a"),
		"kind not trimmed": scope(" user", "a"),
	} {
		if _, err := NormalizeScope(bad); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestNormalizeShare(t *testing.T) {
	tests := []struct {
		name    string
		in      skills.Share
		want    skills.Share
		wantErr bool
	}{
		{name: "default", in: DefaultShare("alice"), want: DefaultShare("alice")},
		{name: "creator only manage stays unset", in: skills.Share{Read: scope("global")}, want: skills.Share{Read: scope("global")}},
		{name: "anything inside global", in: skills.Share{Read: scope("global"), Manage: scope("department", "ops")},
			want: skills.Share{Read: scope("global"), Manage: scope("department", "ops")}},
		{name: "global inside global", in: skills.Share{Read: scope("global"), Manage: scope("global")},
			want: skills.Share{Read: scope("global"), Manage: scope("global")}},
		{name: "departments subset, tidied", in: skills.Share{Read: scope("department", "ops", "eng", "ops"), Manage: scope("department", " eng")},
			want: skills.Share{Read: scope("department", "eng", "ops"), Manage: scope("department", "eng")}},
		{name: "users subset", in: skills.Share{Read: scope("user", "a", "b"), Manage: scope("user", "b")},
			want: skills.Share{Read: scope("user", "a", "b"), Manage: scope("user", "b")}},
		{name: "no read scope", in: skills.Share{Manage: scope("user", "a")}, wantErr: true},
		{name: "global manage, narrower read", in: skills.Share{Read: scope("user", "a"), Manage: scope("global")}, wantErr: true},
		{name: "manage department outside", in: skills.Share{Read: scope("department", "eng"), Manage: scope("department", "ops")}, wantErr: true},
		{name: "manage user outside", in: skills.Share{Read: scope("user", "a"), Manage: scope("user", "a", "b")}, wantErr: true},
		{name: "user manage in department read", in: skills.Share{Read: scope("department", "eng"), Manage: scope("user", "a")}, wantErr: true},
		{name: "department manage in user read", in: skills.Share{Read: scope("user", "a"), Manage: scope("department", "eng")}, wantErr: true},
		{name: "manage ids without kind", in: skills.Share{Read: scope("global"), Manage: skills.Scope{IDs: []string{"a"}}}, wantErr: true},
		{name: "bad manage id", in: skills.Share{Read: scope("global"), Manage: scope("user", "")}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NormalizeShare(tc.in)
			if tc.wantErr {
				if !errors.Is(err, skills.ErrInvalid) {
					t.Fatalf("NormalizeShare = %+v, %v; want ErrInvalid", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if FormatScope(got.Read) != FormatScope(tc.want.Read) || FormatScope(got.Manage) != FormatScope(tc.want.Manage) {
				t.Errorf("NormalizeShare = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDefaultShare(t *testing.T) {
	sh := DefaultShare("alice")
	if _, err := NormalizeShare(sh); err != nil {
		t.Fatalf("default share is not valid: %v", err)
	}
	s := &skills.Skill{SourceType: skills.SourceUpload, Creator: "alice", Share: sh, Enabled: true}
	if Permission(alice, s) != Manage {
		t.Error("creator does not manage a skill with the default share")
	}
	for _, u := range []skills.User{dave, bob, mgr} {
		if Visible(u, s) {
			t.Errorf("%s sees a skill with the default share", u.UID)
		}
	}
	// Admins and superadmins manage it, but their sessions do not read it:
	// it is not shared with them.
	for _, u := range []skills.User{adm, root} {
		if Permission(u, s) != Manage {
			t.Errorf("%s does not manage a skill with the default share", u.UID)
		}
		if Visible(u, s) {
			t.Errorf("%s's sessions read a skill with the default share", u.UID)
		}
	}
}

func FuzzParseScope(f *testing.F) {
	for _, s := range []string{
		"global", " global ", "department:eng", "department:b,a,b", "user:alice", "user: a , b ",
		"user:a:b", "global:", "department:", "user:,", "user:\x00", "user:\xff", "", ":", "user:名前",
		"user:a\u00a0", "user:\u0085x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		sc, err := ParseScope(in)
		if err != nil {
			if !errors.Is(err, skills.ErrInvalid) {
				t.Fatalf("ParseScope(%q) error %v does not wrap ErrInvalid", in, err)
			}
			return
		}
		if sc.Kind == skills.ScopeGlobal && len(sc.IDs) != 0 {
			t.Fatalf("global scope with ids %q", sc.IDs)
		}
		if sc.Kind != skills.ScopeGlobal && len(sc.IDs) == 0 {
			t.Fatalf("%s scope without ids from %q", sc.Kind, in)
		}
		if !slices.IsSorted(sc.IDs) || len(slices.Compact(slices.Clone(sc.IDs))) != len(sc.IDs) {
			t.Fatalf("ids %q not sorted and unique", sc.IDs)
		}
		for _, id := range sc.IDs {
			if checkID(id) != nil {
				t.Fatalf("ParseScope(%q) kept bad id %q", in, id)
			}
		}
		text := FormatScope(sc)
		back, err := ParseScope(text)
		if err != nil {
			t.Fatalf("ParseScope(FormatScope(%+v) = %q): %v", sc, text, err)
		}
		if back.Kind != sc.Kind || !slices.Equal(back.IDs, sc.IDs) {
			t.Fatalf("round trip %q -> %+v -> %q -> %+v", in, sc, text, back)
		}
		if again, err := NormalizeScope(sc); err != nil || FormatScope(again) != text {
			t.Fatalf("NormalizeScope of a parsed scope = %+v, %v", again, err)
		}
	})
}
