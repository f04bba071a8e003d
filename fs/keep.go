package fs

import (
	"errors"
	"os"
)

// Keeper keeps a duplicate of a mount's FUSE connection descriptor outside
// the daemon's process, so that the connection outlives the daemon: while a
// keeper holds it, the kernel does not end the connection when the daemon
// dies, readers wait instead of failing, and the next Mount given the same
// keeper (and Options.StateDir) takes the connection back and serves it
// again: every bind of the mount, in any namespace, stays valid.
type Keeper interface {
	// Take returns a duplicate of the descriptor kept under name, the
	// keeper keeping its own; nil and no error when none is kept.
	Take(name string) (*os.File, error)
	// Put keeps a duplicate of f under name, replacing any kept before.
	Put(name string, f *os.File) error
	// Drop forgets (closes) the descriptor kept under name, if any.
	Drop(name string) error
}

// errResumeUnsupported is what Detach answers until resuming is built.
var errResumeUnsupported = errors.New("detach: the mount has no keeper")

// Resumed reports whether Mount took back a connection a keeper held
// instead of mounting anew.
func (s *Server) Resumed() bool { return false }

// RestoreDone tells a resumed server that every session that was to come
// back has been set again (SetSession): requests for nodes of sessions that
// did not come back stop waiting and are answered as gone. A no-op on a
// fresh mount.
func (s *Server) RestoreDone() {}

// Detach stops serving without unmounting: the keeper's duplicate keeps the
// connection, and with it every bind of the mount, until the next Mount
// with the same keeper takes it back. Readers wait meanwhile.
func (s *Server) Detach() error { return errResumeUnsupported }
