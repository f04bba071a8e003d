package manifest

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// Frontmatter keys that Parse reads.
const (
	KeyName                   = "name"
	KeySlug                   = "slug"
	KeyDescription            = "description"
	KeyLicense                = "license"
	KeyCompatibility          = "compatibility"
	KeyMetadata               = "metadata"
	KeyAllowedTools           = "allowed-tools"
	KeySkillDependencies      = "skill_dependencies"
	KeyToolDependencies       = "tool_dependencies"
	KeyMCPDependencies        = "mcp_dependencies"
	KeyDisableModelInvocation = "disable-model-invocation"
	KeyUserInvocable          = "user-invocable"
)

// manifestKeys are the top-level frontmatter keys that draw no "unknown key"
// warning, in either mode: the ones skillfs reads, and the ones the agents
// define, which skillfs keeps in the file untouched for the agent to read.
// Where each comes from (the products' own documentation and loaders):
//
//   - skillfs: slug, skill_dependencies, tool_dependencies, mcp_dependencies.
//   - Agent Skills specification: name, description, license, compatibility,
//     metadata, allowed-tools.
//   - OpenCode (its skills documentation): name, description, license,
//     compatibility, metadata; it ignores every other key.
//   - Codex (its skills documentation and skill loader): name, description,
//     and metadata, where it reads metadata.short-description (aliases
//     shortDescription, short_description). Its other settings (interface,
//     dependencies, invocation policy) live in agents/openai.yaml beside
//     SKILL.md, not in the frontmatter.
//   - Claude Code (its skills frontmatter reference, and the frontmatter
//     type of its loader): name, description, when_to_use, argument-hint,
//     arguments, disable-model-invocation, user-invocable, allowed-tools,
//     model, effort, context, agent, hooks, paths, shell, version, and
//     hide-from-slash-command-tool (a key of its slash commands, which share
//     the loader with skills).
//   - Cursor (its rules, read by the agents that load them as skills):
//     alwaysApply and globs, which skillfs honours (see rules).
//   - when-to-use: the hyphenated spelling of when_to_use, which authors
//     write by analogy with the other hyphenated keys; no agent reads it, but
//     it is no mistake worth a warning either.
var manifestKeys = map[string]bool{
	// skillfs and the Agent Skills specification.
	KeyName: true, KeySlug: true, KeyDescription: true, KeyLicense: true,
	KeyCompatibility: true, KeyMetadata: true, KeyAllowedTools: true,
	KeySkillDependencies: true, KeyToolDependencies: true, KeyMCPDependencies: true,
	// Cursor's rules.
	KeyAlwaysApply: true, KeyGlobs: true,
	// Claude Code.
	KeyDisableModelInvocation: true, KeyUserInvocable: true,
	"argument-hint": true, "arguments": true, "when_to_use": true, "when-to-use": true,
	"model": true, "effort": true, "context": true, "agent": true, "hooks": true,
	"paths": true, "shell": true, "version": true, "hide-from-slash-command-tool": true,
}

// flag reads an on/off key of the agents: a YAML boolean, or the string
// "true" or "false" in any case, as the agents' loaders accept. Anything else
// is a warning (in both modes: the Agent Skills rules do not cover these
// keys) and leaves the default; null or an absent key is the default.
func (p *manifestParser) flag(key string, n *yaml.Node, def bool) bool {
	if n == nil {
		return def
	}
	n = yamlDeref(n)
	if n.Kind == yaml.ScalarNode {
		if yamlIsNull(n) {
			return def
		}
		switch strings.ToLower(strings.TrimSpace(n.Value)) {
		case "true":
			return true
		case "false":
			return false
		}
		p.warn(key, "%q is not true or false; using %t", n.Value, def)
		return def
	}
	p.warn(key, "must be true or false; using %t", def)
	return def
}
