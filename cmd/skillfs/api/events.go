package api

import (
	"time"

	"skillfs/skills"
)

// Event is what tool loaders receive on the event stream.
type Event struct {
	// ID orders events; it keeps growing across restarts (the index gives
	// it) and is the stream's "id:", to resume from with Last-Event-ID.
	ID      int64            `json:"id"`
	Type    skills.EventKind `json:"type"`
	Session string           `json:"session"`
	// Parent is set on the events of a sub-agent session: the id of its
	// parent, whose stream has them too.
	Parent string    `json:"parent,omitempty"`
	Slug   string    `json:"slug,omitempty"`
	At     time.Time `json:"at"`
	// Tools and MCPs are, on an activated event (and only there), the tools
	// and MCP servers the skill adds: its own dependencies, as the
	// activations query reports them.
	Tools []string `json:"tools,omitzero"`
	MCPs  []string `json:"mcps,omitzero"`
	// Host is, on a moved event (and only there), the id of the host that
	// serves the session from then on.
	Host string `json:"host,omitempty"`
	// Reason says, on a resync or unauthorized event, why the stream cannot
	// go on.
	Reason string `json:"reason,omitempty"`
}
