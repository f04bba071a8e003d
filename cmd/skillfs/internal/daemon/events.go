package daemon

import (
	"sync"
	"time"
)

// Event is what tool loaders receive on the event stream.
type Event struct {
	Type    string    `json:"type"` // "activated", "revoked", "refreshed", "closed"
	Session string    `json:"session"`
	Slug    string    `json:"slug,omitempty"`
	At      time.Time `json:"at"`
}

// hub fans events out to subscribers. Publishing never blocks: a subscriber
// that lets 256 events pile up loses the newer ones; the activations query
// stays the source of truth.
type hub struct {
	mu   sync.Mutex
	subs map[chan Event]string // channel -> session filter ("" = all)
}

func newHub() *hub { return &hub{subs: map[chan Event]string{}} }

func (h *hub) subscribe(session string) (<-chan Event, func()) {
	ch := make(chan Event, 256)
	h.mu.Lock()
	h.subs[ch] = session
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
		h.mu.Unlock()
	}
}

func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch, filter := range h.subs {
		if filter != "" && filter != e.Session {
			continue
		}
		select {
		case ch <- e:
		default:
		}
	}
}

// closeAll ends every stream (shutdown).
func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}
