// Package store is the versioned content store: published versions of
// skills, each a read-only tree named by its tree hash with its metadata
// beside it, written from staging or from content chunks, quarantined and
// restored, swept, and exported as a ZIP archive.
package store
