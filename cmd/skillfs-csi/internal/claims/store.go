package claims

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// Store holds the policy of a file, read again when the file changes: a
// new file that does not parse keeps the last good policy (and is logged);
// a file missing at start is a policy that denies everything (logged), and
// one removed later keeps the last good policy too (a ConfigMap's files
// are swapped through a symlink, never left missing on purpose).
type Store struct {
	path string
	log  *slog.Logger

	mu     sync.Mutex
	policy *Policy
	seen   fileStamp // of the last file read, good or not
}

// fileStamp tells a file's versions apart: a ConfigMap update replaces the
// file (a new inode); an editor may rewrite it in place (mtime, size).
type fileStamp struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
	ctime    syscall.Timespec
	missing  bool
}

// Open reads the policy at path (see Store).
func Open(path string, log *slog.Logger) *Store {
	s := &Store{path: path, log: log, policy: &Policy{}}
	s.Reload()
	return s
}

// Policy is the policy in force.
func (s *Store) Policy() *Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy
}

// Reload reads the file again if it changed since it was last read, and
// reports whether a new policy is now in force.
func (s *Store) Reload() bool {
	st, err := stamp(s.path)
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.seen == (fileStamp{})
	if err == nil && !first && st == s.seen {
		return false
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if first {
				s.log.Warn("no policy file: every claim is denied until it exists", "policy", s.path)
			} else if !s.seen.missing {
				s.log.Warn("policy file gone: the last one read stays in force", "policy", s.path)
			}
			s.seen = fileStamp{missing: true}
			return false
		}
		s.log.Error("policy file cannot be read: the last one read stays in force", "policy", s.path, "err", err)
		return false
	}
	s.seen = st
	p, err := readPolicy(s.path)
	if err != nil {
		s.log.Error("policy file refused: the last good one stays in force", "policy", s.path, "err", err)
		return false
	}
	s.policy = p
	s.log.Info("policy loaded", "policy", s.path, "rules", len(p.Claims))
	return true
}

// Watch reloads the file every interval until ctx ends.
func (s *Store) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Reload()
		}
	}
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, fmt.Errorf("stat %s: no file identity", path)
	}
	return fileStamp{dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(), mtime: fi.ModTime(), ctime: st.Ctim}, nil
}

func readPolicy(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
