package skills

import "time"

// CuratedSource is a source an operator registered as curated: its skills
// are offered (the recommended list) but not installed.
type CuratedSource struct {
	Source      string    `json:"source"` // as it is read: a git URL, "URL#ref:path", or an absolute local path
	Ref         string    `json:"ref,omitempty"`
	AddedBy     string    `json:"added_by"`
	AddedAt     time.Time `json:"added_at"`
	Commit      string    `json:"commit,omitempty"`      // what the last refresh read
	RefreshedAt time.Time `json:"refreshed_at,omitzero"` // the last refresh that succeeded
	Error       string    `json:"error,omitempty"`       // why the last refresh failed
	Skills      int       `json:"skills"`                // how many skills it offers
}

// CuratedSkill is one skill a curated source offers.
type CuratedSkill struct {
	Slug        string    `json:"slug"` // the slug it asks for; installing may settle on another
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Source      string    `json:"source"`
	Ref         string    `json:"ref,omitempty"`
	Path        string    `json:"path"` // its folder in the source, "." for the root
	Commit      string    `json:"commit,omitempty"`
	RefreshedAt time.Time `json:"refreshed_at"`
	// Origin is the provenance its install records (Skill.Source): a
	// catalog skill with this source is this one, installed.
	Origin string `json:"-"`
}
