package catalog

import (
	"skillfs/cmd/skillfs/api"
	"skillfs/policy"
	"skillfs/skills"
)

// Summary is a skill as `skill list --json` and the API show it; its
// fields are a contract.
type Summary struct {
	Slug              string   `json:"slug"`
	Name              string   `json:"name"`
	Plugin            string   `json:"plugin,omitempty"` // the plugin it came from; it shows as plugin:name
	Description       string   `json:"description"`
	Version           string   `json:"version"`
	Enabled           bool     `json:"enabled"`
	SourceType        string   `json:"source_type"`
	SkillDependencies []string `json:"skill_dependencies"`
	ToolDependencies  []string `json:"tool_dependencies"`
	MCPDependencies   []string `json:"mcp_dependencies"`
	Share             struct {
		Read   string `json:"read"`
		Manage string `json:"manage,omitempty"`
	} `json:"share"`
	Creator string `json:"creator"`
}

// Summarize makes the Summary of a skill.
func Summarize(s *skills.Skill) Summary {
	j := Summary{
		Slug: s.Slug, Name: s.Name, Plugin: s.Plugin, Description: s.Description, Version: s.Version, Enabled: s.Enabled,
		SourceType: s.SourceType, SkillDependencies: api.NonNil(s.SkillDependencies),
		ToolDependencies: api.NonNil(s.ToolDependencies), MCPDependencies: api.NonNil(s.MCPDependencies), Creator: s.Creator,
	}
	j.Share.Read = policy.FormatScope(s.Share.Read)
	if s.Share.Manage.Kind != "" {
		j.Share.Manage = policy.FormatScope(s.Share.Manage)
	}
	return j
}
