package policy

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"skillfs/skills"
)

// The cast of the permission table. Departments: ops, eng, sales, hr.
var (
	root  = skills.User{UID: "root", Role: skills.RoleSuperadmin, Department: "ops"}
	adm   = skills.User{UID: "adm", Role: skills.RoleAdmin, Department: "ops"}     // admin in no scope
	admgr = skills.User{UID: "admgr", Role: skills.RoleAdmin, Department: "sales"} // admin in the manage scope
	alice = skills.User{UID: "alice", Role: skills.RoleUser, Department: "eng"}    // creator
	mgr   = skills.User{UID: "mgr", Role: skills.RoleUser, Department: "sales"}    // ordinary user in the manage scope
	dave  = skills.User{UID: "dave", Role: skills.RoleUser, Department: "eng"}     // reader by department
	bob   = skills.User{UID: "bob", Role: skills.RoleUser, Department: "hr"}       // reader by uid
	eve   = skills.User{UID: "eve", Role: skills.RoleUser, Department: "hr"}       // outsider
	cast  = []skills.User{root, adm, admgr, alice, mgr, dave, bob, eve}
)

func scope(kind string, ids ...string) skills.Scope { return skills.Scope{Kind: kind, IDs: ids} }

// shares are the skill's share config per scope kind of the table. Each puts
// admgr and mgr in the manage scope, dave in the read scope only through his
// department where departments are used, bob only through his uid.
var shares = map[string]skills.Share{
	"global": {
		Read:   scope(skills.ScopeGlobal),
		Manage: scope(skills.ScopeUser, "admgr", "mgr"),
	},
	"department": {
		Read:   scope(skills.ScopeDepartment, "eng", "sales"),
		Manage: scope(skills.ScopeDepartment, "sales"),
	},
	"user": {
		Read:   scope(skills.ScopeUser, "admgr", "alice", "bob", "mgr"),
		Manage: scope(skills.ScopeUser, "admgr", "mgr"),
	},
}

// ops are the columns of the table, in the order of the expectation strings.
var ops = []string{"visible", "edit", "share-global", "share-department", "share-self", "share-manage-global", "toggle", "delete", "depend-on"}

// expected holds, per source type, scope kind and role, one character per op:
// 'y' allowed, '-' refused. Admins and superadmins manage every skill that is
// not builtin, whatever its share; only superadmins hand management to
// everyone; ordinary users share only with themselves. What a session reads
// ("visible") and what one's own skill may depend on go by share alone, for
// admins and superadmins too: root and adm are in no scope of the
// department and user shares, admgr is.
var expected = map[string]map[string]map[string]string{
	skills.SourceUpload: {
		"global": {
			"root": "yyyyyyyyy", "adm": "yyyyy-yyy", "admgr": "yyyyy-yyy", "alice": "yy--y-yyy",
			"mgr": "yy--y-yyy", "dave": "y-------y", "bob": "y-------y", "eve": "y-------y",
		},
		"department": {
			"root": "-yyyyyyy-", "adm": "-yyyy-yy-", "admgr": "yyyyy-yyy", "alice": "yy--y-yyy",
			"mgr": "yy--y-yyy", "dave": "y-------y", "bob": "---------", "eve": "---------",
		},
		"user": {
			"root": "-yyyyyyy-", "adm": "-yyyy-yy-", "admgr": "yyyyy-yyy", "alice": "yy--y-yyy",
			"mgr": "yy--y-yyy", "dave": "---------", "bob": "y-------y", "eve": "---------",
		},
	},
	// Builtins ignore their share: readable by all, never edited, deleted or
	// reshared, toggled by admins.
	skills.SourceBuiltin: {
		"global": {
			"root": "y-----y-y", "adm": "y-----y-y", "admgr": "y-----y-y", "alice": "y-------y",
			"mgr": "y-------y", "dave": "y-------y", "bob": "y-------y", "eve": "y-------y",
		},
		"department": {
			"root": "y-----y-y", "adm": "y-----y-y", "admgr": "y-----y-y", "alice": "y-------y",
			"mgr": "y-------y", "dave": "y-------y", "bob": "y-------y", "eve": "y-------y",
		},
		"user": {
			"root": "y-----y-y", "adm": "y-----y-y", "admgr": "y-----y-y", "alice": "y-------y",
			"mgr": "y-------y", "dave": "y-------y", "bob": "y-------y", "eve": "y-------y",
		},
	},
}

