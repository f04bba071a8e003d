package api

// InstallRequest is the JSON body of POST /v1/sessions/{id}/skills, a
// session's install of a skill (its agent's install_skill): from a path as
// the session's sandbox sees it, or from a remote git source (with a ref).
// A request whose body is the skill itself (a ZIP or a SKILL.md) gives its
// name and now in the query instead.
type InstallRequest struct {
	Path   string `json:"path,omitempty"`
	Source string `json:"source,omitempty"`
	Ref    string `json:"ref,omitempty"`
	// Now has the session refreshed at once, so the skill is in its
	// readable set when the call returns; otherwise it joins at the
	// session's next refresh.
	Now bool `json:"now,omitempty"`
}

// SessionInstall is what a session's install did: the skill it installed
// (private to the session's user) and whether it is in the session's
// readable set already (Joined) or joins at its next refresh.
type SessionInstall struct {
	Slug     string   `json:"slug"`
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	Joined   bool     `json:"joined"`
	Warnings []string `json:"warnings"`
	// RenamedFrom is the slug the skill asked for when another skill
	// holds it.
	RenamedFrom string `json:"renamed_from,omitempty"`
}
