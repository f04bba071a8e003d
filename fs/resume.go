package fs

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// What survives what, for a mount with a keeper (Options.Keeper):
//
//   - The daemon killed, or stopped with Detach: the connection survives
//     (the keeper holds it); readers pause, and the next Mount with the
//     same keeper and StateDir resumes: requests the dead server had read
//     but not answered are sent again, node ids and handles stay valid,
//     every bind in every namespace keeps working. The kernel's request
//     timeout (Options.RequestTimeout) still bounds the pause: a request
//     unanswered that long aborts the connection.
//   - The keeper killed while the daemon runs: nothing is lost while the
//     daemon runs, but the keeper's copy is gone: once a keeper is back,
//     Rekeep hands it the connection again (fs Puts by itself only once, on
//     a fresh mount). A daemon crash before that ends the connection.
//   - Both gone: the connection ends (ENOTCONN); the next Mount clears the
//     dead mount and mounts anew.
//   - Unmount: the keeper's copy is dropped and the mount ends, as without
//     a keeper.
//   - The machine restarting ends everything: the state in StateDir then
//     names a connection no keeper holds, and Mount mounts anew.

// stateName is the file in StateDir describing the kept connection.
const stateName = "mount.json"

// stateFormat is the version of the state file and the journal.
const stateFormat = 1

// maxStateBytes bounds the state file.
const maxStateBytes = 64 << 10

// mountState is what a server taking the connection back needs to know
// of its INIT exchange and its mount.
type mountState struct {
	Format      int           `json:"format"`
	Mountpoint  string        `json:"mountpoint"`
	Dev         string        `json:"dev"`     // major:minor of the mount
	Options     string        `json:"options"` // what of Options shapes the connection (optionsKey)
	InitRequest []byte        `json:"init_request"`
	InitReply   []byte        `json:"init_reply"`
	Timeout     time.Duration `json:"timeout_ns"` // the request timeout the kernel applies
}

// parseState decodes and checks a state file.
func parseState(b []byte) (*mountState, error) {
	if len(b) > maxStateBytes {
		return nil, fmt.Errorf("mount state: more than %d bytes: %w", maxStateBytes, skills.ErrLimit)
	}
	var st mountState
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("mount state: %v: %w", err, skills.ErrInvalid)
	}
	if dec.More() {
		return nil, fmt.Errorf("mount state: data after the object: %w", skills.ErrInvalid)
	}
	switch {
	case st.Format != stateFormat:
		return nil, fmt.Errorf("mount state: format %d, this build reads %d: %w", st.Format, stateFormat, skills.ErrInvalid)
	case !filepath.IsAbs(st.Mountpoint):
		return nil, fmt.Errorf("mount state: mountpoint %q is not absolute: %w", st.Mountpoint, skills.ErrInvalid)
	case st.Dev == "":
		return nil, fmt.Errorf("mount state: no device: %w", skills.ErrInvalid)
	case st.Timeout < 0:
		return nil, fmt.Errorf("mount state: negative request timeout: %w", skills.ErrInvalid)
	}
	if err := checkInitRequest(st.InitRequest); err != nil {
		return nil, fmt.Errorf("mount state: %w", err)
	}
	if err := checkInitReply(st.InitReply); err != nil {
		return nil, fmt.Errorf("mount state: %w", err)
	}
	return &st, nil
}

// writeState writes the state file durably: it is written once a mount.
func writeState(dir string, st *mountState) error {
	b, err := json.Marshal(st)
	if err == nil {
		err = writeDurably(filepath.Join(dir, stateName), b)
	}
	if err != nil {
		return fmt.Errorf("write mount state: %w", err)
	}
	return nil
}

// readState reads the state file of dir.
func readState(dir string) (*mountState, error) {
	f, err := os.Open(filepath.Join(dir, stateName))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, err
	}
	return parseState(b)
}

