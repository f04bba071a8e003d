package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// connect opens dsn, closed when the test ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Each caller gets a database of its own, empty, and it is gone after the
// test; the server keeps its data across Stop and Start, and takes no
// connection while stopped.
func TestDatabasesAreFreshAndSurviveARestart(t *testing.T) {
	ctx := context.Background()
	var kept string
	t.Run("first", func(t *testing.T) {
		a, b := Database(t), Database(t)
		if a == b {
			t.Fatalf("two callers got the same database %s", a)
		}
		ca, cb := connect(t, a), connect(t, b)
		if _, err := ca.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if _, err := cb.Exec(ctx, "SELECT x FROM t"); err == nil {
			t.Fatal("a table of one database is in the other")
		}
		kept = a
		s := Server(t)
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		if s.Running() {
			t.Fatal("stopped server says it runs")
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if c, err := pgx.Connect(cctx, a); err == nil {
			c.Close(ctx)
			t.Fatal("connected to a stopped server")
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		var x int
		if err := connect(t, a).QueryRow(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 1 {
			t.Fatalf("after a restart: %d, %v", x, err)
		}
		if _, err := os.Stat(s.DataDir()); err != nil {
			t.Fatal(err)
		}
	})
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c, err := pgx.Connect(cctx, kept); err == nil {
		c.Close(ctx)
		t.Fatal("the database outlived its test")
	}
}
