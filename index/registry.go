package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"skillfs/skills"
)

// PutUser inserts u, registered now (u.CreatedAt is ignored), or, if its
// uid is known, replaces its role and department, and bumps the users'
// change mark (Marks) with it.
func (db *DB) PutUser(ctx context.Context, u skills.User) error {
	switch {
	case u.UID == "":
		return fmt.Errorf("put user: empty uid: %w", skills.ErrInvalid)
	case u.Role != skills.RoleSuperadmin && u.Role != skills.RoleAdmin && u.Role != skills.RoleUser:
		return fmt.Errorf("put user %q: role %q: %w", u.UID, u.Role, skills.ErrInvalid)
	}
	err := db.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO users (uid, role, department, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (uid) DO UPDATE SET role = excluded.role, department = excluded.department`,
			u.UID, u.Role, u.Department, db.now().UnixNano())
		if err != nil {
			return err
		}
		return bumpCounter(ctx, tx, counterUsers)
	})
	if err != nil {
		return fmt.Errorf("put user %q: %w", u.UID, err)
	}
	return nil
}

// User returns the user uid, or an error wrapping skills.ErrNotFound.
func (db *DB) User(ctx context.Context, uid string) (skills.User, error) {
	var u skills.User
	err := db.read(ctx, func(tx *txn) (err error) {
		u, err = scanUser(tx.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE uid = ?", uid))
		if errors.Is(err, sql.ErrNoRows) {
			return skills.ErrNotFound
		}
		return err
	})
	if err != nil {
		return skills.User{}, fmt.Errorf("get user %q: %w", uid, err)
	}
	return u, nil
}

// Users returns every user sorted by uid.
func (db *DB) Users(ctx context.Context) ([]skills.User, error) {
	var us []skills.User
	err := db.read(ctx, func(tx *txn) (err error) {
		us, err = queryAll(ctx, tx, scanUser, "SELECT "+userColumns+" FROM users ORDER BY uid")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return us, nil
}

const userColumns = "uid, role, department, created_at"

func scanUser(sc scanner) (skills.User, error) {
	var u skills.User
	var created sql.NullInt64
	err := sc.Scan(&u.UID, &u.Role, &u.Department, &created)
	u.CreatedAt = decodeTime(created)
	return u, err
}

// DeleteUser removes the user uid, or returns an error wrapping
// skills.ErrNotFound, and bumps the users' change mark (Marks) with it.
// Sessions they ran stay, closed, as history. A user with open sessions is
// refused with an error wrapping skills.ErrExists that says how many:
// checked in the transaction that deletes, as CreateSession checks the user
// in the transaction that stores a session, so whatever runs between a
// caller's look at the sessions and the delete, no session stays open for a
// deleted user.
//
// In the same transaction every skill is passed to rewrite (nil: none),
// which reports whether it changed it; the creator and share of those it
// changed are stored (UpdatedAt becomes now) and returned, as stored, by
// slug. That is where the caller hands the user's skills to heir and takes
// the uid out of every share: nothing then names the user, and a user
// registered later under the same uid gets nothing of theirs. heir must be a
// registered user other than uid, checked in the transaction (an error
// wrapping skills.ErrNotFound, or skills.ErrInvalid), so skills are never
// handed to a user deleted meanwhile.
func (db *DB) DeleteUser(ctx context.Context, uid, heir string, rewrite func(*skills.Skill) bool) ([]*skills.Skill, error) {
	var changed []*skills.Skill
	err := db.write(ctx, func(tx *txn) error {
		changed = nil // a retried transaction starts again
		var open int
		err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sessions WHERE closed_at IS NULL AND uid = ?", uid).Scan(&open)
		if err != nil {
			return err
		}
		if open > 0 {
			return fmt.Errorf("%d open session(s): %w", open, skills.ErrExists)
		}
		if err := execOne(ctx, tx, skills.ErrNotFound, "DELETE FROM users WHERE uid = ?", uid); err != nil {
			return err
		}
		if heir == uid {
			return fmt.Errorf("the skills of %q cannot go to %q itself: %w", uid, heir, skills.ErrInvalid)
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM users WHERE uid = ?", heir).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("user %q, who is to take their skills: %w", heir, skills.ErrNotFound)
		}
		if changed, err = rewriteSkills(ctx, tx, db.now(), uid, rewrite); err != nil {
			return err
		}
		return bumpCounter(ctx, tx, counterUsers)
	})
	if err != nil {
		return nil, fmt.Errorf("delete user %q: %w", uid, err)
	}
	return changed, nil
}

// rewriteSkills passes every skill that may name uid (its creator, or a
// share holding it) to rewrite and stores the creator and share of those it
// changed, returning them as stored.
func rewriteSkills(ctx context.Context, tx *txn, now time.Time, uid string, rewrite func(*skills.Skill) bool) ([]*skills.Skill, error) {
	if rewrite == nil {
		return nil, nil
	}
	query, args := "SELECT "+skillColumns+" FROM skills ORDER BY slug", []any(nil)
	// A share names uid as a JSON string. Unless uid has a character that
	// JSON may escape (each encoder its own way), the text of the share
	// holds uid as it is: the rows to read are those whose share contains
	// it (LIKE may match more, never less), not the whole catalog.
	if !strings.ContainsAny(uid, "\"\\<>&\u2028\u2029") {
		query = "SELECT " + skillColumns + ` FROM skills WHERE creator = ? OR share LIKE ? ESCAPE '\' ORDER BY slug`
		args = []any{uid, "%" + strings.NewReplacer("%", `\%`, "_", `\_`).Replace(uid) + "%"}
	}
	all, err := queryAll(ctx, tx, scanSkill, query, args...)
	if err != nil {
		return nil, err
	}
	var out []*skills.Skill
	for _, s := range all {
		if !rewrite(s) {
			continue
		}
		s.UpdatedAt = now
		f, err := encodeSkill(s)
		if err != nil {
			return nil, fmt.Errorf("skill %q: %w", s.Slug, err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE skills SET creator = ?, share = ?, updated_at = ? WHERE slug = ?",
			s.Creator, f.share, f.updated, s.Slug); err != nil {
			return nil, err
		}
		stored, err := getSkill(ctx, tx, s.Slug)
		if err != nil {
			return nil, err
		}
		out = append(out, stored)
	}
	return out, nil
}

// AddTool registers a tool skills may depend on; a registered name is an
// error wrapping skills.ErrExists.
func (db *DB) AddTool(ctx context.Context, name string) error {
	if err := db.addName(ctx, "tools", name); err != nil {
		return fmt.Errorf("add tool %q: %w", name, err)
	}
	return nil
}

// DeleteTool unregisters a tool, or returns an error wrapping
// skills.ErrNotFound.
func (db *DB) DeleteTool(ctx context.Context, name string) error {
	if err := db.deleteName(ctx, "tools", "name", name); err != nil {
		return fmt.Errorf("delete tool %q: %w", name, err)
	}
	return nil
}

// Tools returns the registered tools, sorted.
func (db *DB) Tools(ctx context.Context) ([]string, error) {
	names, err := db.names(ctx, "tools")
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	return names, nil
}

// AddMCP registers an MCP server skills may depend on; a registered name is
// an error wrapping skills.ErrExists.
func (db *DB) AddMCP(ctx context.Context, name string) error {
	if err := db.addName(ctx, "mcp_servers", name); err != nil {
		return fmt.Errorf("add MCP server %q: %w", name, err)
	}
	return nil
}

// DeleteMCP unregisters an MCP server, or returns an error wrapping
// skills.ErrNotFound.
func (db *DB) DeleteMCP(ctx context.Context, name string) error {
	if err := db.deleteName(ctx, "mcp_servers", "name", name); err != nil {
		return fmt.Errorf("delete MCP server %q: %w", name, err)
	}
	return nil
}

// MCPs returns the registered MCP servers, sorted.
func (db *DB) MCPs(ctx context.Context) ([]string, error) {
	names, err := db.names(ctx, "mcp_servers")
	if err != nil {
		return nil, fmt.Errorf("list MCP servers: %w", err)
	}
	return names, nil
}

// addName inserts name into a one-column registry table. table is always a
// constant of this package, never input.
func (db *DB) addName(ctx context.Context, table, name string) error {
	if name == "" {
		return fmt.Errorf("empty name: %w", skills.ErrInvalid)
	}
	return db.write(ctx, func(tx *txn) error {
		return execOne(ctx, tx, skills.ErrExists, "INSERT INTO "+table+" (name) VALUES (?) ON CONFLICT DO NOTHING", name)
	})
}

// deleteName deletes the row whose key column is key; table and column are
// constants of this package.
func (db *DB) deleteName(ctx context.Context, table, column, key string) error {
	return db.write(ctx, func(tx *txn) error {
		return execOne(ctx, tx, skills.ErrNotFound, "DELETE FROM "+table+" WHERE "+column+" = ?", key)
	})
}

func (db *DB) names(ctx context.Context, table string) ([]string, error) {
	var names []string
	err := db.read(ctx, func(tx *txn) error {
		var err error
		names, err = queryStrings(ctx, tx, "SELECT name FROM "+table+" ORDER BY name")
		return err
	})
	return names, err
}

// execOne runs a statement that must change a row; none changed is none,
// the caller's sentinel (skills.ErrNotFound, skills.ErrExists).
func execOne(ctx context.Context, tx *txn, none error, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return none
	}
	return nil
}

// writeCount runs one statement in a write transaction of its own and
// returns how many rows it changed.
func (db *DB) writeCount(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// readAll runs queryAll in a read transaction of its own; errors say what
// was being done.
func readAll[T any](ctx context.Context, db *DB, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	var out []T
	err := db.read(ctx, func(tx *txn) (err error) {
		out, err = queryAll(ctx, tx, scan, query, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// queryAll runs a query and scans every row with scan; never nil.
func queryAll[T any](ctx context.Context, tx *txn, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	out := []T{}
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// queryStrings runs a query selecting one text column; never nil.
func queryStrings(ctx context.Context, tx *txn, query string, args ...any) ([]string, error) {
	return queryAll(ctx, tx, func(sc scanner) (s string, err error) { return s, sc.Scan(&s) }, query, args...)
}
