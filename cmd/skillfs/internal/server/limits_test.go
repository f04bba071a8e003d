package server

import (
	"math"
	"testing"
)

// TestFitConns: the connection caps fit into the open file limit less the
// reserve, lowered in proportion when they do not, never below minConns.
func TestFitConns(t *testing.T) {
	for _, tc := range []struct {
		name               string
		soft               uint64
		reserve, sock, tcp int
		wantSock, wantTCP  int
		lowered            bool
	}{
		{"room for both", 1 << 20, 1024, 1024, 256, 1024, 256, false},
		{"no limit", math.MaxUint64, 1024, 1024, 256, 1024, 256, false},
		{"socket alone, just fits", 2048, 1024, 1024, 0, 1024, 0, false},
		{"both lowered in proportion", 2048, 1024, 1024, 256, 819, 204, true},
		{"socket alone lowered", 1536, 1024, 1024, 0, 512, 0, true},
		{"nothing left after the reserve", 1024, 1024, 1024, 256, minConns, minConns, true},
		{"a reserve over the limit", 512, 1024, 1024, 0, minConns, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fitConns(tc.soft, tc.reserve, tc.sock, tc.tcp)
			if c.socket != tc.wantSock || c.tcp != tc.wantTCP || c.lowered != tc.lowered {
				t.Errorf("fitConns(%d, %d, %d, %d) = %+v; want socket %d, tcp %d, lowered %v",
					tc.soft, tc.reserve, tc.sock, tc.tcp, c, tc.wantSock, tc.wantTCP, tc.lowered)
			}
			if !c.lowered && uint64(c.socket+c.tcp)+uint64(tc.reserve) > tc.soft {
				t.Errorf("caps %+v and the reserve %d exceed the limit %d", c, tc.reserve, tc.soft)
			}
		})
	}
}

// TestStreamsFor: a listener's streams take at most half its connections.
func TestStreamsFor(t *testing.T) {
	for _, tc := range []struct{ conns, max, want int }{
		{1024, 512, 512}, {256, 512, 128}, {1024, 10, 10}, {16, 512, 8},
	} {
		if got := streamsFor(tc.conns, tc.max); got != tc.want {
			t.Errorf("streamsFor(%d, %d) = %d, want %d", tc.conns, tc.max, got, tc.want)
		}
	}
}
