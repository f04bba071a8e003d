package datadir

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"skillfs/index"
	"skillfs/skills"
	"skillfs/skills/store"
)

// DamagedError is a data directory whose index and content store do not
// belong together. Nothing was changed; the message says how to repair it.
type DamagedError struct {
	Home    string
	Problem string
}

// Error says what is wrong and what to do.
func (e *DamagedError) Error() string {
	return fmt.Sprintf("data directory %s is damaged: %s; nothing was changed. "+
		"`skillfs --home %s check` shows the details; stop any `skillfs serve` on it and run "+
		"`skillfs --home %s check --repair` to rebuild what can be rebuilt (the damaged index is kept beside it)",
		e.Home, e.Problem, e.Home, e.Home)
}

// Unwrap makes errors.Is(err, skills.ErrDamaged) match.
func (e *DamagedError) Unwrap() error { return skills.ErrDamaged }

// Index states of a data directory, as a check reports them.
const (
	IndexOK      = "ok"
	IndexNew     = "new"     // none yet, and nothing published: a new data directory
	IndexMissing = "missing" // none, beside published content
	IndexEmpty   = "empty"   // an empty file (or no tables), beside published content
	IndexDamaged = "damaged" // not readable as an index
	IndexForeign = "foreign" // the index of another data directory
)

// State is what can be learnt of a data directory without opening its
// index.
type State struct {
	IndexExists    bool
	IndexZeroBytes bool // zero bytes: SQLite would take it for a new database
	IndexNotFile   bool // a FIFO, a directory...: never opened
	WALExists      bool
	Stored         int // version directories in the store
	StoreID        string
}

// Inspect looks at a data directory's files.
func Inspect(home string) (*State, error) {
	// The order matters when another process is creating this data
	// directory at the same time: it writes the index, then its write-ahead
	// log, then the store's identity. Reading them in the reverse order
	// never sees a later one without the earlier ones.
	st := &State{}
	store := &store.Store{Root: filepath.Join(home, StoreDir)}
	var err error
	if st.StoreID, err = store.ID(); err != nil {
		return nil, fmt.Errorf("inspect data directory %s: %w", home, err)
	}
	vs, err := store.Versions()
	if err != nil {
		if _, serr := os.Stat(filepath.Join(store.Root, "skills")); !errors.Is(serr, iofs.ErrNotExist) {
			return nil, fmt.Errorf("inspect data directory %s: %w", home, err)
		}
	}
	for _, hs := range vs {
		st.Stored += len(hs)
	}
	if _, err := os.Lstat(filepath.Join(home, IndexFile+"-wal")); err == nil {
		st.WALExists = true
	}
	fi, err := os.Lstat(filepath.Join(home, IndexFile))
	switch {
	case err == nil && !fi.Mode().IsRegular():
		st.IndexExists, st.IndexNotFile = true, true
	case err == nil:
		st.IndexExists = true
		st.IndexZeroBytes = fi.Size() == 0
	case !errors.Is(err, iofs.ErrNotExist):
		return nil, fmt.Errorf("inspect data directory %s: %w", home, err)
	}
	return st, nil
}

// Damage says what is wrong with a data directory before its index is
// opened, or "".
func (st *State) Damage() string {
	switch {
	case st.IndexNotFile:
		return fmt.Sprintf("%s is not a regular file", IndexFile)
	case !st.IndexExists && st.WALExists:
		return fmt.Sprintf("%s is missing but its write-ahead log %s-wal is there", IndexFile, IndexFile)
	case !st.IndexExists && (st.Stored > 0 || st.StoreID != ""):
		return fmt.Sprintf("%s is missing, but the content store holds %d published versions", IndexFile, st.Stored)
	case st.IndexZeroBytes && (st.Stored > 0 || st.StoreID != ""):
		return fmt.Sprintf("%s is empty, but the content store holds %d published versions", IndexFile, st.Stored)
	}
	return ""
}

// VersionRef names one version.
type VersionRef struct {
	Slug string `json:"slug"`
	Hash string `json:"hash"`
}

