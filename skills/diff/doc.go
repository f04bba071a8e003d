// Package diff compares two trees of a skill: which files were added,
// removed or changed, and line diffs of the changed text files, within a
// budget of bytes and steps; JSONWriter writes a comparison as JSON while
// its files are compared.
package diff