// removeState makes sure no later server resumes from dir: the journal no
// longer says what the kernel holds.
func removeState(dir string) {
	for _, name := range []string{stateName, journalName} {
		os.Remove(filepath.Join(dir, name))
	}
	syncDir(dir)
}

// keeperName is the name the connection of the mount at mnt is kept under.
func keeperName(mnt string) string { return "fuse:" + mnt }

// optionsKey says what of o shapes what the kernel was told or keeps of
// the connection: a server with other options does not resume it.
func optionsKey(o *Options) string {
	return fmt.Sprintf("fsname=%s uid=%d gid=%d opens=%t passthrough=%t owner_only=%t writable=%t export=%t",
		o.FsName, o.UID, o.GID, o.Opens, o.Passthrough, o.OwnerOnly, o.kernelWritable, o.kernelExport)
}

// keptConn is what a mount with a keeper holds besides a plain one.
type keptConn struct {
	name    string
	fd      int           // go-fuse's descriptor of the connection
	served  chan struct{} // closed once go-fuse stopped serving
	resumed bool
}

// mountKept mounts with a keeper: it resumes the connection the keeper
// holds for the mountpoint, if it can, else mounts anew. Nothing touches
// the mountpoint before a server serves it, except to clear a mount no
// one holds any more.
func (s *Server) mountKept(mo *fuse.MountOptions) error {
	o := &s.opts
	if o.StateDir == "" {
		return errors.New("a keeper needs a state directory (Options.StateDir)")
	}
	if err := checkPrivateDir(o.StateDir); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	name := keeperName(s.mnt)
	f, err := o.Keeper.Take(name)
	if err != nil {
		// The keeper may hold a connection we cannot see: mounting anew
		// could hang on it.
		return fmt.Errorf("take the kept connection %q: %w", name, err)
	}
	if f != nil {
		st, js, why := s.resumable(f)
		if why == nil {
			return s.resume(f, st, js, mo)
		}
		s.log.Warn("kept connection not resumed; mounting anew", "mountpoint", s.mnt, "reason", why)
		s.discardKept(f, name, st)
	}
	return s.mountFresh(name, mo)
}

// resumable checks that the kept connection f can be resumed from the
// state in StateDir, and reads the journal; the error says why not.
func (s *Server) resumable(f *os.File) (*mountState, journalState, error) {
	var js journalState
	if !isFuseDev(int(f.Fd())) {
		return nil, js, errors.New("the kept descriptor is not a FUSE connection")
	}
	st, err := readState(s.opts.StateDir)
	if err != nil {
		return nil, js, fmt.Errorf("no usable mount state: %w", err)
	}
	switch dev, ok := mountDev(s.mnt); {
	case st.Mountpoint != s.mnt:
		return st, js, fmt.Errorf("the state is of the mount at %q", st.Mountpoint)
	case st.Options != optionsKey(&s.opts):
		return st, js, fmt.Errorf("options changed: mounted with %q, now %q", st.Options, optionsKey(&s.opts))
	case !ok:
		return st, js, errors.New("nothing is mounted at the mountpoint")
	case dev != st.Dev:
		return st, js, fmt.Errorf("the mount at the mountpoint is device %s, the kept one %s", dev, st.Dev)
	}
	jf, err := os.Open(filepath.Join(s.opts.StateDir, journalName))
	if err != nil {
		return st, js, fmt.Errorf("no node journal: %w", err)
	}
	defer jf.Close()
	js, err = readJournal(jf)
	if err != nil {
		return st, js, err
	}
	return st, js, nil
}

// discardKept ends a kept connection that is not resumed: the keeper's
// copy and ours are closed, which ends the connection unless someone else
// holds it, and its mount is detached without asking it anything (it may
// have no server).
func (s *Server) discardKept(f *os.File, name string, st *mountState) {
	if err := s.opts.Keeper.Drop(name); err != nil {
		s.log.Warn("drop the kept connection", "name", name, "err", err)
	}
	f.Close()
	removeState(s.opts.StateDir)
	if st == nil {
		return
	}
	if dev, ok := mountDev(s.mnt); ok && dev == st.Dev {
		if err := unix.Unmount(s.mnt, unix.MNT_DETACH); err != nil {
			s.log.Warn("detach the mount of the discarded connection", "mountpoint", s.mnt, "err", err)
		}
	}
}

