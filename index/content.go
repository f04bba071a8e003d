package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"skillfs/skills"
	"skillfs/skills/store"
)

// ChunkSize is the most bytes one stored chunk holds: files are stored and
// fetched a chunk at a time, so a large file never sits in memory whole and
// no row is huge, and chunks that files share (a file unchanged between
// versions) are stored once.
const ChunkSize = 1 << 20

// contentBatch bounds the bytes of the chunks one transaction stores: an
// upload stores its chunks in transactions of about this much, so it holds
// the writer (and a SQLite file's lock) for a batch at a time, never for a
// whole version.
const contentBatch = 4 << 20

// listRows bounds the rows one statement of a listing inserts.
const listRows = 100

// Kinds of content entries.
const (
	entryDir  = "d"
	entryFile = "f"
	entryExec = "x"
)

// PutContent stores the content of version hash of slug: its entries in the
// order given, which must be TreeHash's (store.ContentChecker's rules),
// each file's bytes read through its Open, a chunk at a time, counted as
// they come; and meta, the version's metadata file (nil for none).
//
// The bytes are read twice. First only hashed: they must hash to hash
// (store.TreeHash's encoding), or the upload is refused with an error
// wrapping skills.ErrDamaged and nothing is stored. Then stored: the chunks
// the index lacks, in transactions of about contentBatch bytes that take
// no turn among other writes (a chunk is named by its bytes: storing one is
// never wrong, whoever else stores it), and last the version's listing, in
// one transaction: once it is there, every chunk it names is too (a foreign
// key holds it to that). Bytes that changed between the two readings are
// refused as damage, their chunks left unnamed. Content stored already
// is kept and nothing is read, so a second upload (another host's, or a
// retry) costs a query.
func (db *DB) PutContent(ctx context.Context, slug, hash string, meta []byte, files []store.ContentFile) error {
	if slug == "" || hash == "" {
		return fmt.Errorf("store content: no slug or hash: %w", skills.ErrInvalid)
	}
	fail := func(err error) error {
		return fmt.Errorf("store the content of version %s of skill %q: %w", hash, slug, err)
	}
	if have, err := db.HasContent(ctx, slug, hash); err != nil || have {
		return err
	}
	buf := make([]byte, ChunkSize)
	if _, got, err := scanContent(files, buf, nil); err != nil {
		return fail(err)
	} else if got != hash {
		return fail(fmt.Errorf("the content read hashes to %s: %w", got, skills.ErrDamaged))
	}
	batch := &chunkBatch{db: db, ctx: ctx, pending: map[string][]byte{}}
	listed, got, err := scanContent(files, buf, batch.add)
	if err == nil {
		err = batch.flush()
	}
	if err != nil {
		return fail(err)
	}
	if got != hash {
		return fail(fmt.Errorf("the content changed while it was stored (it now hashes to %s): %w", got, skills.ErrDamaged))
	}
	if err := db.putListing(ctx, slug, hash, meta, files, listed); err != nil {
		return fail(err)
	}
	return nil
}

// listedEntry is what one entry of a version holds, as read for upload.
type listedEntry struct {
	size int64
	sums []string // the file's chunks, in order
}

// scanContent reads the entries of a version in order, each file a chunk
// at a time into buf, checks the paths and order of the listing
// (store.ContentChecker), and returns what each entry holds and the tree
// hash of it all. chunk, when set, gets each chunk with its sum as it is
// read; the bytes are buf's, valid until it returns.
func scanContent(files []store.ContentFile, buf []byte, chunk func(sum string, data []byte) error) ([]listedEntry, string, error) {
	var check store.ContentChecker
	h := store.NewTreeHasher()
	out := make([]listedEntry, len(files))
	for i, f := range files {
		if err := check.Next(f.Path, f.Dir); err != nil {
			return nil, "", err
		}
		if f.Dir {
			h.Dir(f.Path)
			continue
		}
		sum, err := scanFile(f, buf, &out[i], chunk)
		if err != nil {
			return nil, "", err
		}
		h.File(f.Path, f.Exec, out[i].size, sum)
	}
	return out, h.Sum(), nil
}

