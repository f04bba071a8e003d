package index

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"testing/fstest"

	"skillfs/skills"
)

// migrationsBefore is the migrations of dialect d older than the one named
// file: an index as it stood before that migration.
func migrationsBefore(t testing.TB, d *dialect, file string) fstest.MapFS {
	t.Helper()
	ms, err := loadMigrations(d.migrations)
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, m := range ms {
		if m.file == file {
			return out
		}
		out[m.file] = &fstest.MapFile{Data: []byte(m.sql)}
	}
	t.Fatalf("no migration %s", file)
	return nil
}

// TestMigrationForgetsDeletedUsers: the user-identity migration hands the
// skills of users deleted before it to the default identity and takes
// their uids out of every user scope, so that a user registered later
// under such a uid inherits nothing. A uid is known to be gone when a
// record names it (a creator, an installer, a session's user); a uid only
// a share names may be a user to come, and stays.
func TestMigrationForgetsDeletedUsers(t *testing.T) {
	forEachBackend(t, testMigrationForgetsDeletedUsers)
}

func testMigrationForgetsDeletedUsers(t *testing.T, b backend) {
	ctx := context.Background()
	target := b.target(t)
	d, file := sqliteDialect, "013_user_identity.sql"
	var raw *sql.DB
	var err error
	if isPostgresURL(target) {
		d, file = postgresDialect, "004_user_identity.sql"
		raw, err = sql.Open("pgx", target)
	} else {
		raw, err = openPool(target, writerParams, 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, raw, d, migrationsBefore(t, d, file)); err != nil {
		raw.Close()
		t.Fatal(err)
	}
	share := func(read, manage string) string { return `{"read":` + read + `,"manage":` + manage + `}` }
	unset := `{"kind":""}`
	rows := []struct{ slug, creator, share, installer string }{
		{"apdf", "alice", share(`{"kind":"user","ids":["alice","bob"]}`, `{"kind":"user","ids":["alice"]}`), "alice"},
		{"bnotes", "bob", share(`{"kind":"user","ids":["alice","bob","dave","zoe"]}`, `{"kind":"user","ids":["alice","bob","dave"]}`), "alice"},
		{"csolo", "carol", share(`{"kind":"user","ids":["alice"]}`, unset), "carol"},
		{"dglobal", "alice", share(`{"kind":"global"}`, `{"kind":"user","ids":["alice"]}`), "alice"},
		{"ekeep", "bob", share(`{"kind":"department","ids":["eng"]}`, `{"kind":"department","ids":["eng"]}`), "bob"},
	}
	// One statement list, one transaction: a skill's current version
	// is checked at commit.
	stmts := `INSERT INTO users (uid, role, department) VALUES ('operator', 'superadmin', ''), ('bob', 'user', ''), ('carol', 'user', '');
		INSERT INTO sessions (id, uid, all_skills, created_at, closed_at) VALUES ('s1', 'dave', false, 1, 2), ('s2', 'alice', true, 1, 2);`
	if !d.pg {
		stmts = "PRAGMA foreign_keys = off;" + stmts
	}
	for _, r := range rows {
		stmts += `INSERT INTO skills (slug, name, description, source_type, source, share, enabled, current_version, creator)
			VALUES ('` + r.slug + `', 'n', 'd', 'upload', 's', '` + r.share + `', true, 'h', '` + r.creator + `');
			INSERT INTO versions (slug, hash, path, source_type, source, installer, files, bytes)
			VALUES ('` + r.slug + `', 'h', 'p', 'upload', 's', '` + r.installer + `', 1, 1);`
	}
	if d.pg {
		stmts = "BEGIN;" + stmts + "COMMIT;"
	}
	if _, err := raw.Exec(stmts); err != nil {
		raw.Close()
		t.Fatalf("fill the index: %v", err)
	}
	raw.Close()

	db := openBare(t, target)
	users := func(ids ...string) skills.Scope { return skills.Scope{Kind: skills.ScopeUser, IDs: ids} }
	want := map[string]struct {
		creator string
		share   skills.Share
	}{
		"apdf":    {"operator", skills.Share{Read: users("bob")}},
		"bnotes":  {"bob", skills.Share{Read: users("bob", "zoe"), Manage: users("bob")}},
		"csolo":   {"carol", skills.Share{Read: users("carol")}},
		"dglobal": {"operator", skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}},
		"ekeep":   {"bob", skills.Share{Read: skills.Scope{Kind: skills.ScopeDepartment, IDs: []string{"eng"}}, Manage: skills.Scope{Kind: skills.ScopeDepartment, IDs: []string{"eng"}}}},
	}
	for slug, w := range want {
		s, err := db.Skill(ctx, slug)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, slug+"'s creator", s.Creator, w.creator)
		mustEqual(t, slug+"'s share", s.Share, w.share)
	}
	// The history keeps its names.
	v, err := db.Version(ctx, "apdf", "h")
	if err != nil || v.Installer != "alice" {
		t.Errorf("apdf's version after the migration: %+v %v, want alice its installer still", v, err)
	}
	s2, err := db.Session(ctx, "s2")
	if err != nil || s2.UID != "alice" {
		t.Errorf("alice's session after the migration: %+v %v", s2, err)
	}
	// Users registered before the migration have no registration time.
	us, err := db.Users(ctx)
	if err != nil || !slices.ContainsFunc(us, func(u skills.User) bool { return u.UID == "bob" && u.CreatedAt.IsZero() }) {
		t.Errorf("users after the migration: %+v %v", us, err)
	}
}
