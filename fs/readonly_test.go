package fs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// openErr opens and closes a file, returning the open's error.
func openErr(path string, flags int) error {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o644)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// TestReadOnly tries every mutating call on the mount. It runs twice: on the
// mount as served (read-only in the kernel too) and on one the kernel would
// let writes through, to prove the daemon refuses each call itself.
func TestReadOnly(t *testing.T) {
	st := newStore(t)
	ops := []struct {
		name string
		op   func(dir string) error
	}{
		{"write existing file", func(d string) error { return os.WriteFile(d+"/alpha/SKILL.md", []byte("x"), 0o644) }},
		{"create file", func(d string) error { return openErr(d+"/alpha/new.txt", unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL) }},
		{"create skill", func(d string) error { return openErr(d+"/new-skill", unix.O_CREAT|unix.O_WRONLY) }},
		{"create in root", func(d string) error { return openErr(filepath.Dir(d)+"/new-session", unix.O_CREAT|unix.O_WRONLY) }},
		{"mkdir", func(d string) error { return unix.Mkdir(d+"/alpha/newdir", 0o755) }},
		{"mkdir skill", func(d string) error { return unix.Mkdir(d+"/new-skill", 0o755) }},
		{"mkdir session", func(d string) error { return unix.Mkdir(filepath.Dir(d)+"/new-session", 0o755) }},
		{"unlink", func(d string) error { return unix.Unlink(d + "/alpha/SKILL.md") }},
		{"unlink nested", func(d string) error { return unix.Unlink(d + "/alpha/references/guide.md") }},
		{"rmdir", func(d string) error { return unix.Rmdir(d + "/alpha/assets") }},
		{"rmdir skill", func(d string) error { return unix.Rmdir(d + "/alpha") }},
		{"rmdir session", func(d string) error { return unix.Rmdir(d) }},
		{"rename file", func(d string) error { return unix.Rename(d+"/alpha/SKILL.md", d+"/alpha/OTHER.md") }},
		{"rename over file", func(d string) error {
			return unix.Rename(d+"/alpha/references/guide.md", d+"/alpha/SKILL.md")
		}},
		{"rename skill", func(d string) error { return unix.Rename(d+"/alpha", d+"/omega") }},
		{"exchange skills", func(d string) error {
			return unix.Renameat2(unix.AT_FDCWD, d+"/alpha", unix.AT_FDCWD, d+"/beta", unix.RENAME_EXCHANGE)
		}},
		{"link", func(d string) error { return unix.Link(d+"/alpha/SKILL.md", d+"/alpha/hard") }},
		{"symlink", func(d string) error { return unix.Symlink("SKILL.md", d+"/alpha/sym") }},
		{"mknod", func(d string) error { return unix.Mknod(d+"/alpha/fifo", unix.S_IFIFO|0o644, 0) }},
		{"chmod", func(d string) error { return unix.Chmod(d+"/alpha/SKILL.md", 0o777) }},
		{"chmod dir", func(d string) error { return unix.Chmod(d+"/alpha", 0o777) }},
		{"chmod session", func(d string) error { return unix.Chmod(d, 0o777) }},
		{"chown", func(d string) error { return unix.Chown(d+"/alpha/SKILL.md", 1, 1) }},
		{"truncate", func(d string) error { return unix.Truncate(d+"/alpha/SKILL.md", 0) }},
		{"utimes", func(d string) error {
			return unix.UtimesNano(d+"/alpha/SKILL.md", []unix.Timespec{{Sec: 1}, {Sec: 1}})
		}},
		{"setxattr", func(d string) error { return unix.Setxattr(d+"/alpha/SKILL.md", "user.test", []byte("1"), 0) }},
		{"removexattr", func(d string) error { return unix.Removexattr(d+"/alpha/SKILL.md", "user.test") }},
		{"open O_WRONLY", func(d string) error { return openErr(d+"/alpha/SKILL.md", unix.O_WRONLY) }},
		{"open O_RDWR", func(d string) error { return openErr(d+"/alpha/SKILL.md", unix.O_RDWR) }},
		{"open O_TRUNC", func(d string) error { return openErr(d+"/alpha/SKILL.md", unix.O_RDONLY|unix.O_TRUNC) }},
		{"open O_APPEND", func(d string) error { return openErr(d+"/alpha/SKILL.md", unix.O_RDONLY|unix.O_APPEND) }},
		{"open O_CREAT existing", func(d string) error {
			return openErr(d+"/alpha/SKILL.md", unix.O_WRONLY|unix.O_CREAT)
		}},
		{"open O_CREAT new", func(d string) error { return openErr(d+"/alpha/NEW.md", unix.O_RDONLY|unix.O_CREAT) }},
		{"open O_TMPFILE", func(d string) error { return openErr(d+"/alpha", unix.O_TMPFILE|unix.O_RDWR) }},
	}
	// The daemon's own refusals are seen with a kernel mount left writable
	// and every open asked for (Opens): without OPEN requests the kernel
	// alone decides opens, and the daemon refuses the writes that follow
	// (TestReadOnlyNoOpenWrites). Extended attributes are switched off
	// altogether (ENOSYS, which the kernel reports as EOPNOTSUPP) where
	// the kernel's read-only check does not come first.
	for _, mode := range []struct {
		name     string
		writable bool
	}{{"kernel read-only", false}, {"daemon only", true}} {
		t.Run(mode.name, func(t *testing.T) {
			sink := &fakeSink{}
			srv := mountTest(t, Options{Sink: sink, kernelWritable: mode.writable, Opens: mode.writable})
			dir := setSession(t, srv, "sess", View{st.alpha1, st.beta1})
			for _, tc := range ops {
				t.Run(tc.name, func(t *testing.T) {
					err := tc.op(dir)
					switch {
					case tc.name == "open O_APPEND" && !mode.writable:
						// A read-only open with O_APPEND writes nothing: the
						// kernel allows it on any read-only filesystem.
						if err != nil {
							t.Errorf("err = %v, want nil", err)
						}
					case strings.HasSuffix(tc.name, "xattr") && mode.writable:
						if !errors.Is(err, syscall.EOPNOTSUPP) {
							t.Errorf("err = %v, want EOPNOTSUPP", err)
						}
					case !errors.Is(err, syscall.EROFS):
						t.Errorf("err = %v, want EROFS", err)
					}
				})
			}
			if n := sink.total(); n != 0 {
				t.Errorf("refused opens recorded %d activations", n)
			}
			files, _ := walkAll(t, os.DirFS(dir))
			if len(files) != len(alphaBetaFiles) {
				t.Errorf("files after the attempts: %q", files)
			}
			data, err := os.ReadFile(filepath.Join(dir, "alpha", "SKILL.md"))
			if err != nil || string(data) != manifest("alpha", "alpha version one") {
				t.Errorf("SKILL.md after the attempts: %q, %v", data, err)
			}
		})
	}
	stored, err := os.ReadFile(filepath.Join(st.alpha1.Dir, "SKILL.md"))
	if err != nil || string(stored) != manifest("alpha", "alpha version one") {
		t.Errorf("stored SKILL.md after the attempts: %q, %v", stored, err)
	}
}

