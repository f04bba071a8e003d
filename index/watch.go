package index

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// changesChannel is the PostgreSQL notification channel the schema's
// triggers send on (see migrations_pg) when the catalog changes: a skill
// (its row, so also its current version), a user, a registry, a session
// created or given other pins or closed.
const changesChannel = "skillfs_changes"

// Backoff between attempts to reconnect a watcher.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// Watch returns a channel that receives when another process (on this host
// or another) may have changed the catalog, until ctx ends or db is closed.
// It has a buffer of one and never blocks the sender: changes that arrive
// while a signal is pending are folded into it, so a receiver re-reads what
// it keeps (SkillSet, users, sessions) once per signal.
//
// On PostgreSQL a connection of its own listens for the notifications the
// schema's triggers send. It reconnects while ctx lives, with backoff, and
// sends once each time it starts listening, the first time too, since
// changes made while it was not listening were missed. On SQLite nothing
// notifies: the channel never receives, and the caller keeps polling (as it
// must on PostgreSQL too, more slowly, should a notification be lost).
func (db *DB) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	if db.pg == nil {
		return ch
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-db.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	go db.listen(ctx, ch)
	return ch
}

// listen connects, listens and signals ch until ctx ends.
func (db *DB) listen(ctx context.Context, ch chan<- struct{}) {
	signal := func() {
		select {
		case ch <- struct{}{}:
		default: // one is pending: it covers this change too
		}
	}
	wait := watchRetryMin
	for ctx.Err() == nil {
		if db.listenOnce(ctx, signal) {
			wait = watchRetryMin // it was listening: the server was up
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, watchRetryMax)
	}
}

// listenOnce makes one connection, listens on it and signals each
// notification until the connection fails or ctx ends. It reports whether
// it got as far as listening.
func (db *DB) listenOnce(ctx context.Context, signal func()) bool {
	conn, err := pgx.ConnectConfig(ctx, db.pg)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+changesChannel); err != nil {
		return false
	}
	signal()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true
		}
		signal()
	}
}
