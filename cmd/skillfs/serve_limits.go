package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"skillfs/cmd/skillfs/internal/daemon"
)

// apiLimits are serve's settings of the API's limits: what its connections,
// event streams and comparisons of versions may take.
type apiLimits struct {
	conns, tcpConns, streams, fdReserve int
	idle                                time.Duration
	diffMiB                             int
}

// countRange is a count setting's documented range.
type countRange struct {
	flag     string
	v        *int
	min, max int
}

// durationRange is a duration setting's documented range.
type durationRange struct {
	flag     string
	v        *time.Duration
	min, max time.Duration
}

// addAPILimits defines the flags of l on fs.
func addAPILimits(fs *pflag.FlagSet) *apiLimits {
	l := &apiLimits{}
	fs.IntVar(&l.conns, "max-conns", daemon.DefaultSocketConns,
		"at most this many API connections open on the Unix socket at a time (16 to 1048576); at the cap the one idle longest makes room for a new client")
	fs.IntVar(&l.tcpConns, "max-tcp-conns", daemon.DefaultMaxConns, "the same for the --listen TCP address (16 to 1048576)")
	fs.IntVar(&l.streams, "max-streams", daemon.DefaultMaxStreams,
		"at most this many event streams open on each listener, and at most half its connections (1 to 1048576); one more is answered 503 busy")
	fs.IntVar(&l.fdReserve, "fd-reserve", daemon.DefaultFDReserve,
		"descriptors of the open file limit kept for the mount, the store and the index: the connection caps are lowered to leave them (64 to 1048576)")
	fs.IntVar(&l.diffMiB, "diff-memory", daemon.DefaultDiffMemory>>20,
		"MiB the comparisons of versions (diffs, the diffstats of listings and updates) may hold together (16 to 65536); one that cannot be granted within 3 s is answered 503 busy")
	fs.DurationVar(&l.idle, "idle-timeout", daemon.DefaultIdleTimeout, "close an API connection kept alive this long without a request (1s to 1h)")
	return l
}

func (l *apiLimits) counts() []countRange {
	return []countRange{
		{"max-conns", &l.conns, 16, 1 << 20},
		{"max-tcp-conns", &l.tcpConns, 16, 1 << 20},
		{"max-streams", &l.streams, 1, 1 << 20},
		{"fd-reserve", &l.fdReserve, 64, 1 << 20},
		{"diff-memory", &l.diffMiB, 16, 1 << 16},
	}
}

func (l *apiLimits) durations() []durationRange {
	return []durationRange{{"idle-timeout", &l.idle, time.Second, time.Hour}}
}

// check refuses a setting outside its range, naming it.
func (l *apiLimits) check() error {
	for _, c := range l.counts() {
		if *c.v < c.min || *c.v > c.max {
			return fmt.Errorf("--%s %d: want %d to %d: %w", c.flag, *c.v, c.min, c.max, errUsage)
		}
	}
	for _, d := range l.durations() {
		if *d.v < d.min || *d.v > d.max {
			return fmt.Errorf("--%s %v: want %v to %v: %w", d.flag, *d.v, d.min, d.max, errUsage)
		}
	}
	return nil
}

// apply sets the limits in o.
func (l *apiLimits) apply(o *daemon.Options) {
	o.MaxSocketConns, o.MaxConns, o.MaxStreams, o.FDReserve = l.conns, l.tcpConns, l.streams, l.fdReserve
	o.IdleTimeout = l.idle
	o.DiffMemory = int64(l.diffMiB) << 20
}