// runOp performs op as actor on s, within a catalog holding s, and returns
// whether it was allowed and the error of a refusal.
func runOp(t testing.TB, op string, actor skills.User, s *skills.Skill) (bool, error) {
	t.Helper()
	var err error
	switch op {
	case "visible":
		return Visible(actor, s), nil
	case "edit":
		err = CheckEdit(actor, s)
	case "share-global":
		err = CheckShare(actor, s, skills.Share{Read: scope(skills.ScopeGlobal)})
	case "share-department":
		err = CheckShare(actor, s, skills.Share{Read: scope(skills.ScopeDepartment, "eng")})
	case "share-self":
		err = CheckShare(actor, s, skills.Share{Read: scope(skills.ScopeUser, actor.UID)})
	case "share-manage-global":
		err = CheckShare(actor, s, skills.Share{Read: scope(skills.ScopeGlobal), Manage: scope(skills.ScopeGlobal)})
	case "toggle":
		err = CheckToggle(actor, s)
	case "delete":
		err = CheckDelete(actor, s)
	case "depend-on":
		// The actor's own private skill depending on s.
		mine := &skills.Skill{
			Slug: "mine", SourceType: skills.SourceUpload, Enabled: true, Creator: actor.UID,
			Share:             DefaultShare(actor.UID),
			SkillDependencies: []string{s.Slug},
		}
		c := Catalog{Skills: map[string]*skills.Skill{s.Slug: s, "mine": mine}, Users: cast}
		err = ValidateDependencies(c, mine)
		if err != nil {
			var de *DependencyError
			if !errors.As(err, &de) || !errors.Is(err, skills.ErrDependency) {
				t.Fatalf("depend-on: error %v is not a *DependencyError wrapping ErrDependency", err)
			}
		}
		return err == nil, err
	default:
		t.Fatalf("unknown op %q", op)
	}
	if err != nil && !errors.Is(err, skills.ErrPermission) {
		t.Fatalf("%s: error %v does not wrap ErrPermission", op, err)
	}
	return err == nil, err
}

func TestPermissionTable(t *testing.T) {
	for _, source := range []string{skills.SourceUpload, skills.SourceBuiltin} {
		for _, kind := range []string{"global", "department", "user"} {
			for _, enabled := range []bool{true, false} {
				for _, u := range cast {
					want := expected[source][kind][u.UID]
					if len(want) != len(ops) {
						t.Fatalf("table row %s/%s/%s has %d cells, want %d", source, kind, u.UID, len(want), len(ops))
					}
					for i, op := range ops {
						allow := want[i] == 'y'
						// Disabled skills are invisible to everyone and cannot be depended
						// on; management does not depend on Enabled.
						if !enabled && (op == "visible" || op == "depend-on") {
							allow = false
						}
						state := "enabled"
						if !enabled {
							state = "disabled"
						}
						t.Run(fmt.Sprintf("%s/%s/%s/%s/%s", source, kind, state, u.UID, op), func(t *testing.T) {
							s := &skills.Skill{
								Slug: "pdf", SourceType: source, Creator: "alice",
								Share: shares[kind], Enabled: enabled,
							}
							got, err := runOp(t, op, u, s)
							if got != allow {
								t.Errorf("allowed = %v, want %v (err: %v)", got, allow, err)
							}
						})
					}
				}
			}
		}
	}
}

