package catalog

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Processes starting together on a new data directory agree on one
// identity: none fails, and the directory is not left "damaged".
func TestConcurrentFirstOpen(t *testing.T) {
	for round := range 30 {
		home := filepath.Join(t.TempDir(), "home")
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := Open(context.Background(), home, Options{})
				if err == nil {
					c.Close()
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: a concurrent first open failed: %v", round, err)
			}
		}
		c, err := Open(context.Background(), home, Options{})
		if err != nil {
			t.Fatalf("round %d: the data directory after concurrent first opens: %v", round, err)
		}
		c.Close()
	}
}

// The goroutines of one process share one flock: the first import to finish
// must not drop the lock for the others, or another process's sweep takes
// their work away.
func TestImportLockHeldUntilTheLastHolder(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	c, err := Open(context.Background(), home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	unlockA, err := c.sharedLock()
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := c.sharedLock()
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(home, tmpDir, "import-B")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	unlockA()
	other, err := Open(context.Background(), home, Options{}) // a CLI command meanwhile
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	if _, err := os.Stat(work); err != nil {
		t.Fatalf("an import's work was swept while it ran: %v", err)
	}
	// An exclusive holder in the same process waits for the last share.
	got := make(chan bool, 1)
	go func() {
		release, ok, _ := c.imp.exclusive(false)
		if ok {
			release()
		}
		got <- ok
	}()
	if <-got {
		t.Fatal("exclusive while an import holds the lock")
	}
	unlockB()
	release, ok, err := c.imp.exclusive(false)
	if err != nil || !ok {
		t.Fatalf("exclusive once every import is done: %v %v", ok, err)
	}
	release()
}

// An upload is protected from sweeps from its first byte.
func TestUploadIsNotSweptWhileItStreams(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	c, err := Open(context.Background(), home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := c.PrepareUpload(context.Background(), ImportRequest{}, UploadManifest, "SKILL.md", pr)
		done <- err
	}()
	pw.Write([]byte("---\nname: x\n"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(home, tmpDir, "upload-*", "SKILL.md")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upload never reached tmp")
		}
	}
	other, err := Open(context.Background(), home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	pw.Write([]byte("description: y\n---\nbody\n"))
	pw.Close()
	if err := <-done; err != nil {
		t.Fatalf("upload after a concurrent command started: %v", err)
	}
}
