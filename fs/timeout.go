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
	"time"
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
// default request timeout, which each may set for the length of its mount.
var sysctlMu sync.Mutex

// withRequestTimeout runs mount, which must not return before the kernel
// has processed the connection's INIT, with the kernel's default request
// timeout set to d (when positive), and puts the previous default back
// afterwards, even if mount fails. The kernel reads the default when it
// processes INIT; go-fuse cannot put a timeout in its INIT reply, and the
// sysctl is the only other way to give our connection one.
//
// The default is system-wide: a FUSE mount made by another process in the
// same instant gets ours too.
//
// It returns the timeout the kernel applies to the new connection, 0 for
// none.
func withRequestTimeout(d time.Duration, log *slog.Logger, mount func() error) (time.Duration, error) {
	sysctlMu.Lock()
	defer sysctlMu.Unlock()
	defPath := filepath.Join(fuseSysctlDir, "default_request_timeout")
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
			if err := writeSysctl(defPath, want); err != nil {
				log.Warn("set the kernel's FUSE request timeout; its default applies", "err", err, "default_s", prev)
			} else {
				applied = want
				defer func() {
					if err := writeSysctl(defPath, prev); err != nil {
						log.Error("restore the kernel's default FUSE request timeout", "path", defPath, "value", prev, "err", err)
					}
				}()
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
