package fs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// mountEntry is one line of /proc/thread-self/mountinfo (the calling
// thread's mount namespace, which may differ from the process's), reduced to what we use.
type mountEntry struct {
	Mountpoint string
	FSType     string
	Source     string
	Dev        string // major:minor of the mounted filesystem
}

// MountsOf lists the mount points, in this process's mount namespace, of
// the mounts whose source is source (a filesystem's Options.FsName, which
// binds of it show too).
func MountsOf(source string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := parseMountinfo(f)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range all {
		if m.Source == source {
			out = append(out, m.Mountpoint)
		}
	}
	return out, nil
}

// parseMountinfo reads the mountinfo format of proc(5). Lines that do not
// have its shape are skipped: the kernel writes the file, and one odd line
// must not hide the others.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// Fields are separated by single spaces; spaces inside them are escaped.
		fields := strings.Split(sc.Text(), " ")
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		if len(fields) < 10 {
			continue
		}
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(fields) {
			continue
		}
		out = append(out, mountEntry{
			Dev:        fields[2],
			Mountpoint: unescapeMountinfo(fields[4]),
			FSType:     unescapeMountinfo(fields[sep+1]),
			Source:     unescapeMountinfo(fields[sep+2]),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space,
// \011, \012, \134) in mountinfo fields.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] <= '3' && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// escapeMountinfo is the kernel's escaping, the inverse of unescapeMountinfo.
func escapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// mountsAt returns the mounts whose mount point is path, bottom first.
func mountsAt(path string) ([]mountEntry, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	defer f.Close()
	all, err := parseMountinfo(f)
	if err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	var at []mountEntry
	for _, m := range all {
		if m.Mountpoint == path {
			at = append(at, m)
		}
	}
	return at, nil
}

// isDead reports whether err says a FUSE mount has lost its server.
func isDead(err error) bool {
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED)
}

// ClearStale detaches a dead FUSE mount at path, such as one a crashed
// daemon left behind ("transport endpoint is not connected"). It does
// nothing if path is not a mount point, and fails with an error wrapping
// skills.ErrExists if a live filesystem is mounted there.
func ClearStale(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("clear stale mount at %q: %w", path, err)
	}
	// Resolve symlinks in the parent only: the mount point itself may be dead.
	if parent, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(parent, filepath.Base(abs))
	}
	// Mounts can be stacked; each pass removes the dead one on top.
	for range 16 {
		at, err := mountsAt(abs)
		if err != nil {
			return fmt.Errorf("clear stale mount at %q: %w", abs, err)
		}
		if len(at) == 0 {
			return nil
		}
		// statfs always reaches the filesystem's server; stat may be answered
		// from the kernel's attribute cache long after the server died.
		var st unix.Statfs_t
		err = unix.Statfs(abs, &st)
		if err == nil {
			return fmt.Errorf("clear stale mount at %q: a live %s filesystem is mounted there: %w",
				abs, at[len(at)-1].FSType, skills.ErrExists)
		}
		if !isDead(err) {
			return fmt.Errorf("clear stale mount at %q: %w", abs, err)
		}
		if err := unix.Unmount(abs, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("clear stale mount at %q: unmount: %w", abs, err)
		}
	}
	return fmt.Errorf("clear stale mount at %q: too many mounts stacked: %w", abs, skills.ErrLimit)
}
