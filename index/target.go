package index

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"skillfs/skills"
)

// CheckTarget says whether target can name an index, as Open takes it (see
// TargetProblem). The error wraps skills.ErrInvalid and never repeats
// target, which may hold a password.
func CheckTarget(target string) error {
	if problem := TargetProblem(target); problem != "" {
		return fmt.Errorf("%s: %w", problem, skills.ErrInvalid)
	}
	return nil
}

// TargetProblem says why target cannot name an index, or "" when it can: a
// postgres:// (or postgresql://) URL that parses, or the path of a SQLite
// file. A path is refused when it cannot be one a person meant: empty, with
// control characters or surrounding white space, a URL of another scheme, a
// SQLite URI (file:…), or a PostgreSQL keyword string ("host=db
// password=…"), which would otherwise be taken for a file named after the
// password. A file whose name starts like a keyword string is written
// ./NAME. The answer never repeats target, which may hold a password.
func TargetProblem(target string) string {
	switch {
	case target == "":
		return "empty"
	case isPostgresURL(target):
		if _, err := url.Parse(target); err != nil {
			return "a postgres:// URL that does not parse (in a password, write '#', '?', '/' and '%' as %23, %3F, %2F and %25)"
		}
	case strings.ContainsFunc(target, unicode.IsControl):
		return "holds a control character"
	case strings.TrimSpace(target) != target:
		return "begins or ends with white space"
	case isKeywordString(target):
		return "a PostgreSQL keyword string (key=value …), which is not taken: give the database as a postgres:// URL " +
			"(postgres://USER:PASSWORD@HOST:PORT/DBNAME), or a SQLite file named like one as ./NAME"
	case strings.Contains(target, "://"):
		return "a URL, but not a postgres:// or postgresql:// one: the index is a PostgreSQL database or the path of a SQLite file"
	case strings.HasPrefix(strings.ToLower(target), "file:"):
		return "a SQLite URI: give the file's path"
	}
	return ""
}

// isKeywordString reports whether s starts as a libpq keyword string does:
// a keyword, optional spaces, '='.
func isKeywordString(s string) bool {
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || i > 0 && s[i] >= '0' && s[i] <= '9') {
		i++
	}
	if i == 0 {
		return false
	}
	rest := strings.TrimLeft(s[i:], " \t")
	return strings.HasPrefix(rest, "=")
}
