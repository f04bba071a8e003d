// Package index keeps the catalog's index: skills and their versions,
// users, registered tools and MCP servers, sessions with their pinned
// readable sets and mounts, activations and the event log. It is the only
// package that speaks SQL; what it returns are the domain's types (package
// skills), with a version's content listing (skills/store) and the
// statistics of a comparison (skills/diff).
//
// The index lives in one of two backends, chosen by what Open is given. A
// path is a SQLite file, the embedded default: one host's. A postgres:// URL
// is a PostgreSQL database that a fleet of hosts shares. Both hold the same
// schema (each has its own migrations), and every method has one
// implementation in SQL both understand; dialect.go holds what differs.
//
// Every method is one transaction, and writes take turns: on SQLite they go
// through a single connection that begins transactions with BEGIN
// IMMEDIATE, so a read-modify-write never races another writer, in this
// process or another one; on PostgreSQL every write transaction, on every
// host, first takes one advisory lock. Reads use a separate pool and read
// one snapshot each, so they neither wait for writers nor can deadlock
// behind one. A method that returns nil has made its write durable (SQLite:
// synchronous=FULL; PostgreSQL: the server's commit). An error that means
// the PostgreSQL server cannot be reached wraps skills.ErrUnavailable.
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
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
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

// connectTimeout bounds a connection attempt to a PostgreSQL server whose
// URL sets no connect_timeout: an unreachable server fails a call in
// seconds, with skills.ErrUnavailable, rather than hanging it.
const connectTimeout = 5 * time.Second

// writerSettings are the PostgreSQL settings of the writer connection,
// unless the URL sets them. A write waits for its turn as long as a SQLite
// writer waits for the file's lock (busyTimeout), then fails; and the
// server ends a write transaction left idle for a minute, such as one of a
// host that vanished mid-write, so that it does not hold every host's
// write lock until the server notices the connection is dead.
var writerSettings = map[string]string{
	"lock_timeout":                        strconv.FormatInt(busyTimeout.Milliseconds(), 10),
	"idle_in_transaction_session_timeout": "60s",
}

// DB is an open index. It is safe for concurrent use, and several DBs (in
// one process or several) may share a file or a database.
type DB struct {
	path string // as opened, any password hidden
	file string // SQLite: the file's real absolute path, as opened (see Files)
	d    *dialect
	w    *sql.DB // the writers: one connection
	r    *sql.DB // the readers: query-only connections
	now  func() time.Time

	pg     *pgx.ConnConfig // PostgreSQL: how Watch connects
	closed chan struct{}   // closed by Close: ends the watchers

	skills skillCache // the catalog in memory (see SkillSet)
}

// Open opens the index at target, a SQLite file (created if needed) or a
// postgres:// (or postgresql://) URL of an existing database, and brings
// its schema up to date. A target CheckTarget refuses is refused before
// anything is opened or created. A PostgreSQL server that cannot be reached is an
// error wrapping skills.ErrUnavailable.
func Open(target string) (*DB, error) {
	return open(context.Background(), target)
}

func open(ctx context.Context, target string) (*DB, error) {
	if err := CheckTarget(target); err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	if isPostgresURL(target) {
		return openPostgres(ctx, target)
	}
	return openSQLite(ctx, target)
}

