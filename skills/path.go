package skills

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// MaxNameBytes is the longest file name a stored skill may hold: what Linux
// filesystems accept, so a skill that imports can also be stored and served.
const MaxNameBytes = 255

// MaxPathBytes is the longest relative path a stored skill may hold. Depth
// and name limits alone allow paths far beyond PATH_MAX (4096 bytes), which
// no file system call could then take whole; a skill's path stays well
// within it wherever the data directory lies.
const MaxPathBytes = 1024

// CleanRelPath confines a relative slash-separated name: it returns the name
// with empty and "." components removed, or an error wrapping ErrUnsafePath
// when the name is empty, absolute ("/x", "C:/x"), holds a ".." component
// (also percent-encoded, once or several times over), a backslash, a NUL or
// another control character, is not valid UTF-8, or has a component longer
// than MaxNameBytes, or is longer than MaxPathBytes once cleaned. A name
// that only
// percent-decodes to something harmless is kept verbatim: "%20.txt" stays.
func CleanRelPath(name string) (string, error) {
	if err := CheckRelPath(name); err != nil {
		return "", fmt.Errorf("path %q: %w", name, err)
	}
	var parts []string
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." {
			continue
		}
		if len(c) > MaxNameBytes {
			return "", fmt.Errorf("path %q: a name is longer than %d bytes: %w", name, MaxNameBytes, ErrUnsafePath)
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("path %q: names no file: %w", name, ErrUnsafePath)
	}
	clean := strings.Join(parts, "/")
	if len(clean) > MaxPathBytes {
		return "", fmt.Errorf("path %q: %d bytes long, over %d: %w", name, len(clean), MaxPathBytes, ErrUnsafePath)
	}
	return clean, nil
}

// SafeJoin joins a relative slash name under root after CleanRelPath, so the
// result is always root itself or inside it.
func SafeJoin(root, name string) (string, error) {
	clean, err := CleanRelPath(name)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(clean)), nil
}

// CheckRelPath returns an ErrUnsafePath-wrapping reason why name cannot be
// confined, or nil.
func CheckRelPath(name string) error {
	if name == "" {
		return fmt.Errorf("empty name: %w", ErrUnsafePath)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("name is not valid UTF-8: %w", ErrUnsafePath)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == 0:
			return fmt.Errorf("NUL in name: %w", ErrUnsafePath)
		case c == '\\':
			return fmt.Errorf("backslash in name: %w", ErrUnsafePath)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("control character in name: %w", ErrUnsafePath)
		}
	}
	if err := checkEscape(name); err != nil {
		return err
	}
	// Decode %XX escapes until nothing changes, so %252e%252e is caught as
	// well as %2e%2e: whatever later layer decodes the name must still find
	// it confined.
	dec := name
	for {
		next := PercentDecode(dec)
		if next == dec {
			break
		}
		dec = next
		if err := checkEscape(dec); err != nil {
			return fmt.Errorf("percent-encoded: %w", err)
		}
		if strings.IndexByte(dec, 0) >= 0 {
			return fmt.Errorf("percent-encoded NUL in name: %w", ErrUnsafePath)
		}
		// Overlong encodings such as %c0%ae decode to invalid UTF-8; some
		// decoders read them as '.' or '/'.
		if !utf8.ValidString(dec) {
			return fmt.Errorf("percent-encoded invalid UTF-8 in name: %w", ErrUnsafePath)
		}
	}
	return nil
}

// checkEscape rejects absolute names and ".." components, treating both '/'
// and '\' as separators.
func checkEscape(s string) error {
	if s == "" {
		return nil
	}
	if s[0] == '/' || s[0] == '\\' {
		return fmt.Errorf("absolute name: %w", ErrUnsafePath)
	}
	if len(s) >= 2 && s[1] == ':' && isASCIILetter(s[0]) {
		return fmt.Errorf("name with a drive letter: %w", ErrUnsafePath)
	}
	for _, c := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if c == ".." {
			return fmt.Errorf("parent directory component: %w", ErrUnsafePath)
		}
	}
	return nil
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// PercentDecode replaces every valid %XX escape by its byte and leaves
// anything else, including a stray '%', as it is.
func PercentDecode(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return (c | 0x20) - 'a' + 10
}

// SplitSlash splits a slash path into its components, without empty and
// "." ones.
func SplitSlash(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}
