package fs

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fuseSysctlDir holds the kernel's FUSE request timeout settings (Linux
// 6.14 and later), in seconds, 0 meaning none.
const fuseSysctlDir = "/proc/sys/fs/fuse"

const (
	// minRequestTimeout is the kernel's timer period, and the shortest
	// timeout it applies.
	minRequestTimeout = 15 * time.Second
	// maxRequestTimeoutSecs is the largest value the sysctls take.
	maxRequestTimeoutSecs = 1<<16 - 1
)

// sysctlMu serialises the mounts of this process around the kernel's
// default request timeout; lockSysctl extends that to every process on the
// host.
var sysctlMu sync.Mutex

// sysctlLockFile is the host-wide lock every skillfs process holds while it
// swaps the kernel's default request timeout in and out around a mount:
// two daemons starting at once must not take each other's temporary value
// for the default to put back.
var sysctlLockFile = func() string {
	if fi, err := os.Stat("/run"); err == nil && fi.IsDir() {
		return "/run/skillfs-fuse-timeout.lock"
	}
	return filepath.Join(os.TempDir(), "skillfs-fuse-timeout.lock")
}()

// lockSysctl takes sysctlMu and the host-wide lock, and returns the unlock.
// Without the lock file (not root) only this process is held off.
func lockSysctl(log *slog.Logger) func() {
	sysctlMu.Lock()
	f, err := os.OpenFile(sysctlLockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		log.Warn("take the host's FUSE timeout lock; other processes are not held off", "file", sysctlLockFile, "err", err)
		return sysctlMu.Unlock
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
		sysctlMu.Unlock()
	}
}

// withRequestTimeout runs mount, which must not return before the kernel
// has processed the connection's INIT, with the kernel's default request
// timeout set to d (when positive), and puts the previous default back
// afterwards, even if mount fails, unless someone else changed it meanwhile.
// The kernel reads the default when it processes INIT; go-fuse cannot put a
// timeout in its INIT reply, and the sysctl is the only other way to give
// our connection one.
//
// The default is system-wide: a FUSE mount made by another process in the
// same instant gets ours too. So that a process killed while ours is set
// does not leave it to every later FUSE mount on the host, record (if not
// empty) names a file that holds the previous and our value meanwhile; a
// record found at the start is first put right (see recoverRequestTimeout).
//
// It returns the timeout the kernel applies to the new connection, 0 for
// none.
func withRequestTimeout(d time.Duration, record string, log *slog.Logger, mount func() error) (time.Duration, error) {
	defer lockSysctl(log)()
	defPath := filepath.Join(fuseSysctlDir, "default_request_timeout")
	if record != "" {
		recoverRequestTimeout(defPath, record, log)
	}
	prev, err := readSysctl(defPath)
	if errors.Is(err, iofs.ErrNotExist) {
		if d > 0 {
			log.Warn("the kernel has no FUSE request timeout (Linux 6.14 or later has): a hung daemon hangs readers until it exits")
		}
		return 0, mount()
	}
	if err != nil {
		log.Warn("read the kernel's FUSE request timeout; leaving it alone", "err", err)
		return 0, mount()
	}
	limit, err := readSysctl(filepath.Join(fuseSysctlDir, "max_request_timeout"))
	if err != nil {
		log.Warn("read the kernel's maximum FUSE request timeout", "err", err)
		limit = 0
	}
	applied := prev
	if d > 0 {
		want := uint64(min((d+time.Second-1)/time.Second, maxRequestTimeoutSecs))
		if want != prev {
			if err := setRequestTimeout(defPath, record, prev, want); err != nil {
				log.Warn("set the kernel's FUSE request timeout; its default applies", "err", err, "default_s", prev)
			} else {
				applied = want
				defer restoreRequestTimeout(defPath, record, prev, want, log)
			}
		}
	}
	if err := mount(); err != nil {
		return 0, err
	}
	timeout := effectiveTimeout(applied, limit)
	if timeout > 0 {
		log.Info("FUSE request timeout", "timeout", timeout, "asked", d)
	} else {
		log.Info("no FUSE request timeout: a hung daemon hangs readers until it exits")
	}
	return timeout, nil
}

// setRequestTimeout sets the default at defPath to want, first recording
// prev and want in record (when not empty) so that a crash before the
// restore can be put right.
func setRequestTimeout(defPath, record string, prev, want uint64) error {
	if record != "" {
		if err := writeTimeoutRecord(record, prev, want); err != nil {
			return err
		}
	}
	if err := writeSysctl(defPath, want); err != nil {
		if record != "" {
			removeTimeoutRecord(record)
		}
		return err
	}
	return nil
}

