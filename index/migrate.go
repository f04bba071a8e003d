package index

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	iofs "io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

// embedded holds the schema migrations of each backend, named
// NNN_what.sql: migrations/ for SQLite, migrations_pg/ for PostgreSQL. Each
// set is numbered on its own.
//
//go:embed migrations/*.sql migrations_pg/*.sql
var embedded embed.FS

// SchemaVersionError reports an index whose schema was migrated by a newer
// program than this one; opening it could corrupt data the newer schema
// relies on.
type SchemaVersionError struct {
	Found int // newest migration recorded in the index
	Known int // newest migration this program knows
}

// Error says which versions clash and what to do.
func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("schema version %d is newer than this program's %d; upgrade skillfs", e.Found, e.Known)
}

// migration is one schema step.
type migration struct {
	version int
	file    string
	sql     string
}

// parseMigrationName returns the version of a migration file named like
// "001_init.sql": decimal digits, an underscore, a name, ".sql".
func parseMigrationName(file string) (int, error) {
	digits, rest, ok := strings.Cut(file, "_")
	if !ok || digits == "" || !strings.HasSuffix(rest, ".sql") || len(rest) == len(".sql") {
		return 0, fmt.Errorf("migration file %q: want NNN_name.sql", file)
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("migration file %q: version %q is not a decimal number", file, digits)
		}
	}
	v, err := strconv.Atoi(digits)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("migration file %q: version %q must be a positive number", file, digits)
	}
	return v, nil
}

// loadMigrations reads the migrations in fsys, ordered by version.
func loadMigrations(fsys iofs.FS) ([]migration, error) {
	files, err := iofs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var ms []migration
	seen := map[int]string{}
	for _, f := range files {
		v, err := parseMigrationName(f)
		if err != nil {
			return nil, err
		}
		if prev, ok := seen[v]; ok {
			return nil, fmt.Errorf("migrations %q and %q share version %d", prev, f, v)
		}
		seen[v] = f
		b, err := iofs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", f, err)
		}
		ms = append(ms, migration{version: v, file: f, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the migrations of fsys that the database has not seen,
// in order, each in its own write transaction together with its row in
// schema_migrations, so a crash leaves every migration applied or absent.
// Several processes (hosts) may migrate at once: writes take turns (see
// dialect.lockWrite), and each step re-checks once it has its turn.
func migrate(ctx context.Context, p *sql.DB, d *dialect, fsys iofs.FS) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	var newest sql.NullInt64
	err = writeTx(ctx, p, d, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, d.schemaMigrations); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&newest); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].version
	}
	if newest.Valid && int(newest.Int64) > known {
		return &SchemaVersionError{Found: int(newest.Int64), Known: known}
	}
	for _, m := range ms {
		if err := writeTx(ctx, p, d, func(tx *txn) error { return applyMigration(ctx, tx, m) }); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration applies m in tx unless schema_migrations says it was.
func applyMigration(ctx context.Context, tx *txn, m migration) error {
	var done bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)", m.version).Scan(&done); err != nil {
		return fmt.Errorf("migration %q: %w", m.file, err)
	}
	if done {
		return nil
	}
	// As it is: a migration's text is not a query of this package, and
	// without parameters it may hold several statements.
	if _, err := tx.tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migration %q: %w", m.file, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, file, applied_at) VALUES (?, ?, ?)", m.version, m.file, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("migration %q: record: %w", m.file, err)
	}
	return nil
}
