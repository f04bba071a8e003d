package apitest

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
)

// SSE is one event of an event stream as a client parses it off the wire.
type SSE struct {
	ID   string    // the id: line
	Name string    // the event: line
	Data api.Event // the data: line
}

// ParseSSE reads server-sent events until r ends, handing each to got; it
// stops when got returns false. An event whose lines disagree (its id: or
// event: line not its data's) fails the test.
func ParseSSE(t testing.TB, r io.Reader, got func(SSE) bool) {
	sc := bufio.NewScanner(r)
	var e SSE
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			e.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			e.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.Data); err != nil {
				t.Errorf("data line %q: %v", line, err)
			}
		case line == "" && e.Name != "":
			if strconv.FormatInt(e.Data.ID, 10) != e.ID || string(e.Data.Type) != e.Name {
				t.Errorf("event lines disagree: id %q event %q, data %+v", e.ID, e.Name, e.Data)
			}
			if !got(e) {
				return
			}
			e = SSE{}
		}
	}
}

// Stream parses the events of r (ParseSSE) as they come, handing them on
// the channel, which is closed when r ends.
func Stream(t testing.TB, r io.Reader) <-chan SSE {
	ch := make(chan SSE, 64)
	go func() {
		defer close(ch)
		ParseSSE(t, r, func(e SSE) bool { ch <- e; return true })
	}()
	return ch
}

// NextOf is the next event of session id on ch, the events of others
// before it passed over; the test fails if ch is closed first, or has
// none within a minute (a guard against a hang, not a measure).
func NextOf(t testing.TB, ch <-chan SSE, id string) SSE {
	t.Helper()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before an event of session %s", id)
			}
			if e.Data.Session == id {
				return e
			}
		case <-time.After(time.Minute):
			t.Fatalf("no event of session %s in the stream after a minute", id)
		}
	}
}