// openSQLite opens the SQLite file at path.
func openSQLite(ctx context.Context, path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open index %q: %w", path, err)
	}
	db := &DB{path: path, file: abs, d: sqliteDialect, now: time.Now, closed: make(chan struct{})}
	if db.w, err = openPool(abs, writerParams, 1); err != nil {
		return nil, fmt.Errorf("open index %q: connect: %w", path, classify(err))
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		db.file = real // as the kernel names the descriptors SQLite holds
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
	if err := migrate(ctx, db.w, db.d, db.d.migrations); err != nil {
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

// openPostgres opens the PostgreSQL database at target: a pool of one
// connection for writes (they take turns anyway, see postgresDialect) and
// one of read-only connections.
func openPostgres(ctx context.Context, target string) (*DB, error) {
	shown, secret := redactURL(target), secretsOf(target)
	if _, err := url.Parse(target); err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error itself quotes the URL, password and all
		}
		return nil, fmt.Errorf("open index %q: not a URL (%v): %w", shown, redact(err, secret), skills.ErrInvalid)
	}
	cfg, err := pgx.ParseConfig(target)
	if err != nil {
		return nil, fmt.Errorf("open index %q: %w: %w", shown, skills.ErrInvalid, redact(err, secret))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "skillfs"
	}
	db := &DB{path: shown, d: postgresDialect, now: time.Now, pg: cfg, closed: make(chan struct{})}
	wcfg := cfg.Copy()
	for name, value := range writerSettings {
		if _, ok := wcfg.RuntimeParams[name]; !ok {
			wcfg.RuntimeParams[name] = value
		}
	}
	db.w = stdlib.OpenDB(*wcfg)
	db.w.SetMaxOpenConns(1)
	db.w.SetMaxIdleConns(1)
	// Readers cannot write, as SQLite's are query-only.
	rcfg := cfg.Copy()
	rcfg.RuntimeParams["default_transaction_read_only"] = "on"
	db.r = stdlib.OpenDB(*rcfg)
	n := max(4, min(16, runtime.GOMAXPROCS(0)))
	db.r.SetMaxOpenConns(n)
	db.r.SetMaxIdleConns(n)
	db.r.SetConnMaxIdleTime(5 * time.Minute)
	fail := func(what string, err error) (*DB, error) {
		db.r.Close()
		db.w.Close()
		return nil, fmt.Errorf("open index %q: %s: %w", shown, what, redact(classify(err), secret))
	}
	if err := db.w.PingContext(ctx); err != nil {
		return fail("connect", err)
	}
	if err := migrate(ctx, db.w, db.d, db.d.migrations); err != nil {
		return fail("migrate", err)
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

// Close closes the index and ends its watchers (see Watch). The last
// connection to a SQLite file to close checkpoints the WAL.
func (db *DB) Close() error {
	select {
	case <-db.closed:
	default:
		close(db.closed)
	}
	err := db.r.Close()
	if werr := db.w.Close(); err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("close index %q: %w", db.path, err)
	}
	return nil
}

// Path returns the path or URL the index was opened with; a URL's password
// shows as xxxxx.
func (db *DB) Path() string { return db.path }

// Backend names the index's backend: "sqlite" or "postgres".
func (db *DB) Backend() string { return db.d.name }

// write runs fn in one write transaction (see the package comment) and
// commits it if fn returns nil. fn must not call other methods of db that
// write: the writer connection is busy until fn returns.
func (db *DB) write(ctx context.Context, fn func(tx *txn) error) error {
	return writeTx(ctx, db.w, db.d, fn)
}

// writeUnordered is write without the turn every other write takes on
// PostgreSQL (its advisory lock; SQLite's single writer still serialises
// it), for statements whose order against other writes cannot matter:
// inserting content-addressed chunks where they are missing. A long upload
// of them then holds up no other host's writes.
func (db *DB) writeUnordered(ctx context.Context, fn func(tx *txn) error) error {
	return writeTxLocked(ctx, db.w, db.d, "", fn)
}

// writeTx runs fn in one write transaction on the writer pool p of a
// backend of dialect d, and commits it if fn returns nil.
func writeTx(ctx context.Context, p *sql.DB, d *dialect, fn func(tx *txn) error) error {
	return writeTxLocked(ctx, p, d, d.lockWrite, fn)
}

// writeTxLocked is writeTx with lock run first ("" for none).
func writeTxLocked(ctx context.Context, p *sql.DB, d *dialect, lock string, fn func(tx *txn) error) error {
	tx, err := begin(ctx, p, nil)
	if err != nil {
		return fmt.Errorf("begin write: %w", classify(err))
	}
	// Also on panic: the writer connection must not stay locked.
	defer tx.Rollback()
	if lock != "" {
		if _, err := tx.ExecContext(ctx, lock); err != nil {
			return fmt.Errorf("wait for the write lock: %w", classify(err))
		}
	}
	if err := fn(&txn{tx, d}); err != nil {
		return classify(err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", classify(err))
	}
	return nil
}

// begin begins a transaction on p. A PostgreSQL connection that the server
// closed while it sat in the pool (the server restarted) fails the first
// statement sent on it, and only that: the transaction is begun again, on
// another connection, as long as it is such a connection that failed.
// Failing to make a new connection is not retried.
func begin(ctx context.Context, p *sql.DB, opts *sql.TxOptions) (*sql.Tx, error) {
	for tries := p.Stats().MaxOpenConnections; ; tries-- {
		tx, err := p.BeginTx(ctx, opts)
		var ce *pgconn.ConnectError
		if err == nil || tries <= 0 || ctx.Err() != nil || !unreachable(err) || errors.As(err, &ce) {
			return tx, err
		}
	}
}

// read runs fn in one read transaction, so everything fn reads comes from
// the same snapshot.
func (db *DB) read(ctx context.Context, fn func(tx *txn) error) error {
	tx, err := begin(ctx, db.r, db.d.readTx)
	if err != nil {
		return fmt.Errorf("begin read: %w", classify(err))
	}
	defer tx.Rollback()
	return classify(fn(&txn{tx, db.d}))
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