// restoreRequestTimeout puts prev back at defPath if it still holds want,
// the value we set: another value is someone else's change, and stays. The
// record goes once nothing is left to restore; if the restore fails it
// stays, for the next mount to retry.
func restoreRequestTimeout(defPath, record string, prev, want uint64, log *slog.Logger) {
	cur, err := readSysctl(defPath)
	switch {
	case err != nil:
		log.Error("read the kernel's default FUSE request timeout to restore it", "path", defPath, "value", prev, "err", err)
		return
	case cur != want:
		log.Warn("the kernel's default FUSE request timeout was changed by someone else while mounting: left as it is",
			"path", defPath, "value", cur, "ours", want, "previous", prev)
	default:
		if err := writeSysctl(defPath, prev); err != nil {
			log.Error("restore the kernel's default FUSE request timeout", "path", defPath, "value", prev, "err", err)
			return
		}
	}
	if record != "" {
		removeTimeoutRecord(record)
	}
}

// recoverRequestTimeout puts right what a process killed while its value
// was set left: if record exists and the default at defPath still holds the
// value it recorded as ours, the previous value it recorded is written back.
// Either way the record then goes, unless the write failed.
func recoverRequestTimeout(defPath, record string, log *slog.Logger) {
	prev, ours, err := readTimeoutRecord(record)
	if errors.Is(err, iofs.ErrNotExist) {
		return
	}
	if err != nil {
		log.Warn("unreadable FUSE request timeout record: removed, the kernel's default left as it is", "path", record, "err", err)
		removeTimeoutRecord(record)
		return
	}
	cur, err := readSysctl(defPath)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
	case err != nil:
		log.Error("read the kernel's default FUSE request timeout to restore it", "path", defPath, "record", record, "err", err)
		return
	case cur != ours:
		log.Info("the kernel's default FUSE request timeout a previous run left set was changed since: left as it is",
			"path", defPath, "value", cur, "ours", ours, "previous", prev)
	default:
		if err := writeSysctl(defPath, prev); err != nil {
			log.Error("restore the kernel's default FUSE request timeout a previous run left set", "path", defPath,
				"value", prev, "record", record, "err", err)
			return
		}
		log.Warn("restored the kernel's default FUSE request timeout a previous run left set", "path", defPath,
			"value", prev, "was", ours)
	}
	removeTimeoutRecord(record)
}

// The record holds one line: "previous=P ours=O\n".
const timeoutRecordFormat = "previous=%d ours=%d\n"

// writeTimeoutRecord writes the record durably (writeDurably).
func writeTimeoutRecord(path string, prev, ours uint64) error {
	if err := writeDurably(path, fmt.Appendf(nil, timeoutRecordFormat, prev, ours)); err != nil {
		return fmt.Errorf("write FUSE request timeout record: %w", err)
	}
	return nil
}

// writeDurably writes a file whole or not at all: to a temporary file,
// synced, renamed into place, and the directory synced.
func writeDurably(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := createTemp(tmp, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// createTemp makes the temporary file tmp anew, 0600, with extra open
// flags: a stale one is removed first, and a name that exists after all
// (a symlink planted meanwhile) is refused, never followed.
func createTemp(tmp string, flags int) (*os.File, error) {
	if err := os.Remove(tmp); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("remove stale %q: %w", tmp, err)
	}
	return os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|flags, 0o600)
}

// checkPrivateDir makes directory dir (0700) if missing, and checks that
// it is a directory of this process's user that no one else may write to:
// what it holds decides what a later server trusts.
func checkPrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch uid := os.Geteuid(); {
	case fi.Mode()&iofs.ModeSymlink != 0:
		return fmt.Errorf("%q is a symbolic link, not a directory", dir)
	case !fi.IsDir():
		return fmt.Errorf("%q is not a directory", dir)
	case st == nil || int(st.Uid) != uid:
		return fmt.Errorf("%q is not owned by this process's user (uid %d)", dir, uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%q may be written by others (mode %v): make it 0700", dir, fi.Mode().Perm())
	}
	return nil
}

func readTimeoutRecord(path string) (prev, ours uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscanf(string(b), timeoutRecordFormat, &prev, &ours); err != nil {
		return 0, 0, fmt.Errorf("read %s: %q: %w", path, b, err)
	}
	return prev, ours, nil
}

func removeTimeoutRecord(path string) {
	if err := os.Remove(path); err == nil {
		syncDir(filepath.Dir(path))
	}
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// effectiveTimeout is the timeout the kernel derives from its default and
// maximum (in seconds) for a connection whose INIT reply names none.
func effectiveTimeout(def, limit uint64) time.Duration {
	t := def
	if limit > 0 && (t == 0 || t > limit) {
		t = limit
	}
	if t == 0 {
		return 0
	}
	return max(time.Duration(t)*time.Second, minRequestTimeout)
}

func readSysctl(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nil
}

func writeSysctl(path string, v uint64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strconv.FormatUint(v, 10)); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
