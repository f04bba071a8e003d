package policy

import (
	"fmt"
	"slices"
	"strconv"

	"skillfs/skills"
)

// Perm is what a user may do with a skill. Levels are ordered: Manage implies
// Read.
type Perm int

// Permission levels.
const (
	None   Perm = iota // the skill does not exist for the user
	Read               // the user may see and read it
	Manage             // the user may also change it, within the checks below
)

// String returns "none", "read" or "manage".
func (p Perm) String() string {
	switch p {
	case None:
		return "none"
	case Read:
		return "read"
	case Manage:
		return "manage"
	}
	return "Perm(" + strconv.Itoa(int(p)) + ")"
}

// InScope reports whether u is inside sc. The unset scope holds nobody; a
// department scope holds nobody without a department.
func InScope(u skills.User, sc skills.Scope) bool {
	switch sc.Kind {
	case skills.ScopeGlobal:
		return true
	case skills.ScopeDepartment:
		return u.Department != "" && slices.Contains(sc.IDs, u.Department)
	case skills.ScopeUser:
		return u.UID != "" && slices.Contains(sc.IDs, u.UID)
	}
	return false
}

// Permission returns what u may do with s in the catalog, ignoring whether s
// is enabled. Superadmins and admins manage every skill that is not builtin.
// Builtin skills are readable by everyone and managed by superadmins only,
// whatever their share says (what managing a builtin allows is narrow: see the
// Check functions). Any other skill is also managed by its creator and by the
// users in its manage scope (ManagesByShare), and read by the users in its
// read scope. What a session reads is not this but Visible: an admin's
// management rights are for the catalog.
func Permission(u skills.User, s *skills.Skill) Perm {
	switch {
	case s == nil:
		return None
	case u.Role == skills.RoleSuperadmin:
		return Manage
	case s.SourceType == skills.SourceBuiltin:
		return Read
	case u.Role == skills.RoleAdmin, ManagesByShare(u, s):
		return Manage
	case InScope(u, s.Share.Read):
		return Read
	}
	return None
}

// ManagesByShare reports whether u manages s by explicit right, whatever u's
// role: s is not builtin and u created it or is in its manage scope.
func ManagesByShare(u skills.User, s *skills.Skill) bool {
	return s != nil && s.SourceType != skills.SourceBuiltin &&
		(u.UID != "" && s.Creator == u.UID || InScope(u, s.Share.Manage))
}

// ReadsByShare reports whether s is accessible to u by its share, whatever
// u's role and whether s is enabled: s is builtin, u manages it by explicit
// right (ManagesByShare), or u is in its read scope. Admins and superadmins
// read by share like anyone else.
func ReadsByShare(u skills.User, s *skills.Skill) bool {
	switch {
	case s == nil:
		return false
	case s.SourceType == skills.SourceBuiltin:
		return true
	}
	return ManagesByShare(u, s) || InScope(u, s.Share.Read)
}

// Visible reports whether a session of u may read s: s is enabled and
// accessible to u by its share (ReadsByShare). Roles give nothing here: an
// admin's or a superadmin's session reads what is theirs or shared with them,
// not every skill they may manage. Disabled skills are invisible to every
// session, their managers' included; managers find them through Permission.
func Visible(u skills.User, s *skills.Skill) bool {
	return s != nil && s.Enabled && ReadsByShare(u, s)
}

// Known reports whether s exists as far as u may tell: u manages it, it is
// visible to u, or it is a builtin and u an admin (who may enable it). A skill
// that is not known to u is answered as missing, never as refused, so nobody
// learns that skills they may not see exist, nor that a skill they read was
// disabled.
func Known(u skills.User, s *skills.Skill) bool {
	switch p := Permission(u, s); {
	case p == Manage, p == Read && s.Enabled:
		return true
	case p == Read:
		return s.SourceType == skills.SourceBuiltin && isAdmin(u)
	}
	return false
}

// KnowsUser reports whether u may learn anything of the user uid: whether
// it exists, its role, its department. Admins and superadmins know every
// user (they manage ordinary users, and admins are what they must ask a
// superadmin about); anyone else knows only themselves. Every answer about a
// user u does not know — a refusal included — is the answer about a user
// that does not exist, so that nobody learns who else is registered, nor
// who is an admin.
func KnowsUser(u skills.User, uid string) bool {
	return isAdmin(u) || (u.UID != "" && u.UID == uid)
}

// isAdmin reports whether u holds an administrative role.
func isAdmin(u skills.User) bool {
	return u.Role == skills.RoleAdmin || u.Role == skills.RoleSuperadmin
}

// deny builds the error of a refused operation on a skill.
func deny(op string, actor skills.User, s *skills.Skill, why string) error {
	return fmt.Errorf("%s skill %q as %q: %s: %w", op, s.Slug, actor.UID, why, skills.ErrPermission)
}

// noSkill is the error of an operation on a skill the caller did not find.
func noSkill(op string) error {
	return fmt.Errorf("%s skill: no skill given: %w", op, skills.ErrNotFound)
}