// Report is what a check found in a data directory and what a repair (or a
// daemon start) did about it. Its JSON is printed by `skillfs check --json`.
type Report struct {
	Home        string       `json:"home"`
	Index       string       `json:"index"` // one of the Index* states
	IndexError  string       `json:"index_error,omitempty"`
	Identity    string       `json:"identity,omitempty"`
	Skills      int          `json:"skills"`
	Users       int          `json:"users"`
	Sessions    int          `json:"sessions"`
	Versions    int          `json:"versions"` // versions the index knows
	Stored      int          `json:"stored"`   // version directories in the store
	Unexplained []VersionRef `json:"unexplained"`
	Missing     []VersionRef `json:"missing"`
	Mismatched  []VersionRef `json:"mismatched"`
	Unreadable  []VersionRef `json:"unreadable"`
	NoMetadata  []VersionRef `json:"no_metadata"`
	// With a shared index the data directory is one host of a fleet and
	// its store this host's cache of the fleet's content: the index is
	// never rebuilt from it. Versions the index names that the cache lacks
	// are then no damage (fetched on first use) but NotCached; NoContent
	// and Unfetchable are versions whose content the index lacks, which
	// this host holds (stored by the next start or `check --repair`) or
	// does not (only the host that holds them can store them).
	Shared      bool                `json:"shared,omitempty"`
	NotCached   int                 `json:"not_cached,omitempty"`
	NoContent   []VersionRef        `json:"no_content,omitempty"`
	Unfetchable []VersionRef        `json:"unfetchable,omitempty"`
	Quarantine  []store.Quarantined `json:"quarantine"`
	Actions     []string            `json:"actions"`
	OK          bool                `json:"ok"`
}

// NewReport is an empty report on home.
func NewReport(home string) *Report {
	return &Report{Home: home, Unexplained: []VersionRef{}, Missing: []VersionRef{}, Mismatched: []VersionRef{}, Unreadable: []VersionRef{},
		NoMetadata: []VersionRef{}, Quarantine: []store.Quarantined{}, Actions: []string{}}
}

// Act records what a repair did.
func (r *Report) Act(format string, a ...any) {
	r.Actions = append(r.Actions, fmt.Sprintf(format, a...))
}

// SetQuarantine records what the quarantine holds (none: an empty list).
func (r *Report) SetQuarantine(q []store.Quarantined) {
	if q == nil {
		q = []store.Quarantined{}
	}
	r.Quarantine = q
}

// Finish sets OK: the index is sound and explains the store exactly.
func (r *Report) Finish() *Report {
	r.OK = r.Index == IndexOK && len(r.Unexplained) == 0 && len(r.Missing) == 0 && len(r.Mismatched) == 0 &&
		len(r.Unreadable) == 0 && len(r.NoContent) == 0 && len(r.Unfetchable) == 0
	return r
}

// Check examines the data directory home without changing anything: the
// index's integrity and identity, and the content store against it (every
// version's content is hashed again when verify is set). A data directory
// that does not exist is skills.ErrNotFound.
func Check(ctx context.Context, home string, verify bool) (*Report, error) {
	if _, err := os.Stat(home); err != nil {
		return nil, fmt.Errorf("data directory %q: %w", home, skills.ErrNotFound)
	}
	home, err := filepath.EvalSymlinks(home)
	if err != nil {
		return nil, fmt.Errorf("resolve data directory: %w", err)
	}
	r := NewReport(home)
	st, err := Inspect(home)
	if err != nil {
		return nil, err
	}
	store := &store.Store{Root: filepath.Join(home, StoreDir)}
	r.Stored = st.Stored
	q, err := store.Quarantined()
	if err != nil {
		return nil, err
	}
	r.SetQuarantine(q)
	db, state, err := OpenForCheck(ctx, home, st)
	r.Index = state
	if err != nil {
		r.IndexError = err.Error()
	}
	if db == nil {
		return r.Finish(), nil
	}
	defer db.Close()
	if err := Compare(ctx, db, store, r, verify); err != nil {
		return nil, err
	}
	return r.Finish(), nil
}

