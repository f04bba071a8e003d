package sandbox

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"skillfs/fs/bind"
	"skillfs/skills"
)

func TestParseStatus(t *testing.T) {
	c, err := ParseStatus([]byte("Name:\tsleep\nUid:\t1000\t1001\t1002\t1003\nGid:\t50\t51\t52\t53\nGroups:\t4 27 \nCapEff:\t0\n"))
	if err != nil || c.UID != 1003 || c.GID != 53 || !slices.Equal(c.Groups, []int{4, 27}) {
		t.Fatalf("ParseStatus = %+v, %v; want the filesystem ids 1003/53 and groups 4 27", c, err)
	}
	c, err = ParseStatus([]byte("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\n"))
	if err != nil || c.UID != 0 || len(c.Groups) != 0 || c.Groups == nil {
		t.Fatalf("no groups: %+v, %v", c, err)
	}
	for _, bad := range []string{
		"", "Gid:\t1\t1\t1\t1\n", "Uid:\t1\t1\t1\t1\n",
		"Uid:\t1\t1\t1\nGid:\t1\t1\t1\t1\n",
		"Uid:\t1\t1\t1\t-1\nGid:\t1\t1\t1\t1\n",
		"Uid:\t1\t1\t1\t4294967295\nGid:\t1\t1\t1\t1\n",
		"Uid:\t1\t1\t1\t1\nUid:\t0\t0\t0\t0\nGid:\t1\t1\t1\t1\n",
		"Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\tx\n",
	} {
		if _, err := ParseStatus([]byte(bad)); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("ParseStatus(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ParseStatus(self); err != nil || c.UID != os.Getuid() || c.GID != os.Getgid() {
		t.Fatalf("own status: %+v, %v", c, err)
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t1 2\n"))
	f.Add([]byte("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\n"))
	f.Add([]byte("Uid: 1 2 3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseStatus(b)
		if err != nil {
			if !errors.Is(err, skills.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if c.UID < 0 || c.GID < 0 || c.UID >= 1<<32-1 || c.Groups == nil {
			t.Fatalf("ParseStatus(%q) = %+v", b, c)
		}
		if !strings.Contains(string(b), "Uid:") || !strings.Contains(string(b), "Gid:") {
			t.Fatalf("ParseStatus(%q) = %+v without both id lines", b, c)
		}
	})
}

// TestBecomeChangesFilesystemIDsOnly: the thread that reads as a sandboxed
// process takes its filesystem ids and groups, and no capabilities; its
// real, effective and saved ids stay the daemon's (no process of the
// sandbox's uid may signal or trace it); no other thread changes.
func TestBecomeChangesFilesystemIDsOnly(t *testing.T) {
	self, err := openProcess(os.Getpid(), "", true)
	if err != nil {
		t.Fatal(err)
	}
	defer self.close()
	self.creds = Creds{UID: 1000, GID: 1001, Groups: []int{1002}}
	done := make(chan string, 1)
	go bind.OwnThread(func() {
		if err := self.become(); err != nil {
			done <- err.Error()
			return
		}
		// The thread's own status (the process's own /proc, in its
		// namespace: the daemon's here).
		b, err := os.ReadFile("/proc/thread-self/status")
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(b)
	})
	status := <-done
	for _, want := range []string{"Uid:\t0\t0\t0\t1000\n", "Gid:\t0\t0\t0\t1001\n", "Groups:\t1002 \n", "CapEff:\t0000000000000000\n", "CapPrm:\t0000000000000000\n"} {
		if !strings.Contains(status, want) {
			t.Errorf("thread status lacks %q:\n%s", want, status)
		}
	}
	own, _ := os.ReadFile("/proc/thread-self/status")
	if !strings.Contains(string(own), "Uid:\t0\t0\t0\t0\n") {
		t.Errorf("another thread changed:\n%s", own)
	}
}
