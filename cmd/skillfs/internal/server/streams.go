package server

import "sync"

// An event stream opened with a session or platform token lasts only as
// long as that token proves its principal. The stream asks again
// (Credentials.Recheck, by the token's hash) before it sends events and at
// each keep-alive, which covers an expiry and the changes other hosts
// make; and the daemon tells the streams of a credential it changes here
// (TokenChanged, SessionChanged), which then ask at once. Streams opened
// without a token (the socket, the listener's own token, a sandbox's
// socket, whose connections its unbind closes) are never asked about.

// credentialKey is what the daemon names a changed credential by: a
// platform token's name, or the session whose token it is.
type credentialKey struct {
	session bool
	name    string
}

// keyOfPrincipal is the key of p's credential; ok is false when no token
// proved p.
func keyOfPrincipal(p Principal) (k credentialKey, ok bool) {
	if p.Hash == "" {
		return credentialKey{}, false
	}
	if p.Role == RoleSession {
		return credentialKey{session: true, name: p.Session}, true
	}
	return credentialKey{name: p.Token}, true
}

// streamWatch is one stream in openStreams: changed fires when its
// credential may have changed.
type streamWatch struct {
	key     credentialKey
	changed chan struct{} // buffered 1: a change not looked at yet
}

// openStreams are the event streams open with a token, by credential.
type openStreams struct {
	mu sync.Mutex
	by map[credentialKey]map[*streamWatch]struct{}
}

// add registers a stream of principal p; nil when no token proved p.
func (o *openStreams) add(p Principal) *streamWatch {
	k, ok := keyOfPrincipal(p)
	if !ok {
		return nil
	}
	w := &streamWatch{key: k, changed: make(chan struct{}, 1)}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.by == nil {
		o.by = map[credentialKey]map[*streamWatch]struct{}{}
	}
	if o.by[k] == nil {
		o.by[k] = map[*streamWatch]struct{}{}
	}
	o.by[k][w] = struct{}{}
	return w
}

// remove forgets w (nil: nothing).
func (o *openStreams) remove(w *streamWatch) {
	if w == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.by[w.key], w)
	if len(o.by[w.key]) == 0 {
		delete(o.by, w.key)
	}
}

// changed tells every stream of credential k to ask about it again.
func (o *openStreams) changed(k credentialKey) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for w := range o.by[k] {
		select {
		case w.changed <- struct{}{}:
		default: // one is waiting already
		}
	}
}

// TokenChanged tells the event streams open here with platform token name
// that it changed (was revoked): each asks at once whether it still proves
// its principal, and ends if not. A nil API has none.
func (a *API) TokenChanged(name string) {
	if a != nil {
		a.streams.changed(credentialKey{name: name})
	}
}

// SessionChanged tells the event streams open here with the token of
// session id that it changed: replaced, or dead with the session's close
// or move. A nil API has none.
func (a *API) SessionChanged(id string) {
	if a != nil {
		a.streams.changed(credentialKey{session: true, name: id})
	}
}
