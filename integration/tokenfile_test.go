package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTokenFileMustBePrivate: serve refuses a token file others can read or
// write, that another user owns (and so can rewrite), that is not a regular
// file, that is larger than 4 KiB or empty, saying how to fix it; exit 5.
// A token file that does not exist is exit 3.
func TestTokenFileMustBePrivate(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(writeTokenFile(t, "x", 0o644), link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, says string
	}{
		{"world-readable", writeTokenFile(t, "x", 0o644), "chmod 600"},
		{"group-readable", writeTokenFile(t, "x", 0o640), "chmod 600"},
		{"world-writable", writeTokenFile(t, "x", 0o602), "chmod 600"},
		{"symlink to a world-readable file", link, "chmod 600"},
		{"fifo", fifo, "not a regular file"},
		{"directory", dir, "not a regular file"},
		{"larger than 4 KiB", writeTokenFile(t, strings.Repeat("x", 4096), 0o600), "larger than 4096 bytes"},
		{"empty", writeTokenFile(t, " \n", 0o600), "is empty"},
	}
	if os.Geteuid() == 0 {
		theirs := writeTokenFile(t, "x", 0o600)
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, file, says string }{"owned by another user", theirs, "owned by uid 65534, not by uid 0"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r result
			within(t, 30*time.Second, "serve with a bad token file", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := e.command(ctx, "serve", "--listen", "127.0.0.1:0", "--token-file", tc.file)
				var out, errb strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &errb
				err := cmd.Run()
				r = result{stdout: out.String(), stderr: errb.String()}
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					r.code = ee.ExitCode()
					return nil
				}
				return fmt.Errorf("serve did not fail: %v", err)
			})
			if r.code != 5 || !strings.Contains(r.stderr, tc.says) || !strings.Contains(r.stderr, tc.file) {
				t.Fatalf("exit %d, stderr %q; want 5 naming the file and saying %q", r.code, r.stderr, tc.says)
			}
		})
	}
	missing := filepath.Join(dir, "missing")
	if r := e.run("serve", "--listen", "127.0.0.1:0", "--token-file", missing); r.code != 3 || !strings.Contains(r.stderr, missing) {
		t.Errorf("a missing token file: exit %d, stderr %q; want 3 naming it", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(e.home, "skillfs.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused serve got as far as the socket: %v", err)
	}
}
