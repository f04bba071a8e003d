package fs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"skillfs/fs/fusetest"
)

// TestFileHandlesUnguessable: a process holding CAP_DAC_READ_SEARCH (the
// test, as root) cannot open another session's files by handle
// (open_by_handle_at), neither with the guesses {node id n, generation 0}
// that once opened them nor with the handle of its own file or of the other
// session's file mutated. It runs on the mount as served, where the kernel
// (Linux 6.10 and later) refuses to decode any handle, and on one that
// leaves decoding to the generations alone, as older kernels do; there its
// own file's handle opens, so the guesses are tried for real.
func TestFileHandlesUnguessable(t *testing.T) {
	st := newStore(t)
	for _, tc := range []struct {
		name   string
		export bool
	}{{"handles refused", false}, {"kernel decodes handles", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mountTest(t, Options{Sink: &fakeSink{}, kernelExport: tc.export})
			mine := setSession(t, srv, "mine", View{st.alpha1})
			theirs := setSession(t, srv, "theirs", View{st.delta, st.beta1})
			// The other session reads its files: the kernel holds their nodes.
			secret := map[uint64]string{}
			for _, rel := range []string{"delta/SKILL.md", "delta/secret.txt", "beta/SKILL.md", "beta/notes.txt"} {
				p := filepath.Join(theirs, rel)
				if _, err := os.ReadFile(p); err != nil {
					t.Fatal(err)
				}
				secret[ino(t, p)] = rel
			}
			own := filepath.Join(mine, "alpha", "SKILL.md")
			if _, err := os.ReadFile(own); err != nil {
				t.Fatal(err)
			}
			ownID, ownGen, decodable := fusetest.HandleOf(t, own)
			theirID, theirGen, _ := fusetest.HandleOf(t, filepath.Join(theirs, "delta", "secret.txt"))
			if decodable == srv.HandlesRefused() {
				t.Errorf("name_to_handle_at gave a decodable handle: %v; the mount refuses handles: %v", decodable, srv.HandlesRefused())
			}
			if ownGen == 0 || theirGen == 0 || ownGen == theirGen {
				t.Errorf("generations %#x (own) and %#x (other session's): want random, distinct", ownGen, theirGen)
			}
			mnt, err := unix.Open(srv.Mountpoint(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(mnt)

			// Where handles decode, the unchanged handle of one's own file
			// opens it: the guesses below are not refused for another reason.
			fd, err := unix.OpenByHandleAt(mnt, fusetest.Handle(ownID, ownGen), unix.O_RDONLY)
			if err == nil {
				unix.Close(fd)
			}
			if opened := err == nil; opened != decodable {
				t.Fatalf("open_by_handle_at of the own file's handle: %v; handles decodable: %v", err, decodable)
			}

			type guess struct {
				nodeid uint64
				gen    uint32
			}
			var guesses []guess
			for n := uint64(1); n <= 4096; n++ { // the attack: sequential node ids, generation 0
				guesses = append(guesses, guess{n, 0})
			}
			owners, _ := ownerOf(max(ownID, theirID))
			for o := uint64(1); o <= owners+2; o++ { // every owner, every entry of a small tree
				for e := uint64(0); e <= 16; e++ {
					for _, gen := range []uint32{0, 1, ownGen} {
						guesses = append(guesses, guess{o<<inoShift | e, gen})
					}
				}
			}
			for id := range secret { // the other session's nodes, with the generation bumped
				for _, gen := range []uint32{0, ownGen, theirGen + 1, theirGen - 1, theirGen ^ 1, theirGen ^ 1<<31} {
					guesses = append(guesses, guess{id, gen})
				}
			}
			opened := 0
			for _, g := range guesses {
				fd, err := unix.OpenByHandleAt(mnt, fusetest.Handle(g.nodeid, g.gen), unix.O_RDONLY)
				if err != nil {
					continue
				}
				opened++
				var st unix.Stat_t
				if err := unix.Fstat(fd, &st); err != nil {
					t.Error(err)
				} else if rel, ok := secret[st.Ino]; ok {
					t.Errorf("handle {node %#x, generation %#x} opened the other session's %s", g.nodeid, g.gen, rel)
				}
				unix.Close(fd)
			}
			t.Logf("handles decodable: %v; %d guessed handles tried, %d opened a file (of the own session only, if any)",
				decodable, len(guesses), opened)
		})
	}
}
