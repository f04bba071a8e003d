// Package skills owns the catalog's domain: its types (Skill, User, Share,
// Scope, Version, Session, Event, ...), the error kinds behind exit codes,
// HTTP statuses and errnos, the import limits and the rules every skill tree
// follows (safe relative paths, regular files only, reserved names, stored
// modes). It imports only the standard library; its subpackages do the work:
// manifest reads SKILL.md, git and source read what is imported, store keeps
// the published versions and diff compares them. Index, policy, fs and the
// daemon all speak in the types declared here.
package skills

import (
	"errors"
	"time"
)

// ManifestName is the file that makes a directory a skill.
const ManifestName = "SKILL.md"

// Source types of a catalog skill.
const (
	SourceBuiltin = "builtin"
	SourceUpload  = "upload"
	SourceRemote  = "remote"
)

// Roles of a user.
const (
	RoleSuperadmin = "superadmin"
	RoleAdmin      = "admin"
	RoleUser       = "user"
)

// Scope kinds of a share config.
const (
	ScopeGlobal     = "global"
	ScopeDepartment = "department"
	ScopeUser       = "user"
)

// Sentinel errors shared by every package. Wrap them with context; test with
// errors.Is.
var (
	ErrNotFound        = errors.New("not found")
	ErrExists          = errors.New("already exists")
	ErrInvalidManifest = errors.New("invalid SKILL.md")
	ErrUnsafePath      = errors.New("unsafe path")
	ErrSpecialFile     = errors.New("not a regular file or directory")
	ErrLimit           = errors.New("limit exceeded")
	ErrNoManifest      = errors.New("no SKILL.md found")
	ErrAmbiguous       = errors.New("source holds several skills")
	// ErrAmbiguousVersion marks a version prefix that matches several
	// versions of a skill.
	ErrAmbiguousVersion = errors.New("ambiguous version")
	ErrPermission       = errors.New("permission denied")
	ErrInvalid          = errors.New("invalid argument")
	ErrDependency       = errors.New("invalid dependency")
	// ErrDamaged marks a data directory whose index and content store do
	// not belong together (an index missing, empty, corrupt or from another
	// data directory): nothing may change it until it is repaired.
	ErrDamaged = errors.New("damaged data directory")
	// ErrUnavailable marks a write or lookup that needs the shared index
	// (PostgreSQL) while it cannot be reached: nothing was changed; try again
	// when it is back. Views already served keep serving.
	ErrUnavailable = errors.New("index unavailable")
	// ErrBusy marks a request the daemon refused because one of its
	// limits is reached (event streams, memory for comparing versions, reads of sandbox paths):
	// nothing was done, and the same request may succeed in a moment.
	ErrBusy = errors.New("busy")
	// ErrElsewhere marks a change to a session that another host serves:
	// only the host serving a session's view may change it (or a host
	// that takes it over once that one is gone).
	ErrElsewhere = errors.New("served by another host")
)

// Scope is one side of a share config: everyone, some departments or some users.
type Scope struct {
	Kind string   `json:"kind"`          // ScopeGlobal, ScopeDepartment or ScopeUser
	IDs  []string `json:"ids,omitempty"` // department ids or uids; sorted, unique
}

// Share says who may read and who may manage a skill.
type Share struct {
	Read   Scope `json:"read"`
	Manage Scope `json:"manage"`
}

// User is someone skills are shared with and sessions act for.
type User struct {
	UID        string `json:"uid"`
	Role       string `json:"role"`
	Department string `json:"department,omitempty"`
	// CreatedAt is when the user was registered (zero: before the index
	// recorded it). A uid may be registered again after its user was
	// deleted; what the uid recorded before that time is not this user's.
	CreatedAt time.Time `json:"-"`
}

