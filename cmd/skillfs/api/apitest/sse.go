package apitest

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

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
