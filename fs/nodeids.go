package fs

import (
	"crypto/rand"
	"encoding/binary"
	"slices"
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
// back), by slot: the low bits of the node id (0: a session's directory,
// the index plus one: an entry of a grant's tree). Only slots the kernel
// holds are counted, so what revoking a grant must make the kernel drop is
// exactly what it holds. On a resumed connection the slots the previous
// server handed out (journal.go) are held as well, how often unknown:
// the FORGET of such a slot, which the kernel sends with the node's whole
// count when it evicts it, releases it.
type kernelRefs struct {
	mu     sync.Mutex
	counts map[uint64]uint64 // lookups by slot handed by this server
	old    map[uint64]bool   // slots the previous server handed, still held
	// dropped: no longer served: it leaves the table once nothing is held
	dropped bool
	gone    bool // left the table: none of its ids may be handed out again
}

// heldLocked reports whether the kernel holds any node of the owner. r.mu
// is held.
func (r *kernelRefs) heldLocked() bool { return len(r.counts) > 0 || len(r.old) > 0 }

// held reports whether the kernel holds any node of the owner.
func (r *kernelRefs) held() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.heldLocked()
}

// handed returns the entries of a grant's tree the kernel may hold.
func (r *kernelRefs) handed() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int32
	for slot := range r.counts {
		if slot > 0 {
			out = append(out, int32(slot-1))
		}
	}
	for slot := range r.old {
		if _, dup := r.counts[slot]; !dup && slot > 0 {
			out = append(out, int32(slot-1))
		}
	}
	slices.Sort(out)
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
	// left, if set, is told of every owner leaving the table, and seen of
	// every slot of an owner the kernel starts (held true) or stops (false)
	// holding (the journal). Both are called with the owner's refs locked,
	// so that what they record is in the order it happened.
	left func(id uint64)
	seen func(id, slot uint64, held bool)
	// pendingForget, if set, is told of a FORGET of a node of an owner
	// not restored yet (restore.go).
	pendingForget func(p *pendingSession, nodeid uint64)
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

// len returns how many owners the table holds.
func (t *nodeTable) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.owners)
}

// hand records that the kernel is given node nodeid, of the owner whose
// refs r are. It reports false once the owner left the table: its ids must
// not reach the kernel any more.
func (t *nodeTable) hand(nodeid uint64, r *kernelRefs) bool {
	id, slot := ownerOf(nodeid)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return false
	}
	if r.counts == nil {
		r.counts = make(map[uint64]uint64)
	}
	r.counts[slot]++
	if r.counts[slot] == 1 && !r.old[slot] && t.seen != nil {
		t.seen(id, slot, true)
	}
	return true
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
func (t *nodeTable) forget(nodeid, n uint64) { t.release(nodeid, n, true) }

// unhand takes back the one lookup of a node just handed, which the
// kernel is not given after all.
func (t *nodeTable) unhand(nodeid uint64) { t.release(nodeid, 1, false) }

// release takes back n lookups of node nodeid; evicted: the kernel forgot
// the node (a FORGET), which releases it whatever the previous server
// handed of it.
func (t *nodeTable) release(nodeid, n uint64, evicted bool) {
	id, slot := ownerOf(nodeid)
	o, ok := t.get(id)
	if !ok {
		return
	}
	r := o.refs()
	if r == nil {
		if o.p != nil && evicted && t.pendingForget != nil {
			t.pendingForget(o.p, nodeid)
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, counted := r.counts[slot]
	switch {
	case r.old[slot] && evicted:
		delete(r.old, slot)
		delete(r.counts, slot)
	case !counted:
		return
	case c > n:
		r.counts[slot] = c - n
		return
	default:
		delete(r.counts, slot)
		if r.old[slot] {
			return
		}
	}
	if t.seen != nil {
		t.seen(id, slot, false)
	}
	t.leaveIfUnheld(id, r)
}

// leaveIfUnheld removes a dropped owner from the table once the kernel
// holds none of its nodes. r.mu is held.
func (t *nodeTable) leaveIfUnheld(id uint64, r *kernelRefs) {
	if !r.heldLocked() && r.dropped && !r.gone {
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