func TestPermission(t *testing.T) {
	upload := &skills.Skill{Slug: "x", SourceType: skills.SourceUpload, Creator: "alice", Share: shares["department"]}
	tests := []struct {
		name string
		u    skills.User
		s    *skills.Skill
		want Perm
	}{
		{"nil skill", root, nil, None},
		{"superadmin", root, upload, Manage},
		{"creator", alice, upload, Manage},
		{"manage scope by department", mgr, upload, Manage},
		{"read scope by department", dave, upload, Read},
		{"outsider", eve, upload, None},
		{"admin outside the scopes manages", adm, upload, Manage},
		{"admin manages a skill shared with nobody", adm, &skills.Skill{SourceType: skills.SourceUpload, Creator: "alice"}, Manage},
		{"admin only reads a builtin", adm, &skills.Skill{SourceType: skills.SourceBuiltin}, Read},
		{"no department is in no department scope", skills.User{UID: "x", Role: skills.RoleUser}, upload, None},
		{"empty uid is no creator", skills.User{Role: skills.RoleUser}, &skills.Skill{SourceType: skills.SourceUpload}, None},
		{"builtin creator only reads", alice, &skills.Skill{SourceType: skills.SourceBuiltin, Creator: "alice"}, Read},
		{"builtin with no share is readable", eve, &skills.Skill{SourceType: skills.SourceBuiltin}, Read},
		{"unset scopes hold nobody", eve, &skills.Skill{SourceType: skills.SourceUpload, Creator: "alice"}, None},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Permission(tc.u, tc.s); got != tc.want {
				t.Errorf("Permission = %v, want %v", got, tc.want)
			}
		})
	}
}

// ReadsByShare and ManagesByShare go by explicit rights: a role gives
// nothing, so an admin's or superadmin's sessions read what is theirs or
// shared with them, and a same-source import updates only their own skills.
func TestByShare(t *testing.T) {
	private := &skills.Skill{SourceType: skills.SourceUpload, Creator: "alice", Share: DefaultShare("alice")}
	dept := &skills.Skill{SourceType: skills.SourceUpload, Creator: "alice", Share: shares["department"]}
	users := &skills.Skill{SourceType: skills.SourceUpload, Creator: "alice", Share: shares["user"]}
	own := &skills.Skill{SourceType: skills.SourceUpload, Creator: "adm", Share: DefaultShare("adm")}
	builtin := &skills.Skill{SourceType: skills.SourceBuiltin, Creator: "root", Share: DefaultShare("root")}
	tests := []struct {
		name          string
		u             skills.User
		s             *skills.Skill
		reads, manage bool
	}{
		{"nil skill", root, nil, false, false},
		{"creator", alice, private, true, true},
		{"admin, another's private skill", adm, private, false, false},
		{"superadmin, another's private skill", root, private, false, false},
		{"admin, own skill", adm, own, true, true},
		{"admin in the manage scope by department", admgr, dept, true, true},
		{"admin in neither scope", adm, dept, false, false},
		{"superadmin in neither scope", root, dept, false, false},
		{"admin in the manage scope by uid", admgr, users, true, true},
		{"reader by department", dave, dept, true, false},
		{"reader by uid", bob, users, true, false},
		{"outsider", eve, dept, false, false},
		{"builtin: read by all, managed by share by nobody", root, builtin, true, false},
		{"builtin, ordinary user", eve, builtin, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadsByShare(tc.u, tc.s); got != tc.reads {
				t.Errorf("ReadsByShare = %v, want %v", got, tc.reads)
			}
			if got := ManagesByShare(tc.u, tc.s); got != tc.manage {
				t.Errorf("ManagesByShare = %v, want %v", got, tc.manage)
			}
			if tc.s != nil {
				on := *tc.s
				on.Enabled = true
				if got := Visible(tc.u, &on); got != tc.reads {
					t.Errorf("Visible (enabled) = %v, want %v", got, tc.reads)
				}
				if Visible(tc.u, tc.s) {
					t.Error("Visible (disabled) = true")
				}
			}
		})
	}
}