// mountFresh mounts anew, keeping the connection with the keeper.
func (s *Server) mountFresh(name string, mo *fuse.MountOptions) error {
	dir := s.opts.StateDir
	removeState(dir)
	if err := ClearStale(s.mnt); err != nil {
		return err
	}
	var (
		srv        *fuse.Server
		fd, sp     = -1, -1
		req, reply []byte
	)
	timeout, err := withRequestTimeout(s.opts.RequestTimeout, s.opts.RequestTimeoutRecord, s.log, func() error {
		var err error
		if fd, err = devMount(s.mnt, mo); err != nil {
			return err
		}
		if req, err = readInit(fd); err == nil {
			srv, sp, reply, err = serveInit(s.fs(), req, mo)
		}
		if err == nil {
			_, err = unix.Write(fd, reply)
		}
		return err
	})
	if err != nil {
		if fd >= 0 {
			unix.Unmount(s.mnt, unix.MNT_DETACH)
			unix.Close(fd)
		}
		return err
	}
	s.timeout = timeout
	dev, _ := mountDev(s.mnt)
	st := &mountState{Format: stateFormat, Mountpoint: s.mnt, Dev: dev, Options: optionsKey(&s.opts),
		InitRequest: req, InitReply: reply, Timeout: timeout}
	s.openJournal(st, journalState{})
	cf := os.NewFile(uintptr(fd), "/dev/fuse")
	if err := s.opts.Keeper.Put(name, cf); err != nil {
		// The mount serves; only a crash would now end it.
		s.log.Error("keep the connection: a crash of the daemon ends the mount", "name", name, "err", err)
	}
	err = attach(fd, sp)
	cf.Close()
	if err != nil {
		unix.Unmount(s.mnt, unix.MNT_DETACH)
		return err
	}
	s.serveKept(srv, name, sp, false)
	return nil
}

// resume serves the kept connection f again.
func (s *Server) resume(f *os.File, st *mountState, js journalState, mo *fuse.MountOptions) error {
	srv, sp, reply, err := serveInit(s.fs(), st.InitRequest, mo)
	if err == nil && !bytes.Equal(reply, st.InitReply) {
		err = fmt.Errorf("this server answers INIT otherwise (flags %#x, was %#x)",
			initFlags(reply, true), initFlags(st.InitReply, true))
		go srv.Serve() // ends at once: the socketpair's other end is closed
	}
	if err != nil {
		s.log.Warn("kept connection not resumed; mounting anew", "mountpoint", s.mnt, "reason", err)
		s.discardKept(f, keeperName(s.mnt), st)
		return s.mountFresh(keeperName(s.mnt), mo)
	}
	s.timeout = st.Timeout
	s.loadOwners(js)
	s.openJournal(st, js)
	err = attach(int(f.Fd()), sp)
	f.Close()
	if err != nil {
		return err
	}
	s.probe = ".skillfs-probe-" + hex.EncodeToString(randomBytes(16))
	s.serveKept(srv, keeperName(s.mnt), sp, true)
	if initFlags(st.InitRequest, false)&fuse.CAP_HAS_RESEND == 0 {
		s.log.Warn("the kernel cannot resend requests (Linux 6.9 or later can): readers waiting on the dead server wait for the request timeout")
	} else if err := notifyResend(sp); err != nil {
		s.log.Warn("ask the kernel to resend requests", "err", err)
	}
	if err := s.checkProbe(); err != nil {
		// Whatever this connection is, nobody is to resume it. Its readers
		// stay until the process exits, which ends it.
		if derr := s.opts.Keeper.Drop(keeperName(s.mnt)); derr != nil {
			s.log.Warn("drop the kept connection", "err", derr)
		}
		removeState(s.opts.StateDir)
		return err
	}
	return nil
}