// scanFile reads file f a chunk at a time into buf, recording its chunks'
// sums and its size in e as they are read (chunk gets each, when set), and
// returns the SHA-256 of its bytes.
func scanFile(f store.ContentFile, buf []byte, e *listedEntry, chunk func(sum string, data []byte) error) ([]byte, error) {
	if f.Open == nil {
		return nil, fmt.Errorf("%q: no content: %w", f.Path, skills.ErrInvalid)
	}
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	whole := sha256.New()
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			c := buf[:n]
			s := sha256.Sum256(c)
			sum := hex.EncodeToString(s[:])
			if chunk != nil {
				if err := chunk(sum, c); err != nil {
					return nil, err
				}
			}
			whole.Write(c)
			e.sums = append(e.sums, sum)
			e.size += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			return whole.Sum(nil), nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("read %q: %w", f.Path, rerr)
		}
	}
}

// chunkBatch gathers chunks to store, a batch at a time.
type chunkBatch struct {
	db      *DB
	ctx     context.Context
	pending map[string][]byte // sum → a copy of the bytes
	bytes   int
}

// add takes one chunk, storing the batch once it is big enough.
func (b *chunkBatch) add(sum string, data []byte) error {
	if _, ok := b.pending[sum]; ok {
		return nil
	}
	b.pending[sum] = bytes.Clone(data)
	b.bytes += len(data)
	if b.bytes >= contentBatch {
		return b.flush()
	}
	return nil
}

// flush stores the chunks of the batch the index lacks, in one
// transaction, in the order of their sums (two uploads sharing chunks then
// wait for each other's rows in one order, never in a cycle), sending the
// bytes of only those it lacks.
func (b *chunkBatch) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	sums := slices.Sorted(maps.Keys(b.pending))
	err := b.db.writeUnordered(b.ctx, func(tx *txn) error {
		have, err := queryStrings(b.ctx, tx, "SELECT sum FROM content_chunks WHERE sum IN (SELECT value FROM "+tx.d.textList+")", jsonIDs(sums))
		if err != nil {
			return err
		}
		for _, sum := range sums {
			if slices.Contains(have, sum) {
				continue
			}
			data := b.pending[sum]
			if _, err := tx.ExecContext(b.ctx, "INSERT INTO content_chunks (sum, size, data) VALUES (?, ?, ?) ON CONFLICT (sum) DO NOTHING",
				sum, len(data), data); err != nil {
				return err
			}
		}
		return nil
	})
	clear(b.pending)
	b.bytes = 0
	return err
}