// Known is what the catalog answers "not found" by: a skill is known to its
// managers, and to its readers while it is enabled.
func TestKnown(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		s := &skills.Skill{Slug: "pdf", SourceType: skills.SourceUpload, Creator: "alice", Share: shares["department"], Enabled: enabled}
		for _, u := range cast {
			p := Permission(u, s)
			want := p == Manage || p == Read && enabled
			if got := Known(u, s); got != want {
				t.Errorf("enabled=%v %s (%v): Known = %v, want %v", enabled, u.UID, p, got, want)
			}
		}
	}
	if Known(root, nil) {
		t.Error("a nil skill is known")
	}
	// The two cells that matter: a reader loses a disabled skill, its
	// managers (an admin among them) keep it.
	off := &skills.Skill{Slug: "pdf", SourceType: skills.SourceUpload, Creator: "alice", Share: shares["department"]}
	if Known(dave, off) || !Known(adm, off) || !Known(alice, off) {
		t.Error("disabled skill: want unknown to a reader, known to an admin and its creator")
	}
}

func TestKnowsUser(t *testing.T) {
	for _, tc := range []struct {
		who  skills.User
		uid  string
		want bool
	}{
		{root, "eve", true},
		{root, "nobody", true},
		{adm, "root", true},
		{adm, "eve", true},
		{alice, "alice", true},
		{alice, "bob", false},
		{alice, "adm", false},
		{alice, "root", false},
		{alice, "nobody", false},
		{skills.User{Role: skills.RoleUser}, "", false},
	} {
		if got := KnowsUser(tc.who, tc.uid); got != tc.want {
			t.Errorf("KnowsUser(%s %s, %q) = %v, want %v", tc.who.Role, tc.who.UID, tc.uid, got, tc.want)
		}
	}
}

func TestPermString(t *testing.T) {
	for p, want := range map[Perm]string{None: "none", Read: "read", Manage: "manage", Perm(7): "Perm(7)"} {
		if got := p.String(); got != want {
			t.Errorf("Perm(%d).String() = %q, want %q", int(p), got, want)
		}
	}
	if !(None < Read && Read < Manage) {
		t.Error("permission levels are not ordered")
	}
}

func TestCheckShare(t *testing.T) {
	own := &skills.Skill{Slug: "mine", SourceType: skills.SourceUpload, Creator: "alice", Share: DefaultShare("alice")}
	adminOwn := &skills.Skill{Slug: "team", SourceType: skills.SourceUpload, Creator: "adm", Share: DefaultShare("adm")}
	tests := []struct {
		name  string
		actor skills.User
		s     *skills.Skill
		sh    skills.Share
		want  error // nil, ErrPermission or ErrInvalid
	}{
		{"user keeps it private", alice, own, DefaultShare("alice"), nil},
		{"user self with manage self", alice, own, skills.Share{Read: scope("user", "alice"), Manage: scope("user", "alice")}, nil},
		{"user self spelled untidily", alice, own, skills.Share{Read: scope("user", " alice ", "alice")}, nil},
		{"user hands management to another", alice, own, skills.Share{Read: scope("user", "alice", "bob"), Manage: scope("user", "bob")}, skills.ErrPermission},
		{"user shares with a friend", alice, own, skills.Share{Read: scope("user", "alice", "bob")}, skills.ErrPermission},
		{"user shares with own department", alice, own, skills.Share{Read: scope("department", "eng")}, skills.ErrPermission},
		{"user shares globally", alice, own, skills.Share{Read: scope("global")}, skills.ErrPermission},
		{"user invalid share", alice, own, skills.Share{Read: scope("team", "x")}, skills.ErrInvalid},
		{"outsider", bob, own, DefaultShare("bob"), skills.ErrPermission},
		{"admin reshares another's skill globally", adm, own, skills.Share{Read: scope("global")}, nil},
		{"admin hands management of another's skill to a department", adm, own, skills.Share{Read: scope("global"), Manage: scope("department", "eng")}, nil},
		{"admin hands management to everyone", adm, own, skills.Share{Read: scope("global"), Manage: scope("global")}, skills.ErrPermission},
		{"superadmin hands management to everyone", root, own, skills.Share{Read: scope("global"), Manage: scope("global")}, nil},
		{"manager in scope hands management to everyone", mgr, &skills.Skill{Slug: "m", SourceType: skills.SourceUpload, Creator: "alice", Share: skills.Share{Read: scope("global"), Manage: scope("user", "mgr")}},
			skills.Share{Read: scope("global"), Manage: scope("global")}, skills.ErrPermission},
		{"admin by department with department managers", adm, adminOwn, skills.Share{Read: scope("department", "eng", "ops"), Manage: scope("department", "ops")}, nil},
		{"admin by users", adm, adminOwn, skills.Share{Read: scope("user", "bob", "eve")}, nil},
		{"admin manage wider than read", adm, adminOwn, skills.Share{Read: scope("department", "eng"), Manage: scope("department", "eng", "ops")}, skills.ErrInvalid},
		{"admin mixed kinds", adm, adminOwn, skills.Share{Read: scope("department", "eng"), Manage: scope("user", "bob")}, skills.ErrInvalid},
		{"superadmin on a builtin", root, &skills.Skill{Slug: "b", SourceType: skills.SourceBuiltin}, skills.Share{Read: scope("global")}, skills.ErrPermission},
		{"nil skill", root, nil, skills.Share{Read: scope("global")}, skills.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckShare(tc.actor, tc.s, tc.sh)
			if tc.want == nil && err != nil {
				t.Fatalf("CheckShare: %v", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CheckShare = %v, want an error wrapping %v", err, tc.want)
			}
		})
	}
}