// OpenForCheck opens the index of an inspected data directory read-only in
// spirit (it may be migrated), telling what state it is in. The index is
// nil when it cannot be used.
func OpenForCheck(ctx context.Context, home string, st *State) (*index.DB, string, error) {
	switch {
	case !st.IndexExists && st.Damage() == "":
		return nil, IndexNew, nil
	case !st.IndexExists:
		return nil, IndexMissing, errors.New(st.Damage())
	case st.IndexZeroBytes && st.Damage() != "":
		return nil, IndexEmpty, errors.New(st.Damage())
	case st.IndexZeroBytes:
		return nil, IndexNew, nil
	case st.IndexNotFile:
		return nil, IndexDamaged, errors.New(st.Damage())
	}
	db, err := index.Open(filepath.Join(home, IndexFile))
	if err != nil {
		return nil, IndexDamaged, err
	}
	if err := db.Check(ctx); err != nil {
		db.Close()
		return nil, IndexDamaged, err
	}
	id, err := db.DataDirID(ctx)
	if err != nil {
		db.Close()
		return nil, IndexDamaged, err
	}
	if id != "" && st.StoreID != "" && id != st.StoreID {
		db.Close()
		return nil, IndexForeign, fmt.Errorf("the index belongs to data directory %s, the content store to %s", id, st.StoreID)
	}
	n, err := db.Count(ctx)
	if err != nil {
		db.Close()
		return nil, IndexDamaged, err
	}
	if n.Skills == 0 && n.Users == 0 && st.Stored > 0 {
		db.Close()
		return nil, IndexEmpty, fmt.Errorf("the index holds no skills and no users, but the content store holds %d published versions", st.Stored)
	}
	return db, IndexOK, nil
}

// Compare fills the report with the differences between a usable index and
// the store.
func Compare(ctx context.Context, db *index.DB, cs *store.Store, r *Report, verify bool) error {
	n, err := db.Count(ctx)
	if err != nil {
		return err
	}
	r.Skills, r.Users, r.Sessions, r.Versions = n.Skills, n.Users, n.Sessions, n.Versions
	if r.Identity, err = db.DataDirID(ctx); err != nil {
		return err
	}
	indexed, err := db.AllVersions(ctx)
	if err != nil {
		return err
	}
	onDisk, err := cs.Versions()
	if err != nil {
		return err
	}
	r.Stored = 0
	for _, hs := range onDisk {
		r.Stored += len(hs)
	}
	r.Unexplained, r.Missing = diffVersions(indexed, onDisk)
	for _, v := range indexed {
		if cs.VersionPath(v.Slug, v.Hash) == "" || !present(onDisk, v.Slug, v.Hash) {
			continue
		}
		if _, err := cs.ReadMeta(v.Slug, v.Hash); err != nil {
			r.NoMetadata = append(r.NoMetadata, VersionRef{v.Slug, v.Hash})
		}
		if verify {
			got, _, _, err := store.TreeHash(cs.VersionPath(v.Slug, v.Hash))
			switch {
			case err != nil && !errors.Is(err, skills.ErrSpecialFile):
				// Not readable now (EIO, EACCES): reported, never acted on.
				r.Unreadable = append(r.Unreadable, VersionRef{v.Slug, v.Hash})
			case err != nil || got != v.Hash:
				r.Mismatched = append(r.Mismatched, VersionRef{v.Slug, v.Hash})
			}
		}
	}
	return nil
}

// diffVersions lists what the store holds that the index does not know,
// and what the index knows that the store does not hold, sorted.
func diffVersions(indexed []*skills.Version, onDisk map[string][]string) (unexplained, missing []VersionRef) {
	unexplained, missing = []VersionRef{}, []VersionRef{}
	known := make(map[VersionRef]bool, len(indexed))
	for _, v := range indexed {
		known[VersionRef{v.Slug, v.Hash}] = true
		if !present(onDisk, v.Slug, v.Hash) {
			missing = append(missing, VersionRef{v.Slug, v.Hash})
		}
	}
	for slug, hashes := range onDisk {
		for _, h := range hashes {
			if !known[VersionRef{slug, h}] {
				unexplained = append(unexplained, VersionRef{slug, h})
			}
		}
	}
	sortRefs(unexplained)
	sortRefs(missing)
	return unexplained, missing
}

func present(onDisk map[string][]string, slug, hash string) bool {
	return slices.Contains(onDisk[slug], hash)
}

func sortRefs(r []VersionRef) {
	sort.Slice(r, func(i, j int) bool {
		if r[i].Slug != r[j].Slug {
			return r[i].Slug < r[j].Slug
		}
		return r[i].Hash < r[j].Hash
	})
}