// TestReadOnlyUnreachable covers the calls the kernel never forwards on a
// file that can only be opened for reading (write, fallocate, copy): the
// daemon would refuse them as well.
func TestReadOnlyUnreachable(t *testing.T) {
	f := &nodeFS{s: &Server{}}
	if _, st := f.Write(nil, &fuse.WriteIn{}, []byte("x")); st != erofs {
		t.Errorf("write: %v, want EROFS", st)
	}
	if _, st := f.Writev(nil, &fuse.WriteIn{}, [][]byte{[]byte("x")}); st != erofs {
		t.Errorf("writev: %v, want EROFS", st)
	}
	if st := f.Fallocate(nil, &fuse.FallocateIn{Length: 4096}); st != erofs {
		t.Errorf("fallocate: %v, want EROFS", st)
	}
	if _, st := f.CopyFileRange(nil, &fuse.CopyFileRangeIn{Len: 4096}); st != erofs {
		t.Errorf("copy_file_range: %v, want EROFS", st)
	}
}

// TestReadOnlyNoOpenWrites: with the kernel mount left writable and no OPEN
// requests, a file opens for writing without the daemon, and the daemon
// refuses every write.
func TestReadOnlyNoOpenWrites(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{Sink: &fakeSink{}, kernelWritable: true})
	dir := setSession(t, srv, "sess", View{st.alpha1})
	f, err := os.OpenFile(filepath.Join(dir, "alpha", "SKILL.md"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("open for writing: %v", err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("x")); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write: %v, want EROFS", err)
	}
	data, err := os.ReadFile(filepath.Join(st.alpha1.Dir, "SKILL.md"))
	if err != nil || string(data) != manifest("alpha", "alpha version one") {
		t.Errorf("stored SKILL.md after the write: %q, %v", data, err)
	}
}
