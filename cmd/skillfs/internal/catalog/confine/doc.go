// Package confine keeps the local paths an import reads where they belong:
// inside the import roots the operator chose, for a source named through
// the daemon's API (ImportRoots, never /proc, /sys or /dev), and off the
// data directory and the files of the index, for every source (SourceFence).
// Both decide on what the kernel reaches — device and inode, links
// followed — not on how a path is spelled, and read nothing of what they
// judge.
package confine
