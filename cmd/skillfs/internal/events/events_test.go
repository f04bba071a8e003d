package events

import (
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"skillfs/cmd/skillfs/api"
	"skillfs/index"
	"skillfs/skills"
)

// openDB opens a new index.
func openDB(t testing.TB) *index.DB {
	t.Helper()
	db, err := index.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestHubFiltersAndNeverBlocks(t *testing.T) {
	h := NewHub(openDB(t))
	mine := h.Subscribe("s1")
	defer h.Unsubscribe(mine)
	all := h.Subscribe("")
	defer h.Unsubscribe(all)
	idle := h.Subscribe("s3")
	defer h.Unsubscribe(idle)
	for i := range SubscriberBuffer {
		h.Publish(api.Event{ID: int64(i + 1), Type: "activated", Session: []string{"s1", "s2"}[i%2]})
	}
	// What waits is queued, filtered by session; a stream nothing was
	// published to holds no buffer.
	evs, lagged, _ := mine.Take()
	if len(evs) != SubscriberBuffer/2 || lagged {
		t.Fatalf("s1's stream holds %d events (lagged %v), want %d", len(evs), lagged, SubscriberBuffer/2)
	}
	for _, e := range evs {
		if e.Session != "s1" {
			t.Fatalf("session filter let through %+v", e)
		}
	}
	if cap(idle.queue) != 0 {
		t.Fatalf("a stream nothing was published to holds a buffer of %d events", cap(idle.queue))
	}
	if cap(mine.queue) != 0 {
		t.Fatalf("a stream whose events were taken still holds a buffer of %d", cap(mine.queue))
	}
	for i := range 1000 { // far more than a subscriber buffers: must not block
		h.Publish(api.Event{ID: int64(SubscriberBuffer + i + 1), Type: "activated", Session: []string{"s1", "s2"}[i%2]})
	}
	// A subscriber that missed events is told so, to catch up from the log,
	// and holds none of them meanwhile.
	for _, s := range []*Subscriber{mine, all} {
		if len(s.queue) > SubscriberBuffer {
			t.Fatalf("a subscriber holds %d events, more than its %d", len(s.queue), SubscriberBuffer)
		}
		if _, lagged, _ := s.Take(); !lagged {
			t.Fatal("a full subscriber was not told that it lagged")
		}
	}
	h.CloseAll()
	select {
	case <-all.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("CloseAll did not wake a stream")
	}
	if _, _, closed := all.Take(); !closed {
		t.Fatal("CloseAll left a stream open")
	}
}

// TestIdleStreamHoldsNoBuffer: subscribing allocates a few words, not a
// buffer of SubscriberBuffer events: thousands of idle streams cost next to
// nothing until events wait for them.
func TestIdleStreamHoldsNoBuffer(t *testing.T) {
	h := NewHub(nil)
	const n = 1000
	subs := make([]*Subscriber, 0, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		subs = append(subs, h.Subscribe(""))
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per subscriber (a buffer of %d events would be %d)", per, SubscriberBuffer, SubscriberBuffer*unsafe.Sizeof(api.Event{}))
	if per > 1024 {
		t.Fatalf("a subscriber allocates %d bytes before any event", per)
	}
	for _, s := range subs {
		h.Unsubscribe(s)
	}
}

// TestParentStreamHasItsChildrensEvents: a sub-agent's event reaches its
// own stream and its parent's, not another session's; the event a replay
// reads from the log names the parent as the live one does.
func TestParentStreamHasItsChildrensEvents(t *testing.T) {
	h := NewHub(openDB(t))
	parent, child, other := h.Subscribe("p"), h.Subscribe("c"), h.Subscribe("q")
	for _, s := range []*Subscriber{parent, child, other} {
		defer h.Unsubscribe(s)
	}
	h.Publish(api.Event{ID: 1, Type: "activated", Session: "c", Parent: "p"})
	h.Publish(api.Event{ID: 2, Type: "activated", Session: "p"})
	for _, tc := range []struct {
		name string
		s    *Subscriber
		want []int64
	}{{"parent", parent, []int64{1, 2}}, {"child", child, []int64{1}}, {"other", other, nil}} {
		evs, _, _ := tc.s.Take()
		var ids []int64
		for _, e := range evs {
			ids = append(ids, e.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("the %s's stream has %v, want %v", tc.name, ids, tc.want)
		}
	}
	if e := FromStored(*Stored(api.Event{Type: "closed", Session: "c"})); e.Parent != "" {
		t.Errorf("a stored event names parent %q before the index set it", e.Parent)
	}
	if e := FromStored(skills.Event{Type: "closed", Session: "c", Parent: "p"}); e.Parent != "p" {
		t.Errorf("an event of the log reports parent %q, want p", e.Parent)
	}
}
