// Package source turns what a user imports into a staged skill tree within
// the limits: a folder (with its symbolic links resolved inside it), a ZIP
// archive, a lone SKILL.md, agents' skill folders and plugins; it discovers
// the skills a tree holds and stages each one as a plain tree of regular
// files and directories.
package source
