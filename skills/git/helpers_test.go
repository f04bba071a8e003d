package git

// Test helpers shared with other packages' tests, copied here until a
// shared test-helper package serves them all.

import (
	"errors"
	"os"
	"testing"
)

// Copied from stage_test.go.
// assertAbsent fails unless p does not exist.
func assertAbsent(tb testing.TB, p string) {
	tb.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		tb.Fatalf("%s was left behind (lstat: %v)", p, err)
	}
}

// Copied from stage_test.go.
const testManifest = "---\nname: demo\ndescription: A demo skill.\n---\nUse it.\n"

// Copied from zip_test.go.
func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
