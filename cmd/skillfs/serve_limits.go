package main

import (
	"time"

	"github.com/spf13/pflag"

	"skillfs/cmd/skillfs/internal/daemon"
	"skillfs/cmd/skillfs/internal/server"
)

// apiLimits are serve's settings of the API's limits: what its connections,
// event streams and comparisons of versions may take.
type apiLimits struct {
	conns, tcpConns, streams, fdReserve int
	idle                                time.Duration
	diffMiB                             int
}

// addAPILimits defines the flags of l on fs. Their ranges are rows of
// settingRules, checked with every other setting's.
func addAPILimits(fs *pflag.FlagSet) *apiLimits {
	l := &apiLimits{}
	fs.IntVar(&l.conns, "max-conns", server.DefaultSocketConns,
		"at most this many API connections open on the Unix socket at a time; at the cap the one idle longest makes room for a new client")
	fs.IntVar(&l.tcpConns, "max-tcp-conns", server.DefaultMaxConns, "the same for the --listen TCP address")
	fs.IntVar(&l.streams, "max-streams", server.DefaultMaxStreams,
		"at most this many event streams open on each listener, and at most half its connections; one more is answered 503 busy")
	fs.IntVar(&l.fdReserve, "fd-reserve", server.DefaultFDReserve,
		"descriptors of the open file limit kept for the mount, the store and the index: the connection caps are lowered to leave them")
	fs.IntVar(&l.diffMiB, "diff-memory", daemon.DefaultDiffMemory>>20,
		"MiB the comparisons of versions (diffs, the diffstats of listings and updates) may hold together; one that cannot be granted within 3 s is answered 503 busy")
	fs.DurationVar(&l.idle, "idle-timeout", server.DefaultIdleTimeout, "close an API connection kept alive this long without a request")
	return l
}

// apply sets the limits in o.
func (l *apiLimits) apply(o *daemon.Options) {
	o.MaxSocketConns, o.MaxConns, o.MaxStreams, o.FDReserve = l.conns, l.tcpConns, l.streams, l.fdReserve
	o.IdleTimeout = l.idle
	o.DiffMemory = int64(l.diffMiB) << 20
}
