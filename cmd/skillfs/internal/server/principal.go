package server

import (
	"context"
	"log/slog"
)

// Role is what a caller of the API may do.
type Role int

const (
	// RoleNone is a caller that proved nothing (a TCP request without a
	// token it could be told from): it is answered 401.
	RoleNone Role = iota
	// RoleOperator is the operator: the 0600 socket, the TCP listener's
	// token, or a platform token of role operator. It may do everything,
	// and act as any user (api.ActAsHeader).
	RoleOperator
	// RoleReader is a platform token of role reader: sessions, their
	// activations and events, and the catalog's listing; nothing that
	// changes state.
	RoleReader
	// RoleSession is a session's own credential (its token, or the API
	// socket put into its sandbox): its own session, and what an agent
	// does in it.
	RoleSession
)

// String is the role's name as tokens and logs spell it.
func (r Role) String() string {
	switch r {
	case RoleOperator:
		return "operator"
	case RoleReader:
		return "reader"
	case RoleSession:
		return "session"
	}
	return "none"
}

// Principal is who makes a request, as the request's credential proves.
type Principal struct {
	Role Role
	// Session is the session a RoleSession caller holds the credential of.
	Session string
	// Token is the name of the platform token the request carried ("" for
	// the socket, the listener's own token, and session credentials).
	Token string
	// Via says how the credential came: "socket", "tcp", "sandbox-socket".
	Via string
	// PeerPID and PeerUID are the peer of a Unix socket connection
	// (SO_PEERCRED), 0 when unknown.
	PeerPID, PeerUID int
	// Hash is the hash of the session or platform token that proved the
	// principal, as Credentials know it ("" when no such token did: the
	// socket, the listener's own token, a sandbox's socket). An event
	// stream keeps it to ask again whether the token still proves the
	// principal (Credentials.Recheck); the token itself is never kept.
	Hash TokenHash
}

// TokenHash is a token's hash as Credentials look it up. It formats and
// logs as a placeholder, never its value.
type TokenHash string

// String is a placeholder saying whether h is set.
func (h TokenHash) String() string {
	if h == "" {
		return ""
	}
	return "(token hash)"
}

// LogValue is String: a log line never holds a hash.
func (h TokenHash) LogValue() slog.Value { return slog.StringValue(h.String()) }

type principalKey struct{}

// WithPrincipal is ctx carrying p: what a listener whose connections are a
// credential of their own (the API socket in a sandbox) puts in each
// connection's context, and what the authentication middleware puts in a
// request's.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf is the principal ctx carries; ok is false when it carries
// none.
func PrincipalOf(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}