// probeWait bounds how long the check that the resumed connection is the
// one at the mountpoint waits for its answer.
var probeWait = 10 * time.Second

// probeErrno is what a lookup of the probe name is answered.
const probeErrno = unix.ENOTUNIQ

// checkProbe looks up the probe name through the mountpoint: only this
// server answers it with probeErrno.
func (s *Server) checkProbe() error {
	res := make(chan error, 1)
	go func() {
		var st unix.Stat_t
		res <- unix.Lstat(filepath.Join(s.mnt, s.probe), &st)
	}()
	select {
	case err := <-res:
		if errors.Is(err, probeErrno) {
			return nil
		}
		return fmt.Errorf("the kept connection is not the one mounted at %q (probe: %v)", s.mnt, err)
	case <-time.After(probeWait):
		return fmt.Errorf("the mount at %q does not answer: the kept connection is not the one mounted there", s.mnt)
	}
}

// serveKept starts serving a kept connection, go-fuse reading descriptor
// fd.
func (s *Server) serveKept(srv *fuse.Server, name string, fd int, resumed bool) {
	s.fuse = srv
	s.kept = &keptConn{name: name, fd: fd, served: make(chan struct{}), resumed: resumed}
	if s.jrnl != nil {
		s.ids.left, s.ids.seen = s.jrnl.drop, s.jrnl.node
	}
	go func() {
		srv.Serve()
		close(s.kept.served)
		s.fds.close()
		close(s.done)
	}()
}

// detachWait bounds how long Detach waits for the server to stop reading.
var detachWait = 10 * time.Second

// detach stops go-fuse without ending the connection: its reads turn
// non-blocking, so each of its readers, woken by a request (we make
// statfs ones until all are gone), answers it and then finds nothing to
// read and stops. What the kernel queues from then on waits for the next
// server, which makes the connection blocking again.
func (s *Server) detach() error {
	k := s.kept
	fl, err := unix.FcntlInt(uintptr(k.fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(k.fd), unix.F_SETFL, fl|unix.O_NONBLOCK)
	}
	if err != nil {
		return fmt.Errorf("detach: %w", err)
	}
	deadline := time.After(detachWait)
	for {
		poked := make(chan struct{})
		go func() {
			var st unix.Statfs_t
			unix.Statfs(s.mnt, &st) // answered by a reader, or by the next server
			close(poked)
		}()
		select {
		case <-k.served:
			return nil
		case <-deadline:
			return fmt.Errorf("detach: the server still reads after %v", detachWait)
		case <-poked:
		}
	}
}

// openJournal writes the journal of the owners of js, then state st: the
// state comes last, so that no server resumes with a journal missing
// owners. What fails is tried again as the journal is written to.
func (s *Server) openJournal(st *mountState, js journalState) {
	dir := s.opts.StateDir
	j, err := openJournal(filepath.Join(dir, journalName), js, s.nextID.Load, s.journalFailed)
	j.onRecover = func() error {
		if err := writeState(dir, st); err != nil {
			return err
		}
		s.log.Info("node journal and mount state written again: the mount can be resumed after a crash")
		return nil
	}
	s.jrnl = j
	if err == nil {
		err = writeState(dir, st)
		if err != nil {
			j.mu.Lock()
			j.fail(err)
			j.mu.Unlock()
			return
		}
	}
	if err != nil {
		s.journalFailed(err)
	}
}

// journalFailed makes sure no later server resumes with a journal that
// misses owners.
func (s *Server) journalFailed(err error) {
	s.log.Error("node journal: the mount cannot be resumed after a crash until it is written again", "err", err)
	removeState(s.opts.StateDir)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
