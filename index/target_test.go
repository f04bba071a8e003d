package index

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/skills"
)

// TestCheckTarget: what can name an index is taken; what cannot be meant
// as one is refused, wrapping skills.ErrInvalid, without repeating the
// target (a keyword string's password above all), and Open creates no
// file for it.
func TestCheckTarget(t *testing.T) {
	for _, ok := range []string{"postgres://u:p@db/skillfs?sslmode=verify-full", "POSTGRESQL://db/x", "/var/lib/skillfs/index.db",
		"index.db", "./host=db.sqlite", "/srv/a=b/index.db", "/srv/with space/index.db", "/srv/a#b?c%d/index.db"} {
		if err := CheckTarget(ok); err != nil {
			t.Errorf("CheckTarget(%q) = %v", ok, err)
		}
	}
	const secret = "S3CRET-pw"
	dir := t.TempDir()
	t.Chdir(dir)
	for _, bad := range []string{"host=db.internal port=5432 dbname=skillfs user=skillfs password=" + secret,
		"password = " + secret, "dbname=x", "sqlite:///srv/" + secret + ".db", "mysql://u:" + secret + "@h/x", "file:" + secret + ".db?mode=rwc",
		"", " index.db", "index.db\n", "in\x00dex.db", "postgres://u:" + secret + "@h:bad port/x"} {
		err := CheckTarget(bad)
		if !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("CheckTarget(%q) = %v, want ErrInvalid", bad, err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("CheckTarget(%q) repeats the secret: %v", bad, err)
		}
		db, err := Open(bad)
		if err == nil {
			db.Close()
			t.Errorf("Open(%q) opened", bad)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q) repeats the secret: %v", bad, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("refused targets made files: %v", left)
	}
}
