// Package source turns what a user imports into a staged skill tree within
// the limits: it resolves any source spec — a folder (with its symbolic
// links resolved inside it), a ZIP archive, a lone SKILL.md, a git URL or
// repository, a common name of a hosted repository — to a tree (Resolve),
// reads agents' skill folders and plugins, discovers the skills a tree
// holds and what each asks to be (Found) and the provenance key each is
// recorded under (SkillKey), writes an online edit into a copy of a skill
// (EditFile), and stages each one as a plain tree of regular files and
// directories. Who may read what is the caller's policy, passed in
// (ResolveOptions.Check, Guard and Confine).
package source
