package node

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"skillfs/fs/fusetest"
)

// TestShareFolder: the folder is made root:group, 02750, through a
// descriptor of it; a symlink there is refused, and without CAP_FSETID
// (the kernel drops the setgid bit) the call fails saying so.
func TestShareFolder(t *testing.T) {
	fusetest.Require(t) // root: chown, and capabilities to drop
	dir := t.TempDir()
	target := filepath.Join(dir, "api")
	if err := shareFolder(target, 4242); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(target, &st); err != nil || st.Mode&0o7777 != 0o2750 || st.Uid != 0 || st.Gid != 4242 {
		t.Fatalf("shared folder: mode %04o of %d:%d, %v; want 02750 of 0:4242", st.Mode&0o7777, st.Uid, st.Gid, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := shareFolder(link, 4242); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("a symlink at the target: %v, want refused", err)
	}
	// Without CAP_FSETID, on a thread of its own (dropped with it).
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective &^= 1 << unix.CAP_FSETID
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		errc <- shareFolder(filepath.Join(dir, "nofsetid"), 4242)
	}()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "needs CAP_FSETID") {
		t.Fatalf("without CAP_FSETID: %v, want the call refused naming it", err)
	}
}
