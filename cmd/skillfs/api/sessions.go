package api

import (
	"time"

	"skillfs/skills"
)

// CreateRequest asks for a new session.
type CreateRequest struct {
	User    string   `json:"user"`
	Skills  []string `json:"skills"`
	All     bool     `json:"all"`
	Preload []string `json:"preload"`
	// Key is the client's key (a thread id): while a session of the user
	// (and parent) with this key is open, a create with it answers that
	// session (Existing) instead of opening a second one.
	Key string `json:"key,omitempty"`
	// Labels are the client's labels of the session (skills.CheckLabels).
	Labels map[string]string `json:"labels,omitempty"`
	// Parent makes the session a sub-agent of open session Parent: its
	// readable set is Skills (or, with none, all) of the parent's, at the
	// parent's versions.
	Parent string `json:"parent,omitempty"`
	// Caller is who asks (the API's acting user, the operator without one):
	// told why a skill it manages was left out, where the session's user
	// would be told only that it is missing. "" tells no one but the user.
	Caller string `json:"-"`
}

// SetRequest changes the skills of an open session: the create request's
// skills, all and preload, which replace the session's. Skills nil and all
// false is no request (an empty list is: the session then reads nothing).
type SetRequest struct {
	Skills  []string `json:"skills"`
	All     bool     `json:"all"`
	Preload []string `json:"preload"`
	Caller  string   `json:"-"` // as CreateRequest.Caller
}

// SessionInfo describes a session; its JSON is part of the CLI contract.
type SessionInfo struct {
	ID       string        `json:"id"`
	User     string        `json:"user"`
	Readable []string      `json:"readable"` // closure order
	Preload  []string      `json:"preload"`
	Path     string        `json:"path"` // the session's subtree in the mount of the host serving it
	Skipped  []Skipped     `json:"skipped"`
	Binds    []skills.Bind `json:"binds"`
	// Pinned are the skills the session asked for at a version, as
	// slug@hash: refresh and restarts keep them there.
	Pinned []string `json:"pinned"`
	// Host is the id of the host serving the session (see `skillfs hosts`).
	Host string `json:"host"`
	// Key, Labels and Parent are the create request's (omitted when unset).
	Key    string            `json:"key,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Parent string            `json:"parent,omitempty"`
	// Existing is set on the answer of a create whose key named an open
	// session: that session is answered, none was made.
	Existing bool `json:"existing,omitempty"`
	// Token is the session's credential (api.SessionTokenPrefix…), answered
	// once: by the create that made the session. Only its hash is kept;
	// `skillfs session token ID --rotate` makes a new one.
	Token string `json:"token,omitempty"`
}

// SessionQuery narrows a list of open sessions (GET /v1/sessions): to the
// host serving them, their user, their client key, and labels they all
// carry (each key=value). The zero query lists every open session.
type SessionQuery struct {
	Host   string
	User   string
	Key    string
	Labels map[string]string
}

// Skipped is a requested or depended-on skill left out of a readable set.
type Skipped struct {
	Slug   string `json:"slug"`
	Reason string `json:"reason"`
	Via    string `json:"via,omitempty"`
}

// Closed is the answer of DELETE /v1/sessions/{id}.
type Closed struct {
	Closed string `json:"closed"`
}

// BindResult is the answer of a bind made or removed
// (/v1/sessions/{id}/mounts); its request is a skills.Bind. APISocket is
// where the bind made the session's API socket, as the sandbox sees it.
type BindResult struct {
	PID       int    `json:"pid"`
	Session   string `json:"session"`
	Target    string `json:"target"`
	APISocket string `json:"api_socket,omitempty"`
}

// MoveRequest asks this host to take a session over from the host serving
// it. Force takes it over even while that host is alive.
type MoveRequest struct {
	Force bool `json:"force"`
}

// Moved is the answer to a move: the session as this host now serves it,
// the host that served it, and the binds that host had made, which do not
// follow (they live in that machine's mount namespaces): the sandbox must
// bind the session again here.
type Moved struct {
	SessionInfo
	From    string        `json:"from"`
	Dropped []skills.Bind `json:"dropped_binds"`
	Note    string        `json:"note,omitempty"`
}

// HostInfo is a host as `skillfs hosts` and GET /v1/hosts show it.
type HostInfo struct {
	skills.Host
	// Alive says whether its last heartbeat is within the grace.
	Alive bool `json:"alive"`
	// Self marks the host that answered.
	Self bool `json:"self"`
}

// Activations is what a tool loader asks for; its JSON is part of the CLI contract.
type Activations struct {
	Activated []skills.Activation `json:"activated"`
	Preloaded []string            `json:"preloaded"`
	Tools     []string            `json:"tools"`
	MCPs      []string            `json:"mcps"`
	Conflicts []string            `json:"conflicts,omitempty"`
}

// MentionsRequest is a message whose mentioned skills are asked for.
type MentionsRequest struct {
	Text string `json:"text"`
}

// Mentions is the answer of POST /v1/sessions/{id}/mentions.
type Mentions struct {
	Mentions []Mention `json:"mentions"`
}

// Mention is a skill named in a message, with its SKILL.md: mentioned as
// $slug, or invoked as a /skill:slug command, which also gives the body
// to inject and the command's arguments.
type Mention struct {
	Slug    string `json:"slug"`
	Path    string `json:"path"`
	Content string `json:"content"`
	Command bool   `json:"command,omitempty"`
	Body    string `json:"body,omitempty"` // a command's: SKILL.md without its frontmatter, trimmed
	Args    string `json:"args,omitempty"` // a command's: the rest of its line
}

// Resolved is the target of a skill:// URL, the body of
// GET /v1/sessions/{id}/resolve.
type Resolved struct {
	Data        []byte
	ContentType string
	ModTime     time.Time
}
