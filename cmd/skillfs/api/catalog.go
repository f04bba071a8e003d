package api

// The bodies of the catalog's requests. Their answers are the catalog's own
// types (catalog.Summary, catalog.Draft, ...), which the server sends as
// the catalog returns them.

// RollbackRequest makes an earlier version of a skill its current one.
type RollbackRequest struct {
	Version string `json:"version"`
}

// UpdateRequest updates skills from their sources: POST
// /v1/skills/{slug}/update (Skills and All left out) or /v1/skills/update.
type UpdateRequest struct {
	Skills []string `json:"skills"`
	All    bool     `json:"all"`
	DryRun bool     `json:"dry_run"`
	Force  bool     `json:"force"`
	Ref    string   `json:"ref"`
	Tag    string   `json:"tag"`
}

// DepsRequest sets the dependencies of a skill.
type DepsRequest struct {
	Skills []string `json:"skill_dependencies"`
	Tools  []string `json:"tool_dependencies"`
	MCPs   []string `json:"mcp_dependencies"`
}

// ShareRequest sets who may read and manage a skill (policy.ParseScope).
type ShareRequest struct {
	Read   string `json:"read"`
	Manage string `json:"manage"`
}

// DraftRequest prepares an install from a named source; an upload sends
// the skill itself as the body instead.
type DraftRequest struct {
	Source  string   `json:"source"`
	Ref     string   `json:"ref"`
	Path    string   `json:"path"`
	Skills  []string `json:"skills"`
	All     bool     `json:"all"`
	Replace bool     `json:"replace"`
}

// ConfirmRequest confirms a draft with the read scope of its new skills.
type ConfirmRequest struct {
	Share string `json:"share"`
}

// CuratedAddRequest adds a curated source.
type CuratedAddRequest struct {
	Source string `json:"source"`
	Ref    string `json:"ref"`
}

// CuratedInstallRequest installs a skill of the curated sources.
type CuratedInstallRequest struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Share  string `json:"share"`
}

// Deleted is the answer of DELETE /v1/skills/{slug}.
type Deleted struct {
	Deleted string `json:"deleted"`
}

// Discarded is the answer of DELETE /v1/drafts/{id}.
type Discarded struct {
	Discarded string `json:"discarded"`
}

// Removed is the answer of DELETE /v1/curated.
type Removed struct {
	Removed string `json:"removed"`
}
