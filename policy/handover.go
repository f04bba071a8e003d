package policy

import (
	"cmp"
	"slices"

	"skillfs/skills"
)

// Handover is what deleting a user does to every skill, so that the uid
// names nothing afterwards and a user registered later under it inherits
// nothing: a skill the user created goes to Heir, who becomes its creator
// (and so manages it and reads it, as the user did); the uid leaves every
// user scope, read and manage. A read scope left with nobody is its
// creator's alone, as a new skill's is; a manage scope left with nobody is
// unset (the creator's alone). Department and global scopes name no user
// and stay; builtins keep their share.
type Handover struct {
	UID  string // the user deleted
	Heir string // the user who takes the skills UID created
}

// Apply changes s as the handover says and reports whether it changed it.
// The share stays normalized: the manage scope stays inside the read scope,
// since the uid leaves both.
func (h Handover) Apply(s *skills.Skill) bool {
	changed := false
	if s.Creator == h.UID {
		s.Creator, changed = h.Heir, true
	}
	if read, ok := without(s.Share.Read, h.UID); ok {
		if len(read.IDs) == 0 {
			read.IDs = []string{cmp.Or(s.Creator, h.Heir)}
		}
		s.Share.Read, changed = read, true
	}
	if manage, ok := without(s.Share.Manage, h.UID); ok {
		if len(manage.IDs) == 0 {
			manage = skills.Scope{}
		}
		s.Share.Manage, changed = manage, true
	}
	return changed
}

// without returns the user scope sc without uid, and whether uid was in it;
// any other scope is returned as it is.
func without(sc skills.Scope, uid string) (skills.Scope, bool) {
	if sc.Kind != skills.ScopeUser || !slices.Contains(sc.IDs, uid) {
		return sc, false
	}
	ids := slices.DeleteFunc(slices.Clone(sc.IDs), func(id string) bool { return id == uid })
	return skills.Scope{Kind: sc.Kind, IDs: ids}, true
}
