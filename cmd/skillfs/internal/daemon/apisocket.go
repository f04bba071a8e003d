package daemon

import (
	"sync"

	"skillfs/fs/bind"
	"skillfs/skills"
)

// A bind may put the session's API socket into the sandbox beside its view
// (skills.Bind.APISocket): a Unix socket made in the sandbox's mount
// namespace as the sandboxed process (package bind: Binder.Listen), whose
// every connection acts as the session (server.ServeSession). It lives as
// long as its bind: unbinding, closing the session, the session moving to
// another host (the old host drops its binds, see dropStale) and the
// daemon's shutdown stop it and remove its file; a restart makes it again
// with the bind (rebind), replacing the file a crash left.

// bindKey names one bind of one session on this host.
type bindKey struct {
	session string
	pid     int
	target  string
}

func keyOf(id string, b skills.Bind) bindKey {
	return bindKey{session: id, pid: b.PID, target: b.Target}
}

// apiSockets are the API sockets this daemon serves, by the bind they
// belong to: how to stop each.
type apiSockets struct {
	mu   sync.Mutex
	open map[bindKey]func()
}

func (s *apiSockets) add(k bindKey, stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = map[bindKey]func(){}
	}
	s.open[k] = stop
}

// take removes the socket of k from the set and returns its stop (nil for
// none).
func (s *apiSockets) take(k bindKey) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	stop := s.open[k]
	delete(s.open, k)
	return stop
}

// stopAll stops every socket, leaving its file (a stop that leaves the
// binds in place: the next start replaces the files, as after a crash).
func (s *apiSockets) stopAll() {
	s.mu.Lock()
	open := s.open
	s.open = nil
	s.mu.Unlock()
	for _, stop := range open {
		stop()
	}
}

// count is how many are served (the metrics' gauge).
func (s *apiSockets) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// openSocket makes the API socket of bind b of session id at b.APISocket,
// in b's namespace, and serves the session's API on it. replace is the
// socket file a previous run made there (its SocketID), which may be
// replaced; "" for none. It returns b with the socket as made, or b as it
// was with the error.
func (d *Daemon) openSocket(id string, b skills.Bind, replace string) (skills.Bind, error) {
	l, s, err := d.binder().Listen(b.PID, b.NS, b.APISocket, replace)
	if err != nil {
		return b, err
	}
	d.sockets.add(keyOf(id, b), d.http.ServeSession(l, id, d.opts.Limits))
	b.APISocket, b.SocketID = s.Path, s.ID
	d.log.Info("api socket served", "session", id, "api_socket", s.Path, "pid", b.PID)
	return b, nil
}

// closeSocket stops the API socket of bind b of session id, if it is
// served (every connection on it ends), and removes its file if that is
// still the file made. A file that cannot be removed is only logged:
// nothing listens on it any more.
func (d *Daemon) closeSocket(id string, b skills.Bind) {
	if stop := d.sockets.take(keyOf(id, b)); stop != nil {
		stop()
	}
	if b.APISocket == "" || b.SocketID == "" {
		return
	}
	if err := d.binder().RemoveSocket(b.PID, b.NS, bind.Socket{Path: b.APISocket, ID: b.SocketID}); err != nil {
		d.log.Warn("remove api socket", "session", id, "api_socket", b.APISocket, "pid", b.PID, "err", err)
		return
	}
	d.log.Info("api socket removed", "session", id, "api_socket", b.APISocket, "pid", b.PID)
}
