package index

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"

	"skillfs/skills"
	"skillfs/skills/git"
)

// dialect is what the two backends of the index do differently: how a query
// names its parameters, the few statements that have no portable form, the
// schema's migrations, and how writes take turns. Every method of DB has one
// implementation, written in SQL both backends understand; these are its
// only branches.
type dialect struct {
	name string // what Backend reports
	pg   bool   // PostgreSQL: parameters are $N, errors are pgconn's

	// migrations are the backend's schema steps; schemaMigrations creates
	// the table that records which ran.
	migrations       iofs.FS
	schemaMigrations string
	// lockWrite is run first in every write transaction, so that writes
	// take turns ("" when beginning the transaction already does that).
	lockWrite string
	// readTx are the options of every read transaction.
	readTx *sql.TxOptions
	// textList is a table of the strings of a JSON list passed as one
	// parameter, in a column named value: one parameter however long the
	// list.
	textList string
	// labelsOf is a table of the labels of the session of the row of
	// sessions at hand, in columns key and value.
	labelsOf string
	// restartEvents are the statements that make the ids events are given
	// from now on higher than ?1 (and never lower than they were).
	restartEvents []string

	rebound sync.Map // query text → the same in $N form (PostgreSQL)
}

// writeLockKey is the PostgreSQL advisory lock every write transaction of
// every host takes first: "skillfs" in ASCII.
const writeLockKey = 0x736b696c6c6673

// sqliteDialect is SQLite's: a file, one writer at a time by BEGIN
// IMMEDIATE (see writerParams), readers on snapshots of the WAL.
var sqliteDialect = &dialect{
	name:       "sqlite",
	migrations: subFS("migrations"),
	schemaMigrations: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		file       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`,
	textList: "json_each(?)",
	labelsOf: "json_each(sessions.labels)",
	restartEvents: []string{
		"UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'events'",
		"INSERT INTO sqlite_sequence (name, seq) SELECT 'events', ?1 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events')",
	},
}

// postgresDialect is PostgreSQL's, a server several hosts share.
//
// Writes take one advisory lock, the same on every host, before anything
// else, and hold it to the end of the transaction: the methods of DB rely on
// writes never interleaving (a read-modify-write, a check of a user in the
// transaction that stores the user's session, ids and change numbers that
// grow in the order of commits), as SQLite's single writer gives them. The
// write transactions are READ COMMITTED, so each statement after the lock
// sees every write committed before it was granted; a REPEATABLE READ
// snapshot would be taken by the lock statement itself, before the wait.
// Reads are REPEATABLE READ READ ONLY, so each method reads one snapshot.
var postgresDialect = &dialect{
	name:       "postgres",
	pg:         true,
	migrations: subFS("migrations_pg"),
	schemaMigrations: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT NOT NULL PRIMARY KEY,
		file       TEXT   NOT NULL,
		applied_at BIGINT NOT NULL
	)`,
	lockWrite: "SELECT pg_advisory_xact_lock(" + strconv.Itoa(writeLockKey) + ")",
	readTx:    &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	textList:  "json_array_elements_text(CAST(? AS json))",
	labelsOf:  "json_each_text(CAST(sessions.labels AS json))",
	// A sequence is not rolled back with its transaction: a restart that
	// does not commit still skips ids, which costs nothing.
	restartEvents: []string{
		"SELECT setval('events_id_seq', ?1) FROM events_id_seq WHERE (CASE WHEN is_called THEN last_value ELSE last_value - 1 END) < ?1",
	},
}

// schemaTables are the tables of the index's schema.
var schemaTables = []string{
	"activations", "api_tokens", "applied_spills", "change_counters", "content_chunks", "content_entries", "content_parts",
	"content_versions", "curated_skills", "curated_sources", "events", "hosts", "installs", "mcp_servers", "meta",
	"read_audit", "schema_migrations", "session_binds", "session_tokens", "sessions", "skill_changes", "skills", "tools",
	"users", "version_diffstats", "versions",
}

