package fs

import "os"

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
