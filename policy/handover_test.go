package policy

import (
	"reflect"
	"testing"

	"skillfs/skills"
)

func TestHandover(t *testing.T) {
	h := Handover{UID: "alice", Heir: "adm"}
	users := func(ids ...string) skills.Scope { return scope(skills.ScopeUser, ids...) }
	for _, tc := range []struct {
		name          string
		creator       string
		share         skills.Share
		wantCreator   string
		wantShare     skills.Share
		wantUnchanged bool
	}{
		{"her private skill", "alice", skills.Share{Read: users("alice")},
			"adm", skills.Share{Read: users("adm")}, false},
		{"hers, shared with bob", "alice", skills.Share{Read: users("alice", "bob")},
			"adm", skills.Share{Read: users("bob")}, false},
		{"hers, globally", "alice", skills.Share{Read: scope(skills.ScopeGlobal)},
			"adm", skills.Share{Read: scope(skills.ScopeGlobal)}, false},
		{"hers, managed by her and carol", "alice", skills.Share{Read: users("alice", "bob", "carol"), Manage: users("alice", "carol")},
			"adm", skills.Share{Read: users("bob", "carol"), Manage: users("carol")}, false},
		{"bob's, read by her alone", "bob", skills.Share{Read: users("alice")},
			"bob", skills.Share{Read: users("bob")}, false},
		{"bob's, managed by her alone", "bob", skills.Share{Read: users("alice", "bob"), Manage: users("alice")},
			"bob", skills.Share{Read: users("bob")}, false},
		{"bob's, shared with her department", "bob", skills.Share{Read: scope(skills.ScopeDepartment, "eng"), Manage: scope(skills.ScopeDepartment, "eng")},
			"bob", skills.Share{Read: scope(skills.ScopeDepartment, "eng"), Manage: scope(skills.ScopeDepartment, "eng")}, true},
		{"bob's, not hers at all", "bob", skills.Share{Read: users("bob", "carol")},
			"bob", skills.Share{Read: users("bob", "carol")}, true},
		{"a uid that only starts like hers", "bob", skills.Share{Read: users("alice2", "bob")},
			"bob", skills.Share{Read: users("alice2", "bob")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &skills.Skill{Slug: "pdf", SourceType: skills.SourceUpload, Creator: tc.creator, Share: tc.share}
			before := tc.share
			changed := h.Apply(s)
			if changed == tc.wantUnchanged {
				t.Errorf("changed = %v", changed)
			}
			if s.Creator != tc.wantCreator || !reflect.DeepEqual(s.Share, tc.wantShare) {
				t.Errorf("got creator %q share %+v, want %q %+v", s.Creator, s.Share, tc.wantCreator, tc.wantShare)
			}
			if !reflect.DeepEqual(tc.share, before) {
				t.Errorf("the share given was modified: %+v", tc.share)
			}
			if _, err := NormalizeShare(s.Share); err != nil {
				t.Errorf("the share after the handover is not valid: %v", err)
			}
			if InScope(alice, s.Share.Read) && s.Share.Read.Kind == skills.ScopeUser || InScope(alice, s.Share.Manage) && s.Share.Manage.Kind == skills.ScopeUser || s.Creator == "alice" {
				t.Errorf("the skill still names alice: %+v", s)
			}
		})
	}
}