func TestChecksOnNilSkill(t *testing.T) {
	for name, check := range map[string]func(skills.User, *skills.Skill) error{
		"edit": CheckEdit, "delete": CheckDelete, "toggle": CheckToggle,
	} {
		if err := check(root, nil); !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("%s on nil skill = %v, want ErrNotFound", name, err)
		}
	}
}

func TestCheckInstallBuiltin(t *testing.T) {
	for _, u := range cast {
		err := CheckInstallBuiltin(u)
		allowed := slices.Contains([]string{"root", "adm", "admgr"}, u.UID)
		if allowed && err != nil {
			t.Errorf("%s: %v", u.UID, err)
		}
		if !allowed && !errors.Is(err, skills.ErrPermission) {
			t.Errorf("%s: err = %v, want ErrPermission", u.UID, err)
		}
	}
}

// TestCheckReadLocal: only admins and superadmins may have the daemon
// read its own machine through the API, whatever else they manage.
func TestCheckReadLocal(t *testing.T) {
	for _, u := range cast {
		err := CheckReadLocal(u)
		allowed := slices.Contains([]string{"root", "adm", "admgr"}, u.UID)
		if allowed && err != nil {
			t.Errorf("%s: %v", u.UID, err)
		}
		if !allowed && !errors.Is(err, skills.ErrPermission) {
			t.Errorf("%s: err = %v, want ErrPermission", u.UID, err)
		}
	}
}

func TestInScope(t *testing.T) {
	tests := []struct {
		name string
		u    skills.User
		sc   skills.Scope
		want bool
	}{
		{"global holds anyone", skills.User{}, scope("global"), true},
		{"unset holds nobody", alice, skills.Scope{}, false},
		{"department member", alice, scope("department", "eng", "ops"), true},
		{"other department", bob, scope("department", "eng"), false},
		{"no department", skills.User{UID: "x"}, scope("department", ""), false},
		{"listed uid", bob, scope("user", "alice", "bob"), true},
		{"unlisted uid", eve, scope("user", "alice", "bob"), false},
		{"uid is not a department", skills.User{UID: "eng"}, scope("department", "eng"), false},
		{"unknown kind", alice, scope("team", "eng"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := InScope(tc.u, tc.sc); got != tc.want {
				t.Errorf("InScope = %v, want %v", got, tc.want)
			}
		})
	}
}
