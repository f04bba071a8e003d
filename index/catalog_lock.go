package index

import (
	"context"
	"database/sql/driver"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// catalogLockKey is the PostgreSQL advisory lock CatalogLock holds; it is
// not writeLockKey, which every write transaction takes inside.
const catalogLockKey = writeLockKey + 1

// CatalogLock takes the catalog's lock for every process using this index,
// on every host: a caller that checks the catalog (a dependency, a share,
// whether a slug is free) and then writes what it decided holds it across
// both, so no other host changes the catalog in between. On PostgreSQL it
// is a session advisory lock on a connection of its own (the server
// releases it if this process dies); on SQLite a flock beside the file.
// Waiting ends with an error after the index's busy timeout.
func (db *DB) CatalogLock(ctx context.Context) (unlock func(), err error) {
	if db.d.name == "postgres" {
		return db.pgCatalogLock(ctx)
	}
	f, err := os.OpenFile(db.path+".catalog-lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("take the catalog lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("take the catalog lock: %w", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// pgCatalogLock is CatalogLock on PostgreSQL.
func (db *DB) pgCatalogLock(ctx context.Context) (unlock func(), err error) {
	conn, err := db.r.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("take the catalog lock: %w", classify(err))
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock("+strconv.Itoa(catalogLockKey)+")"); err != nil {
		conn.Close()
		return nil, fmt.Errorf("take the catalog lock (another host holds it?): %w", classify(err))
	}
	return func() {
		// A failed unlock leaves the lock with the connection: closing it
		// for good (not back to the pool) releases it on the server.
		if _, err := conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock("+strconv.Itoa(catalogLockKey)+")"); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}, nil
}
