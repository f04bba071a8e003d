package index

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// leftover is a ? with the digits after it.
var leftover = regexp.MustCompile(`\?([0-9]*)`)

func TestDollarParams(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT ?, ?, ?", "SELECT $1, $2, $3"},
		{"WHERE a = ?1 AND b = ?2 OR c = ?1", "WHERE a = $1 AND b = $2 OR c = $1"},
		// A bare ? takes one more than the highest number before it, as
		// SQLite numbers it.
		{"?2, ?, ?1, ?", "$2, $3, $1, $4"},
		{"x = '?' AND y = ?", "x = '?' AND y = $1"},
		{"x = 'it''s ?' AND y = ?", "x = 'it''s ?' AND y = $1"},
		{`SELECT "odd?col" FROM t WHERE a = ?`, `SELECT "odd?col" FROM t WHERE a = $1`},
		{"SELECT ? -- why?\n, ?", "SELECT $1 -- why?\n, $2"},
		{"SELECT /* ? */ ?", "SELECT /* ? */ $1"},
		{"CAST(? AS json)", "CAST($1 AS json)"},
		{"?0 and ?99999999999999999999", "?0 and ?99999999999999999999"},
		{"'unterminated ?", "'unterminated ?"},
	} {
		if got := dollarParams(tc.in); got != tc.want {
			t.Errorf("dollarParams(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := sqliteDialect.rebind(tc.in); got != tc.in {
			t.Errorf("SQLite's rebind(%q) = %q, want it unchanged", tc.in, got)
		}
		if got, again := postgresDialect.rebind(tc.in), postgresDialect.rebind(tc.in); got != tc.want || again != got {
			t.Errorf("PostgreSQL's rebind(%q) = %q then %q, want %q", tc.in, got, again, tc.want)
		}
	}
}

// FuzzDollarParams: rewriting never panics and is done in one go (a second
// pass changes nothing); text without a ? is left as it is; and in text
// without quotes or comments every ? becomes a $N.
func FuzzDollarParams(f *testing.F) {
	for _, s := range []string{"SELECT ?", "?1 ?2 ?", "'?' \"?\" -- ?\n /* ? */ ?", "??", "?0", "'", "/*", "--"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out := dollarParams(q)
		if again := dollarParams(out); again != out {
			t.Fatalf("second pass over %q changed %q to %q", q, out, again)
		}
		if !strings.Contains(q, "?") && out != q {
			t.Fatalf("%q without parameters became %q", q, out)
		}
		if !strings.ContainsAny(q, `'"-/`) {
			// Only what SQLite would not take either may stay: ?0, and
			// numbers too large for an int.
			for _, m := range leftover.FindAllStringSubmatch(out, -1) {
				if n, err := strconv.Atoi(m[1]); m[1] == "" || err == nil && n != 0 {
					t.Fatalf("%q kept parameter %s: %q", q, m[0], out)
				}
			}
			if strings.Count(out, "$") != strings.Count(q, "$")+strings.Count(q, "?")-strings.Count(out, "?") {
				t.Fatalf("%q: every ? rewritten must become one $N: %q", q, out)
			}
		}
	})
}
