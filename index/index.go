// Package index keeps the catalog's index in SQLite: skills and their
// versions, users, registered tools and MCP servers, sessions with their
// pinned readable sets and mounts, and activations. It is the only package
// that speaks SQL; everything it returns is a type from package skills.
//
// Every method is one transaction. Writes go through a single connection that
// begins transactions with BEGIN IMMEDIATE, so a read-modify-write never
// races another writer, in this process or another one; reads use a separate
// pool of query-only connections so they neither wait for writers (WAL) nor
// can deadlock behind one. Commits are synchronous=FULL: a method that
// returns nil has made its write durable.
package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"runtime"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-sqlite3"

	"skillfs/skills"
)

// writerParams are the pragmas of the writer connection. synchronous=FULL
// fsyncs the WAL on every commit, so a first activation survives power loss
// once RecordActivation returns; NORMAL would only survive a process crash.
const writerParams = "_foreign_keys=on&_busy_timeout=10000&_journal_mode=WAL&_txlock=immediate&_synchronous=FULL"

// readerParams are the pragmas of the read pool. The journal mode is a
// property of the file, set by the writer; query_only makes an accidental
// write through a reader an error instead of a second writer.
const readerParams = "_foreign_keys=on&_busy_timeout=10000&_txlock=deferred&_query_only=on"

// DB is an open index. It is safe for concurrent use, and several DBs (in
// one process or several) may share a file.
type DB struct {
	path string
	w    *sql.DB // exactly one connection: every write transaction
	r    *sql.DB // query-only connections: every read
	now  func() time.Time

	skills skillCache // the catalog in memory (see SkillSet)
}

// Open opens the index at path, creating the file if needed, and brings its
// schema up to date.
func Open(path string) (*DB, error) {
	return open(context.Background(), path)
}

func open(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("open index: empty path: %w", skills.ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open index %q: %w", path, err)
	}
	db := &DB{path: path, now: time.Now}
	if db.w, err = openPool(abs, writerParams, 1); err != nil {
		return nil, fmt.Errorf("open index %q: connect: %w", path, classify(err))
	}
	var mode string
	if err := db.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.w.Close()
		return nil, fmt.Errorf("open index %q: read journal mode: %w", path, classify(err))
	}
	if mode != "wal" {
		db.w.Close()
		return nil, fmt.Errorf("open index %q: journal mode is %q, want wal (does the file system support it?)", path, mode)
	}
	if err := migrate(ctx, db.w, migrationFS); err != nil {
		db.w.Close()
		return nil, fmt.Errorf("open index %q: migrate: %w", path, classify(err))
	}
	// The readers open after the migrations, so they never see a file that
	// is not yet in WAL mode.
	if db.r, err = openPool(abs, readerParams, max(4, runtime.GOMAXPROCS(0))); err != nil {
		db.w.Close()
		return nil, fmt.Errorf("open index %q: connect readers: %w", path, err)
	}
	return db, nil
}

// openPool opens a pool of at most n connections to the file at abs and
// checks that one connection can be made.
func openPool(abs, params string, n int) (*sql.DB, error) {
	// A file: URI with an escaped path, so '?', '#' and '%' in directory
	// names cannot be taken for URI syntax.
	u := url.URL{Path: abs}
	p, err := sql.Open("sqlite3", "file:"+u.EscapedPath()+"?"+params)
	if err != nil {
		return nil, err
	}
	p.SetMaxOpenConns(n)
	p.SetMaxIdleConns(n)
	// Turning a new file to WAL needs an exclusive lock, and SQLite reports
	// SQLITE_BUSY at once rather than calling the busy handler when another
	// process is doing the same; so connecting is retried for as long as the
	// busy timeout would have waited.
	deadline := time.Now().Add(busyTimeout)
	for {
		err = p.Ping()
		if err == nil {
			return p, nil
		}
		if !isBusy(err) || time.Now().After(deadline) {
			p.Close()
			return nil, err
		}
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
	}
}

// busyTimeout matches _busy_timeout in the DSNs.
const busyTimeout = 10 * time.Second

// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
}

// Close closes the index. The last connection to close checkpoints the WAL.
func (db *DB) Close() error {
	err := db.r.Close()
	if werr := db.w.Close(); err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("close index %q: %w", db.path, err)
	}
	return nil
}

// Path returns the path the index was opened with.
func (db *DB) Path() string { return db.path }

// write runs fn in one immediate transaction on the writer connection and
// commits it if fn returns nil. fn must not call other methods of db that
// write: the writer connection is busy until fn returns.
func (db *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin write: %w", err)
	}
	// Also on panic: the writer connection must not stay locked.
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// read runs fn in one read transaction, so everything fn reads comes from
// the same snapshot.
func (db *DB) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	return fn(tx)
}

// isUniqueViolation reports whether err is a violation of a PRIMARY KEY or
// UNIQUE constraint.
func isUniqueViolation(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey || se.ExtendedCode == sqlite3.ErrConstraintUnique
}

// Earliest and latest times that fit in int64 unix nanoseconds.
var (
	minTime = time.Unix(0, math.MinInt64).UTC()
	maxTime = time.Unix(0, math.MaxInt64).UTC()
)

// encodeTime turns t into unix nanoseconds, or NULL for the zero time.
func encodeTime(t time.Time) (any, error) {
	if t.IsZero() {
		return nil, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return nil, fmt.Errorf("time %s out of range: %w", t.Format(time.RFC3339), skills.ErrInvalid)
	}
	return t.UnixNano(), nil
}

// decodeTime is the inverse of encodeTime; times come back in UTC.
func decodeTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// encodeList turns a list into JSON text; nil becomes [] so readers of the
// database never meet null. Strings must be valid UTF-8 because JSON would
// replace the invalid bytes and the list would not round-trip.
func encodeList(what string, l []string) (string, error) {
	if l == nil {
		l = []string{}
	}
	for _, s := range l {
		if !utf8.ValidString(s) {
			return "", fmt.Errorf("%s: %q is not valid UTF-8: %w", what, s, skills.ErrInvalid)
		}
	}
	b, err := json.Marshal(l)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return string(b), nil
}

// decodeList is the inverse of encodeList; it never returns nil.
func decodeList(what, text string) ([]string, error) {
	var l []string
	if err := json.Unmarshal([]byte(text), &l); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	if l == nil {
		l = []string{}
	}
	return l, nil
}

// encodeShare turns a share config into JSON text, as given.
func encodeShare(sh skills.Share) (string, error) {
	for _, sc := range []skills.Scope{sh.Read, sh.Manage} {
		if _, err := encodeList("share", append([]string{sc.Kind}, sc.IDs...)); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(sh)
	if err != nil {
		return "", fmt.Errorf("share: %w", err)
	}
	return string(b), nil
}

func decodeShare(text string) (skills.Share, error) {
	var sh skills.Share
	if err := json.Unmarshal([]byte(text), &sh); err != nil {
		return skills.Share{}, fmt.Errorf("decode share: %w", err)
	}
	return sh, nil
}

// validSourceType reports whether t is one of the catalog's source types.
func validSourceType(t string) bool {
	switch t {
	case skills.SourceBuiltin, skills.SourceUpload, skills.SourceRemote:
		return true
	}
	return false
}
