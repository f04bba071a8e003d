package bind

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Timeout bounds each piece of work on a bind target (opening and checking
// it, attaching, unmounting). A variable so tests can shorten it.
var Timeout = 10 * time.Second

// errGaveUp ends work on a target whose caller stopped waiting; nobody sees
// it.
var errGaveUp = errors.New("the caller stopped waiting")

// onTarget runs fn on a thread of its own, one that joined the mount
// namespace open at nsfd (that of process pid, named in errors), or with
// nsfd < 0 in the daemon's, and waits for it at most Timeout.
//
// A target on a hung filesystem (a FUSE server that never answers, an
// unreachable NFS server) can block fn for ever, in calls no signal ends.
// The caller then gets an error and goes on, releasing the daemon's lock,
// while fn's thread stays blocked. So that nothing fn completes afterwards
// goes unrecorded, fn returns with its result a function undoing what it
// did: if the caller stopped waiting by then, undo runs on fn's thread (in
// its namespace) instead of the result being delivered. gaveUp lets fn stop
// early.
//
// The descriptors in owned (nsfd among them, if any) are fn's: they are
// closed when fn is done, which may be long after onTarget returned, so that
// no other file takes their numbers while fn still uses them. Every other
// descriptor fn uses it opens and closes itself; whatever it writes for the
// caller, the caller reads only after a nil error.
func onTarget(what string, nsfd, pid int, owned []int, fn func(gaveUp func() bool) (undo func(), err error)) error {
	var (
		mu        sync.Mutex
		abandoned bool
	)
	gaveUp := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return abandoned
	}
	done := make(chan error, 1)
	work := func() {
		defer func() {
			for _, fd := range owned {
				unix.Close(fd)
			}
		}()
		if nsfd >= 0 {
			if err := unix.Unshare(unix.CLONE_FS); err != nil {
				done <- fmt.Errorf("unshare filesystem attributes: %w", err)
				return
			}
			if err := unix.Setns(nsfd, unix.CLONE_NEWNS); err != nil {
				done <- fmt.Errorf("join mount namespace of process %d: %w", pid, err)
				return
			}
		}
		undo, err := fn(gaveUp)
		// Deliver or undo, atomically with the caller's giving up.
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if err == nil && undo != nil {
				undo()
			}
			return
		}
		done <- err
	}
	if nsfd >= 0 {
		go OwnThread(work) // no other goroutine ever runs in that namespace
	} else {
		go work()
	}

	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case err := <-done: // just in time
		return err
	default:
	}
	abandoned = true
	return fmt.Errorf("%s: no answer within %v (a hung filesystem?): %w", what, Timeout, os.ErrDeadlineExceeded)
}

// OwnThread runs fn on a thread locked to it that ends when fn returns, so
// that whatever fn changes of its thread (its mount namespace, its
// credentials) no other goroutine ever sees. Never on the process's main
// thread: that one cannot end (the runtime parks it for good), and /proc/self
// shows the process as its main thread is. While the main thread is the
// caller's, a goroutine started from it runs on another.
func OwnThread(fn func()) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			OwnThread(fn)
		}()
		<-done
		runtime.UnlockOSThread() // nothing of it was changed
		return
	}
	fn() // never unlocked: the thread ends with the goroutine
}

// elsewhere runs fn on another goroutine and waits for it. From a thread
// that joined a sandbox's namespace, paths resolve there: what opens files
// of the daemon's own (the index) must run elsewhere. A goroutine never runs
// on a thread another one has locked.
func elsewhere(fn func() error) error {
	res := make(chan error, 1)
	go func() { res <- fn() }()
	return <-res
}

// closeAll closes descriptors on the error paths before onTarget owns them.
func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