// requireManage refuses op unless actor manages s.
func requireManage(op string, actor skills.User, s *skills.Skill) error {
	if Permission(actor, s) < Manage {
		return deny(op, actor, s, "only its creator, its managers, admins and superadmins may do that")
	}
	return nil
}

// CheckShare reports whether actor may give s the share sh. The actor must
// manage s; builtin skills keep their share (readable by everyone). What a role
// may grant:
//   - superadmins: any share;
//   - admins: any read scope, and a manage scope of departments or users but
//     not a global one: handing management of a skill to every user is a
//     superadmin's decision, since it lets anyone edit, reshare or delete it;
//   - ordinary users: only themselves, read scope user:<self>, manage scope
//     unset or user:<self>.
//
// An invalid sh is an error wrapping skills.ErrInvalid.
func CheckShare(actor skills.User, s *skills.Skill, sh skills.Share) error {
	const op = "share"
	if s == nil {
		return noSkill(op)
	}
	if s.SourceType == skills.SourceBuiltin {
		return deny(op, actor, s, "builtin skills are readable by everyone and keep that share")
	}
	if err := requireManage(op, actor, s); err != nil {
		return err
	}
	norm, err := NormalizeShare(sh)
	if err != nil {
		return fmt.Errorf("%s skill %q as %q: %w", op, s.Slug, actor.UID, err)
	}
	switch actor.Role {
	case skills.RoleSuperadmin:
		return nil
	case skills.RoleAdmin:
		if norm.Manage.Kind == skills.ScopeGlobal {
			return deny(op, actor, s, "only superadmins may hand management to everyone (manage scope global); name departments or users instead")
		}
		return nil
	}
	self := skills.Scope{Kind: skills.ScopeUser, IDs: []string{actor.UID}}
	if !sameScope(norm.Read, self) {
		return deny(op, actor, s, fmt.Sprintf("ordinary users may share only with themselves (read scope %s), not %s; ask an admin to share wider",
			FormatScope(self), FormatScope(norm.Read)))
	}
	if norm.Manage.Kind != "" && !sameScope(norm.Manage, self) {
		return deny(op, actor, s, fmt.Sprintf("ordinary users may hand management only to themselves (manage scope %s or unset), not %s",
			FormatScope(self), FormatScope(norm.Manage)))
	}
	return nil
}

// sameScope compares two normalized scopes.
func sameScope(a, b skills.Scope) bool {
	return a.Kind == b.Kind && slices.Equal(a.IDs, b.IDs)
}

// CheckEdit reports whether actor may change s's content or dependencies.
// Builtin skills are never editable, by anyone.
func CheckEdit(actor skills.User, s *skills.Skill) error {
	if s == nil {
		return noSkill("edit")
	}
	if s.SourceType == skills.SourceBuiltin {
		return deny("edit", actor, s, "builtin skills cannot be edited")
	}
	return requireManage("edit", actor, s)
}

// CheckDelete reports whether actor may delete s. Builtin skills are never
// deletable, by anyone; an admin may disable them instead.
func CheckDelete(actor skills.User, s *skills.Skill) error {
	if s == nil {
		return noSkill("delete")
	}
	if s.SourceType == skills.SourceBuiltin {
		return deny("delete", actor, s, "builtin skills cannot be deleted; disable them instead")
	}
	return requireManage("delete", actor, s)
}

// CheckToggle reports whether actor may enable or disable s: a builtin skill
// by admins and superadmins, any other by its managers.
func CheckToggle(actor skills.User, s *skills.Skill) error {
	if s == nil {
		return noSkill("enable or disable")
	}
	if s.SourceType == skills.SourceBuiltin {
		if !isAdmin(actor) {
			return deny("enable or disable", actor, s, "only admins may enable or disable builtin skills")
		}
		return nil
	}
	return requireManage("enable or disable", actor, s)
}

// CheckInstallBuiltin reports whether actor may register a builtin skill:
// admins and superadmins only, since a builtin is readable by everyone and its
// slug is reserved.
func CheckInstallBuiltin(actor skills.User) error {
	if !isAdmin(actor) {
		return fmt.Errorf("install builtin skill as %q: only admins may install builtin skills: %w", actor.UID, skills.ErrPermission)
	}
	return nil
}

// CheckReadLocal reports whether actor may have the daemon read a source
// on its own machine (a path, a file:// URL, a git URL that a rewrite sends
// to a folder there) named through the API: admins and superadmins only.
// Whoever reaches the API says whom it acts for, and the daemon (root) must
// not read any file for any user; ordinary users send the skill's bytes or
// name a remote repository. Where on the machine even an admin's request
// may read is the daemon's import roots (the catalog checks those).
func CheckReadLocal(actor skills.User) error {
	if isAdmin(actor) {
		return nil
	}
	return fmt.Errorf("%s may not have the daemon read a path on its machine (admins only): "+
		"send the ZIP or SKILL.md as the request body (Content-Type application/zip or text/markdown), "+
		"or name a remote git URL: %w", actor.UID, skills.ErrPermission)
}
