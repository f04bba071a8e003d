package index

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"skillfs/skills"
)

// ChunkSize is the most bytes one stored chunk holds: files are stored and
// fetched a chunk at a time, so a large file never sits in memory whole and
// no row is huge, and chunks that files share (a file unchanged between
// versions) are stored once.
const ChunkSize = 1 << 20

// Kinds of content entries.
const (
	entryDir  = "d"
	entryFile = "f"
	entryExec = "x"
)

// PutContent stores the content of version hash of slug: its entries in the
// order given, which must be TreeHash's (skills.ContentChecker's rules),
// each file's bytes read through its Open, a chunk at a time, counted as
// they come; and meta, the version's metadata file (nil for none). The
// bytes read must hash to hash (skills.TreeHash's encoding): anything else
// is refused with an error wrapping skills.ErrDamaged, and nothing is
// stored. Content already stored for the version is kept and nothing is
// read, so a second upload (another host's, or a retry) costs a query.
// Chunks stored already are not sent again.
//
// It is one transaction: the version's content is there entirely or not
// at all, and once it is, every chunk its listing names is there too.
func (db *DB) PutContent(ctx context.Context, slug, hash string, meta []byte, files []skills.ContentFile) error {
	if slug == "" || hash == "" {
		return fmt.Errorf("store content: no slug or hash: %w", skills.ErrInvalid)
	}
	created, err := encodeTime(db.now())
	if err != nil {
		return err
	}
	err = db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO content_versions (slug, hash, meta, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (slug, hash) DO NOTHING`, slug, hash, meta, created)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // stored already
		}
		var check skills.ContentChecker
		h := skills.NewTreeHasher()
		buf := make([]byte, ChunkSize)
		for seq, f := range files {
			if err := check.Next(f.Path, f.Dir); err != nil {
				return err
			}
			if f.Dir {
				if err := insertEntry(ctx, tx, slug, hash, seq, f, entryDir, 0); err != nil {
					return err
				}
				h.Dir(f.Path)
				continue
			}
			sums, size, sum, err := putChunks(ctx, tx, f, buf)
			if err != nil {
				return err
			}
			kind := entryFile
			if f.Exec {
				kind = entryExec
			}
			if err := insertEntry(ctx, tx, slug, hash, seq, f, kind, size); err != nil {
				return err
			}
			for part, s := range sums {
				if _, err := tx.ExecContext(ctx, "INSERT INTO content_parts (slug, hash, seq, part, sum) VALUES (?, ?, ?, ?, ?)",
					slug, hash, seq, part, s); err != nil {
					return err
				}
			}
			h.File(f.Path, f.Exec, size, sum)
		}
		if got := h.Sum(); got != hash {
			return fmt.Errorf("the content read hashes to %s: %w", got, skills.ErrDamaged)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store the content of version %s of skill %q: %w", hash, slug, err)
	}
	return nil
}

// insertEntry stores one entry of a version's listing.
func insertEntry(ctx context.Context, tx *sql.Tx, slug, hash string, seq int, f skills.ContentFile, kind string, size int64) error {
	mtime, err := encodeTime(f.MTime)
	if err != nil {
		return fmt.Errorf("%q: %w", f.Path, err)
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO content_entries (slug, hash, seq, path, kind, size, mtime) VALUES (?, ?, ?, ?, ?, ?, ?)",
		slug, hash, seq, f.Path, kind, size, mtime)
	return err
}

// putChunks reads file f a chunk at a time into buf, stores each chunk the
// index lacks, and returns the chunks' sums, the bytes read and their
// SHA-256.
func putChunks(ctx context.Context, tx *sql.Tx, f skills.ContentFile, buf []byte) (sums []string, size int64, sum []byte, err error) {
	if f.Open == nil {
		return nil, 0, nil, fmt.Errorf("%q: no content: %w", f.Path, skills.ErrInvalid)
	}
	r, err := f.Open()
	if err != nil {
		return nil, 0, nil, err
	}
	defer r.Close()
	whole := sha256.New()
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			c := buf[:n]
			s := sha256.Sum256(c)
			name := hex.EncodeToString(s[:])
			if err := putChunk(ctx, tx, name, c); err != nil {
				return nil, 0, nil, err
			}
			whole.Write(c)
			sums = append(sums, name)
			size += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			return sums, size, whole.Sum(nil), nil
		}
		if rerr != nil {
			return nil, 0, nil, fmt.Errorf("read %q: %w", f.Path, rerr)
		}
	}
}

// putChunk stores a chunk under its sum unless it is stored already: the
// bytes go over the connection only when they are needed.
func putChunk(ctx context.Context, tx *sql.Tx, sum string, data []byte) error {
	var have bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM content_chunks WHERE sum = ?)", sum).Scan(&have); err != nil {
		return err
	}
	if have {
		return nil
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO content_chunks (sum, size, data) VALUES (?, ?, ?) ON CONFLICT (sum) DO NOTHING",
		sum, len(data), data)
	return err
}

// HasContent reports whether the content of version hash of slug is stored.
func (db *DB) HasContent(ctx context.Context, slug, hash string) (bool, error) {
	var ok bool
	err := db.read(ctx, func(tx *sql.Tx) error {
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
// checks every path, chunk and the tree hash (skills.WriteContent).
func (db *DB) ContentManifest(ctx context.Context, slug, hash string) (*skills.ContentManifest, error) {
	m := &skills.ContentManifest{Slug: slug, Hash: hash}
	err := db.read(ctx, func(tx *sql.Tx) error {
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
			var e skills.ContentEntry
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
	err := db.read(ctx, func(tx *sql.Tx) error {
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
