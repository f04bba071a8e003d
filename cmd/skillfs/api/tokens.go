package api

import (
	"strings"
	"time"
)

// The prefixes of the credentials the daemon makes, so that a token found
// in a file or a log is recognised for what it is (and a secret scanner can
// match it), and the daemon knows where to look one up.
const (
	// SessionTokenPrefix begins a session's token (SessionInfo.Token).
	SessionTokenPrefix = "sfs_s_"
	// PlatformTokenPrefix begins a named platform token (TokenCreated.Token).
	PlatformTokenPrefix = "sfs_p_"
)

// The roles of a platform token.
const (
	RoleOperator = "operator"
	RoleReader   = "reader"
)

// LooksLikeToken says whether s begins like a credential the daemon makes:
// what logs and error messages must never hold.
func LooksLikeToken(s string) bool {
	return strings.HasPrefix(s, SessionTokenPrefix) || strings.HasPrefix(s, PlatformTokenPrefix)
}

// SessionToken is the answer of POST /v1/sessions/{id}/token: the session's
// new token, shown this once. The token it had before no longer works.
type SessionToken struct {
	Session string `json:"session"`
	Token   string `json:"token"`
}

// Whoami is the answer of GET /v1/whoami: what the request's credential
// proves. Role is operator, reader or session; Session is the session of a
// session credential; User is the user the request acts as (the session's
// user for a session credential, the X-Skillfs-As user, else "operator");
// Token is the name of the platform token the request carried, "" for
// none.
type Whoami struct {
	Role    string `json:"role"`
	Session string `json:"session,omitempty"`
	User    string `json:"user"`
	Token   string `json:"token,omitempty"`
}

// TokenRequest asks for a named platform token (POST /v1/tokens). Expires
// is a duration from now ("24h", "90m") or an RFC 3339 time; "" for a
// token that does not expire.
type TokenRequest struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Expires string `json:"expires,omitempty"`
}

// TokenCreated is the answer of POST /v1/tokens: the token, shown this
// once (only its hash is kept).
type TokenCreated struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Token     string     `json:"token"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// TokenInfo is a platform token as GET /v1/tokens lists it: never the token
// or its hash.
type TokenInfo struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Revoked   bool       `json:"revoked"`
	Expired   bool       `json:"expired"`
}

// Revoked is the answer of DELETE /v1/tokens/{name}.
type Revoked struct {
	Revoked string `json:"revoked"`
}
