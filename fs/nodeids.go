package fs

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Node ids. The kernel names every file and directory it holds by a node id,
// which is also its inode number here. An id splits into an owner (high
// bits: a session, whose directory has the low bits zero, or a grant) and,
// for a grant, the index of the entry in the version's tree plus one (low
// bits). Owners are numbered from one counter, never reused, so an id names
// one node for the mount's life and no table of nodes is kept: the tree,
// shared by every session of a version, holds names and attributes, and a
// node the kernel holds costs its owner one bit (kernelRefs).
//
// A node id alone opens nothing. The kernel decodes a file handle
// (open_by_handle_at) into {node id, generation}: the mount refuses to decode
// any (Options, CAP_NO_EXPORT_SUPPORT, Linux 6.10 and later), and every
// owner has a random 32-bit generation, so where the kernel does decode
// handles (of the nodes it holds: export support is never offered) a handle
// of another session's file cannot be guessed from the sequential ids.

// inoShift splits a node id into its owner (high bits) and the index of the
// entry in the owner's tree plus one (low bits).
const inoShift = 24

// maxTreeEntries is the largest version tree that fits the encoding.
const maxTreeEntries = 1<<inoShift - 2

const inoMask = 1<<inoShift - 1

// ownerOf splits a node id into its owner's id and the entry's index plus
// one (0: a session's directory).
func ownerOf(nodeid uint64) (owner uint64, entry uint64) {
	return nodeid >> inoShift, nodeid & inoMask
}

// randomGeneration returns a random nonzero 32-bit generation (the kernel
// keeps 32 bits of it in a file handle).
func randomGeneration() uint32 {
	var b [4]byte
	for {
		rand.Read(b[:]) // never fails (crypto/rand)
		if g := binary.LittleEndian.Uint32(b[:]); g != 0 {
			return g
		}
	}
}

// kernelRefs counts the lookups of an owner's nodes that the kernel holds
// (every LOOKUP and READDIRPLUS entry answered adds one, FORGET takes them
// back) and, for a grant, which entries of its tree it was given since it
// last held none: one bit per entry, what revoking the grant must make the
// kernel drop. The bits go once the kernel holds nothing of the owner.
type kernelRefs struct {
	mu      sync.Mutex
	lookups uint64
	seen    []uint64
	dropped bool // no longer served: it leaves the table once lookups is zero
	gone    bool // left the table: none of its ids may be handed out again
	// pinned: an owner of a resumed connection, of which the kernel may
	// hold any entry, how often is not known (restore.go): always held.
	pinned bool
}

// hand records that the kernel is given entry idx (-1: a session's
// directory, which has no bits). It reports false once the owner left the
// table: its ids must not reach the kernel any more.
func (r *kernelRefs) hand(idx int32, entries int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return false
	}
	r.lookups++
	if idx >= 0 {
		if r.seen == nil {
			r.seen = make([]uint64, (entries+63)/64)
		}
		r.seen[idx/64] |= 1 << (idx % 64)
	}
	return true
}

// held reports whether the kernel holds any node of the owner.
func (r *kernelRefs) held() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups > 0 || r.pinned
}

// handed returns the entries, of a tree of n, the kernel was given and may
// still hold.
func (r *kernelRefs) handed(n int) []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int32
	if r.pinned {
		for i := range n {
			out = append(out, int32(i))
		}
		return out
	}
	for w, word := range r.seen {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			out = append(out, int32(w*64+b))
			word &^= 1 << b
		}
	}
	return out
}

// owner is what a node id's high bits name: a session or a grant, or, on
// a resumed connection, one of a session not restored yet (restore.go).
type owner struct {
	ss *session
	g  *grant
	p  *pendingSession
}

// refs returns the owner's kernel references; nil for a pending one,
// which counts as held until restored.
func (o owner) refs() *kernelRefs {
	switch {
	case o.g != nil:
		return &o.g.kernel
	case o.ss != nil:
		return &o.ss.kernel
	}
	return nil
}

// nodeTable finds the owners of node ids: every session and grant served,
// and those no longer served while the kernel still holds a node of them
// (an open file of a revoked skill reads EACCES until closed; its FORGET
// comes later).
type nodeTable struct {
	mu     sync.RWMutex
	owners map[uint64]owner
	// left, if set, is told of every owner leaving the table (the journal).
	left func(id uint64)
}

func (t *nodeTable) add(id uint64, o owner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owners == nil {
		t.owners = make(map[uint64]owner)
	}
	t.owners[id] = o
}

func (t *nodeTable) get(id uint64) (owner, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	o, ok := t.owners[id]
	return o, ok
}

// drop ends the service of an owner: it leaves the table now if the kernel
// holds none of its nodes, else at the FORGET of the last.
func (t *nodeTable) drop(id uint64, r *kernelRefs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropped = true
	t.leaveIfUnheld(id, r)
}

// forget takes back n lookups of a node the kernel forgot.
func (t *nodeTable) forget(nodeid, n uint64) {
	id, _ := ownerOf(nodeid)
	o, ok := t.get(id)
	if !ok {
		return
	}
	r := o.refs()
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups -= min(n, r.lookups)
	t.leaveIfUnheld(id, r)
}

// leaveIfUnheld forgets the entries handed once the kernel holds none of
// them, and removes a dropped owner from the table. r.mu is held.
func (t *nodeTable) leaveIfUnheld(id uint64, r *kernelRefs) {
	if r.lookups > 0 || r.pinned {
		return
	}
	r.seen = nil
	if r.dropped && !r.gone {
		r.gone = true
		t.mu.Lock()
		delete(t.owners, id)
		t.mu.Unlock()
		if t.left != nil {
			t.left(id)
		}
	}
}

// entryOut fills what a LOOKUP answer says of a node besides its
// attributes.
func (s *Server) entryOut(out *fuse.EntryOut, nodeid uint64, gen uint32) {
	out.NodeId = nodeid
	out.Generation = uint64(gen)
	out.SetEntryTimeout(s.opts.EntryTimeout)
	out.SetAttrTimeout(s.opts.AttrTimeout)
}
