package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"skillfs/skills"
)

// An online edit writes one text file into a copy of a skill's tree, which
// is then staged as any import is.

// EditableExtensions are the text files online editing may write.
var EditableExtensions = []string{
	".md", ".txt", ".py", ".sh", ".bash", ".js", ".mjs", ".ts", ".json", ".yaml", ".yml",
	".toml", ".csv", ".tsv", ".html", ".css", ".xml", ".sql", ".rb", ".go", ".rs", ".ini",
	".cfg", ".conf", ".j2", ".tmpl", ".template",
}

// EditFile writes or (content == nil) removes one file of a tree; a file
// keeps its mode, a new one is 0644. Content is streamed through a
// textWriter, so at most max bytes of UTF-8 text are ever written.
func EditFile(tree, rel string, content io.Reader, max int64) error {
	target := filepath.Join(tree, filepath.FromSlash(rel))
	if content == nil {
		if rel == skills.ManifestName {
			return fmt.Errorf("SKILL.md cannot be removed: %w", skills.ErrInvalid)
		}
		if fi, err := os.Lstat(target); err != nil || fi.IsDir() {
			return fmt.Errorf("remove %s: no such file: %w", rel, skills.ErrNotFound)
		}
		if err := os.Remove(target); err != nil {
			return editPathError(rel, err)
		}
		return nil
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Lstat(target); err == nil {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a file: %w", rel, skills.ErrInvalid)
		}
		mode = fi.Mode().Perm()
		os.Chmod(target, mode|0o200)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return editPathError(rel, err)
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return editPathError(rel, err)
	}
	tw := &textWriter{w: f, rel: rel, max: max}
	_, err = io.Copy(tw, content)
	if err == nil {
		err = tw.finish()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// editPathError says what was wrong with a path to edit without naming the
// work tree it was applied in: a path through a file, or onto a directory,
// is bad input.
func editPathError(rel string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENAMETOOLONG) ||
		errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%s: not a file this skill can hold (a part of the path is a file, or it names a directory): %w", rel, skills.ErrInvalid)
	}
	return skills.RelError(rel, err)
}

// CheckEditable enforces which files online editing may write: text files
// with an allowed extension, never under a name an import leaves out (the
// edit would be staged like an import and change nothing).
func CheckEditable(rel string, writing bool) error {
	if err := CheckNotLeftOut(rel); err != nil {
		return err
	}
	for _, c := range strings.Split(rel, "/") {
		if strings.HasPrefix(c, ".skillfs") {
			return fmt.Errorf("%s: names starting with .skillfs are reserved for skillfs: %w", rel, skills.ErrUnsafePath)
		}
	}
	if !writing {
		return nil
	}
	ext := strings.ToLower(path.Ext(rel))
	if !slices.Contains(EditableExtensions, ext) {
		return fmt.Errorf("%s: only text files can be edited online (%s): %w", rel, strings.Join(EditableExtensions, " "), skills.ErrInvalid)
	}
	return nil
}

// textWriter passes UTF-8 text without NUL bytes through to w, failing at
// the first byte that breaks the rules or once more than max bytes came. A
// rune split between two writes is checked when it is whole.
type textWriter struct {
	w    io.Writer
	rel  string
	max  int64
	n    int64
	tail []byte // the start of a rune the last write ended in
}

func (t *textWriter) Write(p []byte) (int, error) {
	t.n += int64(len(p))
	if t.n > t.max {
		return 0, &skills.LimitError{Limit: skills.LimitFileBytes, Value: t.n, Max: t.max, Path: t.rel}
	}
	buf := append(t.tail, p...)
	// Hold back an incomplete rune at the end: up to 3 bytes.
	cut := len(buf)
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-3; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	if !utf8.Valid(buf[:cut]) || bytes.IndexByte(buf[:cut], 0) >= 0 {
		return 0, t.notText()
	}
	t.tail = append([]byte(nil), buf[cut:]...)
	if _, err := t.w.Write(buf[:cut]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// finish checks that nothing incomplete is left at the end.
func (t *textWriter) finish() error {
	if len(t.tail) > 0 {
		return t.notText()
	}
	return nil
}

func (t *textWriter) notText() error {
	return fmt.Errorf("%s: content is not UTF-8 text: %w", t.rel, skills.ErrInvalid)
}
