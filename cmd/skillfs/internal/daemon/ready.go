package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/activation"
	"skillfs/index"
	"skillfs/skills"
)

// readyTimeout bounds each readiness check: a hung mount or disk makes the
// daemon not ready, not the probe hang.
const readyTimeout = 5 * time.Second

// fuseSuperMagic is the f_type statfs reports for a FUSE mount.
const fuseSuperMagic = 0x65735546

// Ready checks, each within readyTimeout, that the mount answers as this
// daemon's FUSE filesystem, that the index's files are those the daemon
// has open and the index takes a durable write, and that the content store
// can be read.
func (d *Daemon) Ready(ctx context.Context) api.Readiness {
	checks := []api.Check{
		d.check("mount", &d.readyBusy.mount, d.checkMount),
		d.check("index", &d.readyBusy.index, func() error {
			if err := d.checkIndexFiles(); err != nil {
				return err // a write would succeed, into a file no one else reads
			}
			ctx, cancel := context.WithTimeout(ctx, readyTimeout)
			defer cancel()
			err := d.db.CheckWritable(ctx)
			if err != nil && d.cat.Shared() {
				// A shared index that does not answer is unreachable.
				err = errors.New(skills.Message(activation.AsUnavailable(err)))
			}
			return err
		}),
		d.check("store", &d.readyBusy.store, d.checkStore),
	}
	r := api.Readiness{Ready: true, Checks: checks}
	for _, c := range checks {
		r.Ready = r.Ready && c.OK
	}
	return r
}

// check runs fn within readyTimeout. A check still waiting from an earlier
// call (busy) is not started again: it reports that it is waiting.
func (d *Daemon) check(name string, busy *atomic.Bool, fn func() error) api.Check {
	if !busy.CompareAndSwap(false, true) {
		return api.Check{Name: name, Error: "an earlier check has not answered yet"}
	}
	res := make(chan error, 1)
	go func() {
		err := fn()
		busy.Store(false) // before the answer: a call after it finds the check free
		res <- err
	}()
	select {
	case err := <-res:
		if err != nil {
			return api.Check{Name: name, Error: err.Error()}
		}
		return api.Check{Name: name, OK: true}
	case <-time.After(readyTimeout):
		return api.Check{Name: name, Error: fmt.Sprintf("no answer within %v", readyTimeout)}
	}
}

func (d *Daemon) checkMount() error {
	select {
	case <-d.fs.Done():
		return fmt.Errorf("the skill filesystem at %s is no longer served", d.mountRoot)
	default:
	}
	var st unix.Statfs_t
	if err := unix.Statfs(d.mountRoot, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", d.mountRoot, err)
	}
	if st.Type != fuseSuperMagic {
		return fmt.Errorf("%s is not the skill filesystem (detached?)", d.mountRoot)
	}
	return nil
}

// checkIndexFiles says, when files of a SQLite index that the daemon has
// open were removed or replaced under it (see index.DB.CheckFiles), what
// that means and what to do.
func (d *Daemon) checkIndexFiles() error {
	err := d.db.CheckFiles()
	var re *index.ReplacedError
	if errors.As(err, &re) {
		return fmt.Errorf("%w: the daemon's writes (sessions, activations) now reach no other process, and theirs do not reach it. "+
			"Restart the daemon with a clean stop (SIGTERM, `systemctl restart skillfs`), which writes what it holds into the index "+
			"when no other process has it open, then run `skillfs check`. Never delete or move the index's -wal or -shm beside a running daemon", err)
	}
	return err
}

func (d *Daemon) checkStore() error {
	dir := filepath.Join(d.cat.Store().Root, "skills")
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open the content store: %w", err)
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the content store: %w", err)
	}
	return nil
}
