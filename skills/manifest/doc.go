// Package manifest parses, validates and rewrites a skill's SKILL.md: its
// YAML frontmatter (name, slug, description and the other keys), strictly
// for what is published and leniently for what is only read, and the one
// rewrite the catalog makes, of the slug; and it matches paths against the
// globs a SKILL.md gives (MatchGlob).
package manifest
