// Package datadir checks and repairs a data directory: its index against
// its content store. Check reads without changing anything; the repairs
// (Dir's methods) move what the index cannot explain, or what no longer
// hashes to its name, to the quarantine — never removing it — bring back
// from there what the index needs, point skills whose current content is
// gone at their newest version that has some, and rebuild a lost index from
// the store's own metadata. A damaged data directory is a *DamagedError,
// saying how to repair it. The catalog opens the data directory and takes
// its locks; this package works on what it opened.
package datadir