// putListing stores the listing of a version whose chunks are stored, in
// one transaction, listRows rows a statement; a listing stored meanwhile
// (another host's upload) is kept.
func (db *DB) putListing(ctx context.Context, slug, hash string, meta []byte, files []store.ContentFile, listed []listedEntry) error {
	created, err := encodeTime(db.now())
	if err != nil {
		return err
	}
	var entries, parts [][]any
	for seq, f := range files {
		kind := entryDir
		switch {
		case f.Dir:
		case f.Exec:
			kind = entryExec
		default:
			kind = entryFile
		}
		mtime, err := encodeTime(f.MTime)
		if err != nil {
			return fmt.Errorf("%q: %w", f.Path, err)
		}
		entries = append(entries, []any{slug, hash, seq, f.Path, kind, listed[seq].size, mtime})
		for part, sum := range listed[seq].sums {
			parts = append(parts, []any{slug, hash, seq, part, sum})
		}
	}
	return db.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO content_versions (slug, hash, meta, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (slug, hash) DO NOTHING`, slug, hash, meta, created)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // stored meanwhile
		}
		if err := insertRows(ctx, tx, "content_entries (slug, hash, seq, path, kind, size, mtime)", entries); err != nil {
			return err
		}
		return insertRows(ctx, tx, "content_parts (slug, hash, seq, part, sum)", parts)
	})
}

// insertRows inserts rows into table (its name and columns), listRows rows
// a statement.
func insertRows(ctx context.Context, tx *txn, table string, rows [][]any) error {
	for len(rows) > 0 {
		n := min(len(rows), listRows)
		one := "(" + strings.Repeat("?, ", len(rows[0])-1) + "?)"
		q := "INSERT INTO " + table + " VALUES " + strings.Repeat(one+", ", n-1) + one
		args := make([]any, 0, n*len(rows[0]))
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// HasContent reports whether the content of version hash of slug is stored.
func (db *DB) HasContent(ctx context.Context, slug, hash string) (bool, error) {
	var ok bool
	err := db.read(ctx, func(tx *txn) error {
		return tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM content_versions WHERE slug = ? AND hash = ?)", slug, hash).Scan(&ok)
	})
	if err != nil {
		return false, fmt.Errorf("look up the content of version %s of skill %q: %w", hash, slug, err)
	}
	return ok, nil
}

// ContentManifest returns the stored listing of version hash of slug, its
// entries in order with their chunks' sums (skills.ErrNotFound when none is
// stored). What it says is not checked here: the host that writes it out
// checks every path, chunk and the tree hash (store.WriteContent).
func (db *DB) ContentManifest(ctx context.Context, slug, hash string) (*store.ContentManifest, error) {
	m := &store.ContentManifest{Slug: slug, Hash: hash}
	err := db.read(ctx, func(tx *txn) error {
		err := tx.QueryRowContext(ctx, "SELECT meta FROM content_versions WHERE slug = ? AND hash = ?", slug, hash).Scan(&m.Meta)
		if errors.Is(err, sql.ErrNoRows) {
			return skills.ErrNotFound
		}
		if err != nil {
			return err
		}
		bySeq := map[int]int{} // seq → index in m.Entries
		rows, err := tx.QueryContext(ctx, "SELECT seq, path, kind, size, mtime FROM content_entries WHERE slug = ? AND hash = ? ORDER BY seq", slug, hash)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seq int
			var kind string
			var mtime sql.NullInt64
			var e store.ContentEntry
			if err := rows.Scan(&seq, &e.Path, &kind, &e.Size, &mtime); err != nil {
				return err
			}
			e.Dir, e.Exec, e.MTime = kind == entryDir, kind == entryExec, decodeTime(mtime)
			bySeq[seq] = len(m.Entries)
			m.Entries = append(m.Entries, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		parts, err := tx.QueryContext(ctx, "SELECT seq, sum FROM content_parts WHERE slug = ? AND hash = ? ORDER BY seq, part", slug, hash)
		if err != nil {
			return err
		}
		defer parts.Close()
		for parts.Next() {
			var seq int
			var sum string
			if err := parts.Scan(&seq, &sum); err != nil {
				return err
			}
			if i, ok := bySeq[seq]; ok {
				m.Entries[i].Chunks = append(m.Entries[i].Chunks, sum)
			}
		}
		return parts.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read the content listing of version %s of skill %q: %w", hash, slug, err)
	}
	return m, nil
}

// Chunk returns the bytes of the chunk named sum (skills.ErrNotFound when
// none is stored), as stored: the caller checks them against sum.
func (db *DB) Chunk(ctx context.Context, sum string) ([]byte, error) {
	var data []byte
	err := db.read(ctx, func(tx *txn) error {
		err := tx.QueryRowContext(ctx, "SELECT data FROM content_chunks WHERE sum = ?", sum).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			return skills.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read chunk %s: %w", sum, err)
	}
	return data, nil
}

// VersionsWithoutContent lists the versions whose content is not stored
// (published before the index was shared, or by a host that could not
// upload it), by slug, oldest first.
func (db *DB) VersionsWithoutContent(ctx context.Context) ([]*skills.Version, error) {
	return readAll(ctx, db, "list versions without content", scanVersion, "SELECT "+versionColumns+` FROM versions v
		WHERE NOT EXISTS (SELECT 1 FROM content_versions c WHERE c.slug = v.slug AND c.hash = v.hash)
		ORDER BY slug, seq`)
}
