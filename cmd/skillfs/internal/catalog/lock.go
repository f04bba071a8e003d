package catalog

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// importLock is the data directory's import lock: held shared by every
// import, edit and draft in flight, in any process, and exclusively to
// sweep or reconcile what imports leave. flock belongs to the open file
// description, so the goroutines of one process share one flock: they count
// their holders (the first takes it, the last drops it), and an exclusive
// holder in this process keeps the others out with a mutex, since a second
// flock on the same descriptor would convert the lock rather than wait.
type importLock struct {
	f      *os.File
	inproc sync.RWMutex
	mu     sync.Mutex
	shared int // holders in this process
}

// share takes the lock shared; release drops this holder's share.
func (l *importLock) share() (release func(), err error) {
	l.inproc.RLock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shared == 0 {
		if err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_SH); err != nil {
			l.inproc.RUnlock()
			return nil, fmt.Errorf("take import lock: %w", err)
		}
	}
	l.shared++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.shared--
			if l.shared == 0 {
				syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
			}
			l.mu.Unlock()
			l.inproc.RUnlock()
		})
	}, nil
}

// exclusive takes the lock exclusively, waiting for it when wait is set;
// without waiting, ok is false when anyone, in this process or another,
// holds it.
func (l *importLock) exclusive(wait bool) (release func(), ok bool, err error) {
	if wait {
		l.inproc.Lock()
	} else if !l.inproc.TryLock() {
		return nil, false, nil
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(l.f.Fd()), how); err != nil {
		l.inproc.Unlock()
		if !wait && err == syscall.EWOULDBLOCK {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("take import lock: %w", err)
	}
	return func() {
		syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		l.inproc.Unlock()
	}, true, nil
}

func (l *importLock) close() error { return l.f.Close() }
