package api

import "time"

// Health is the answer of GET /v1/health.
type Health struct {
	OK       bool `json:"ok"`
	Sessions int  `json:"sessions"` // sessions served
}

// Ok is the answer of a call that has nothing more to say.
type Ok struct {
	OK bool `json:"ok"`
}

// Check is one part of the daemon's readiness.
type Check struct {
	Name  string `json:"name"` // mount, index, store
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Readiness says whether the daemon can do its work (GET /v1/ready).
type Readiness struct {
	Ready  bool    `json:"ready"`
	Checks []Check `json:"checks"`
}

// NotReady is the answer of GET /v1/ready when a check fails: the error
// shape with the checks.
type NotReady struct {
	Error
	Readiness
}

// Status is the daemon at a glance, for `skillfs status`.
type Status struct {
	Home      string       `json:"home"`
	Mount     string       `json:"mount"`
	Socket    string       `json:"socket"`
	Host      string       `json:"host"` // this daemon's host id (see `skillfs hosts`)
	Sessions  int          `json:"sessions"`
	Binds     int          `json:"binds"`
	Skills    int          `json:"skills"`
	Versions  int          `json:"versions"`
	Users     int          `json:"users"`
	Readiness Readiness    `json:"readiness"`
	LastError *LoggedError `json:"last_error,omitempty"`
	// Keeper is the keeper holding the mount's connection (serve
	// --keeper); absent without one.
	Keeper *KeeperStatus `json:"keeper,omitempty"`
}

// KeeperStatus is the keeper of a daemon's mount.
type KeeperStatus struct {
	Socket  string `json:"socket"`
	Resumed bool   `json:"resumed"`         // this start took the kept connection back
	Holds   bool   `json:"holds"`           // the keeper holds the connection now: a crash of the daemon would not end the mount
	Error   string `json:"error,omitempty"` // why it does not, when it does not
}

// LoggedError is the last error the daemon logged.
type LoggedError struct {
	At      time.Time `json:"at"`
	Message string    `json:"message"`
}