// problems returns what a check of the index finds wrong, at most 20
// findings: on SQLite those of its quick_check; on PostgreSQL, whose server
// checks its own files, a schema that misses tables or is not the newest
// this program knows.
func (d *dialect) problems(ctx context.Context, tx *txn) ([]string, error) {
	if !d.pg {
		found, err := queryStrings(ctx, tx, "PRAGMA quick_check(20)")
		return slices.DeleteFunc(found, func(s string) bool { return s == "ok" }), err
	}
	var problems []string
	missing, err := queryStrings(ctx, tx, `SELECT name FROM `+d.textList+` AS t (name)
		WHERE to_regclass(quote_ident(name)) IS NULL ORDER BY name`, jsonIDs(schemaTables))
	if err != nil {
		return nil, err
	}
	for _, t := range missing {
		problems = append(problems, "table "+t+" is missing")
	}
	if slices.Contains(missing, "schema_migrations") {
		return problems, nil
	}
	ms, err := loadMigrations(d.migrations)
	if err != nil {
		return nil, err
	}
	var newest sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&newest); err != nil {
		return nil, err
	}
	if want := ms[len(ms)-1].version; newest.Int64 != int64(want) {
		problems = append(problems, fmt.Sprintf("schema version %d, want %d", newest.Int64, want))
	}
	return problems, nil
}

// subFS is the embedded directory dir.
func subFS(dir string) iofs.FS {
	sub, err := iofs.Sub(embedded, dir)
	if err != nil {
		panic(err) // the directories are embedded at build time
	}
	return sub
}

// rebind returns query as the backend takes it: as it is for SQLite; for
// PostgreSQL with ? and ?N written $N, where a bare ? takes one more than
// the highest number before it, as SQLite numbers them. A ? in a string
// literal, a quoted identifier or a comment is left alone (the package
// never writes PostgreSQL's E” strings, dollar quotes or ? operators).
// Queries are rewritten once: the package's query texts are a fixed set.
func (d *dialect) rebind(query string) string {
	if !d.pg || !strings.Contains(query, "?") {
		return query
	}
	if q, ok := d.rebound.Load(query); ok {
		return q.(string)
	}
	q := dollarParams(query)
	d.rebound.Store(query, q)
	return q
}

// dollarParams writes the ? and ?N parameters of query as $N.
func dollarParams(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0 // the highest parameter number so far
	for i := 0; i < len(query); {
		end := i + 1
		switch c := query[i]; {
		case c == '\'' || c == '"':
			// To the closing quote; a doubled quote inside reads as two
			// literals side by side, which copies the same.
			end = len(query)
			if j := strings.IndexByte(query[i+1:], c); j >= 0 {
				end = i + 1 + j + 1
			}
		case strings.HasPrefix(query[i:], "--"):
			end = len(query)
			if j := strings.IndexByte(query[i:], '\n'); j >= 0 {
				end = i + j
			}
		case strings.HasPrefix(query[i:], "/*"):
			end = len(query)
			if j := strings.Index(query[i+2:], "*/"); j >= 0 {
				end = i + 2 + j + 2
			}
		case c == '?':
			for end < len(query) && query[end] >= '0' && query[end] <= '9' {
				end++
			}
			num := n + 1
			if end > i+1 {
				v, err := strconv.Atoi(query[i+1 : end])
				if err != nil || v == 0 {
					break // not a parameter SQLite takes either: left as it is
				}
				num = v
			}
			n = max(n, num)
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(num))
			i = end
			continue
		}
		b.WriteString(query[i:end])
		i = end
	}
	return b.String()
}

// txn is a transaction of the index. The package's queries go through it,
// so that they reach the backend in its dialect.
type txn struct {
	tx *sql.Tx
	d  *dialect
}

// ExecContext runs a statement.
func (t *txn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.d.rebind(query), args...)
}