// Skill is a catalog entry: the index row of one slug.
type Skill struct {
	Slug              string    `json:"slug"`
	Name              string    `json:"name"`
	Description       string    `json:"description"`
	SourceType        string    `json:"source_type"`
	Source            string    `json:"source"` // where it was installed from (dir, URL, …); same source ⇒ reinstall
	Share             Share     `json:"share"`
	Enabled           bool      `json:"enabled"`
	SkillDependencies []string  `json:"skill_dependencies"`
	ToolDependencies  []string  `json:"tool_dependencies"`
	MCPDependencies   []string  `json:"mcp_dependencies"`
	Version           string    `json:"version"` // tree hash of the current version
	Creator           string    `json:"creator"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
	Plugin            string    `json:"plugin,omitempty"` // the plugin of a marketplace it came from; shown as plugin:name
}

// Worktree states of a version read from a local git working tree.
const (
	WorktreeClean    = "clean"
	WorktreeModified = "modified"
)

// Version is one immutable published tree of a skill, with its provenance.
type Version struct {
	Slug        string    `json:"slug"`
	Hash        string    `json:"hash"` // SHA-256 tree hash, hex
	Path        string    `json:"path"` // directory relative to the data directory: store/skills/<slug>/<hash>
	SourceType  string    `json:"source_type"`
	Source      string    `json:"source"`
	Ref         string    `json:"ref,omitempty"`
	Commit      string    `json:"commit,omitempty"`
	Installer   string    `json:"installer"`
	InstalledAt time.Time `json:"installed_at"`
	Previous    string    `json:"previous,omitempty"` // hash of the version it replaced
	Files       int       `json:"files"`
	Bytes       int64     `json:"bytes"`
	// Worktree says, for a version read from a local git working tree,
	// whether its files matched Commit: "clean" or "modified"; "" otherwise.
	Worktree string `json:"worktree,omitempty"`
}

// Pin is one skill of a session's readable set, at the version the session saw.
type Pin struct {
	Slug    string `json:"slug"`
	Version string `json:"version"` // tree hash
}

// Session is an agent session: who it acts for, what it asked for and what it pinned.
type Session struct {
	ID        string    `json:"id"`
	UID       string    `json:"uid"`
	All       bool      `json:"all"`       // requested every accessible skill
	Requested []string  `json:"requested"` // roots, in the order given (ignored when All)
	Preload   []string  `json:"preload"`
	Pins      []Pin     `json:"pins"` // the readable set in closure order
	CreatedAt time.Time `json:"created_at"`
	ClosedAt  time.Time `json:"closed_at,omitzero"`
	// Host is the id of the host (Host.ID) that serves the session's view:
	// only it changes the session, until another host takes it over.
	Host string `json:"host"`
	// Key is the client's key of the session (a thread id), "" for none:
	// among the open sessions of one user and parent, one key names at
	// most one session (see CheckSessionKey).
	Key string `json:"key,omitempty"`
	// Labels are the client's labels (see CheckLabels), nil for none.
	Labels map[string]string `json:"labels,omitempty"`
	// Parent is the id of the session this one is a sub-agent of ("" for
	// a top-level session): a child reads a subset of its parent's
	// readable set, at its parent's versions, and closes with it.
	Parent string `json:"parent,omitempty"`
}

// IsChild says whether s is a sub-agent session (one with a parent).
func (s *Session) IsChild() bool { return s.Parent != "" }

// Host is one daemon serving the catalog: a data directory with its mount,
// named by its store's identity. Several hosts share one index in a fleet;
// a data directory with its own index is the only host of its catalog.
type Host struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`          // a human name: the machine's, unless the operator chose one
	API       string    `json:"api,omitempty"` // the TCP address its API listens on, if any
	Mount     string    `json:"mount"`         // where its sessions' views are
	StartedAt time.Time `json:"started_at"`
	LastSeen  time.Time `json:"last_seen"` // its latest heartbeat
	Sessions  int       `json:"sessions"`  // open sessions it serves (read, never stored)
}

// Activation records that an agent opened a skill's SKILL.md in a session.
type Activation struct {
	Session string    `json:"-"`
	Slug    string    `json:"slug"`
	FirstAt time.Time `json:"first_at"`
	LastAt  time.Time `json:"last_at"`
	Opens   int64     `json:"opens"`
}

// Event is one entry of the event log: something that happened to a
// session, as the event streams report it. ID grows with every event and is
// never reused; Payload is a JSON object of the fields of its type (an
// activation's tools and MCP servers), or empty.
type Event struct {
	ID      int64
	At      time.Time
	Type    EventKind
	Session string
	// Parent is the parent of Session when it is a sub-agent's (set by the
	// index when the event is stored): the parent's stream has it too.
	Parent  string
	Slug    string
	Payload []byte
}

// EventKind is what an event reports. Its text is what the event log stores
// and what the event streams send as the event's type.
type EventKind string

// The kinds of events.
const (
	EventActivated EventKind = "activated" // a session's first read of a skill
	EventRevoked   EventKind = "revoked"   // a skill left a session's view
	EventRefreshed EventKind = "refreshed" // a session moved to the current versions
	EventChanged   EventKind = "changed"   // a session was given a new skill list
	EventMoved     EventKind = "moved"     // another host serves the session from now on
	EventClosed    EventKind = "closed"    // the session was closed
	// EventInstalled: the session installed a skill (its slug), which
	// joins its readable set at its next refresh.
	EventInstalled EventKind = "installed"
	// EventResync is never stored: a stream sends it when it cannot go on
	// (the events it missed are no longer kept).
	EventResync EventKind = "resync"
	// EventUnauthorized is never stored: a stream sends it when the token
	// it was opened with no longer proves its principal, and ends.
	EventUnauthorized EventKind = "unauthorized"
)

// FileRead is what the read audit knows of one file of a skill in a
// session: when the session first read it, and how many reads of it reached
// skillfs (reads the kernel served from its page cache never do).
type FileRead struct {
	Session string    `json:"-"`
	Slug    string    `json:"slug"`
	Path    string    `json:"path"`
	FirstAt time.Time `json:"first_at"`
	Reads   int64     `json:"reads"`
}

// Bind is a read-only bind of a session at Target. PID 0 means the daemon's
// own mount namespace; otherwise the bind lives in the mount namespace of
// process PID (a sandbox), identified by NS so that a restart re-attaches it
// only while that very namespace lives. APISocket, when set, is where the
// bind also put the session's API socket in that namespace (a Unix socket
// whose every connection acts as the session), and SocketID identifies the
// socket file made there ("dev:ino"), so that only that very file is ever
// removed or replaced.
type Bind struct {
	Target    string `json:"target"`
	PID       int    `json:"pid,omitempty"`
	NS        string `json:"ns,omitempty"`
	APISocket string `json:"api_socket,omitempty"`
	SocketID  string `json:"-"`
}

// DisplayName is how a skill shows in listings and prompts: plugin:name for
// the skills of a plugin.
func DisplayName(plugin, name string) string {
	if plugin == "" {
		return name
	}
	return plugin + ":" + name
}