// QueryContext runs a query.
func (t *txn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.d.rebind(query), args...)
}

// QueryRowContext runs a query of at most one row.
func (t *txn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.d.rebind(query), args...)
}

// PrepareContext prepares a statement run many times in the transaction.
func (t *txn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, t.d.rebind(query))
}

// isUniqueViolation reports whether err is a violation of a PRIMARY KEY or
// UNIQUE constraint, on either backend.
func isUniqueViolation(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey || se.ExtendedCode == sqlite3.ErrConstraintUnique
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// classify marks the errors callers act on: SQLite's "this is not a
// database" and "the database is corrupt" as skills.ErrDamaged, so callers
// can say how to repair it; a PostgreSQL server that cannot be reached, or
// went away, as skills.ErrUnavailable; text PostgreSQL cannot store (a NUL
// byte, invalid UTF-8), which SQLite takes, as skills.ErrInvalid.
func classify(err error) error {
	var pe *pgconn.PgError
	switch {
	case err == nil || errors.Is(err, skills.ErrDamaged) || errors.Is(err, skills.ErrUnavailable) || errors.Is(err, skills.ErrInvalid):
		return err
	case corrupt(err):
		return fmt.Errorf("%w: %w", skills.ErrDamaged, err)
	case unreachable(err):
		return fmt.Errorf("%w: %w", skills.ErrUnavailable, err)
	case errors.As(err, &pe) && (pe.Code == "22021" || pe.Code == "22P05"):
		return fmt.Errorf("text the index cannot store: %w: %w", skills.ErrInvalid, err)
	}
	return err
}

// corrupt reports whether err is SQLite's "not a database" or "corrupt".
func corrupt(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB)
}

// unreachable reports whether err says the PostgreSQL server could not be
// reached or the connection to it was lost: a refused or timed-out dial, a
// dropped connection, or the server saying it is shutting down or starting
// (SQLSTATE class 08, 57P01-57P03). An error the server reports about the
// request itself (a wrong password, no such database) is not one.
func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// isPostgresURL reports whether target names a PostgreSQL database rather
// than a SQLite file.
func isPostgresURL(target string) bool {
	lower := strings.ToLower(target)
	return strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://")
}

// hidden stands for a password wherever the index would show one.
const hidden = "xxxxx"

// redactURL is a PostgreSQL URL as the index shows it: with any password,
// in the user part or the password parameter, replaced by hidden. A URL
// that does not parse shows as its scheme only.
func redactURL(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		scheme, _, _ := strings.Cut(target, ":")
		return scheme + "://…"
	}
	q, changed := u.Query(), false
	for k := range q {
		if isSecretParam(k) {
			q.Set(k, hidden)
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// isSecretParam reports whether a URL parameter holds a secret: password,
// sslpassword and any other parameter named for one, by the rule every
// URL skillfs shows follows (git.SecretParam).
func isSecretParam(k string) bool {
	return git.SecretParam(k)
}

// secretsOf lists the secrets target carries: its password and the
// values of its secret parameters (see isSecretParam).
func secretsOf(target string) []string {
	u, err := url.Parse(target)
	if err != nil {
		return nil
	}
	var out []string
	if p, ok := u.User.Password(); ok && p != "" {
		out = append(out, p)
	}
	for k, vs := range u.Query() {
		if isSecretParam(k) {
			for _, v := range vs {
				if v != "" {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// redactedError is an error whose text never shows its secrets;
// errors.Is and errors.As see the error as it was.
type redactedError struct {
	err     error
	secrets []string
}

// Error is the error's text with each secret replaced by hidden.
func (e *redactedError) Error() string {
	text := e.err.Error()
	for _, s := range e.secrets {
		text = strings.ReplaceAll(text, s, hidden)
	}
	return text
}

// Unwrap is the error as it was.
func (e *redactedError) Unwrap() error { return e.err }

// redact hides secrets in the text of err.
func redact(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	return &redactedError{err, secrets}
}
