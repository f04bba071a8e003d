package skills

import (
	"fmt"
	"strings"
)

// Limits of a session's client key and labels.
const (
	MaxSessionKeyLen = 256 // bytes of a client key
	MaxLabelKeyLen   = 63  // bytes of a label's key
	MaxLabelValueLen = 256 // bytes of a label's value
	MaxLabels        = 32  // labels of one session
)

// keyChar reports whether c may be in a client key or a label's value:
// printable ASCII but the space (a thread id, a URL path, a UUID, "a:b/c"
// all fit; nothing a log line or a shell quotes).
func keyChar(c byte) bool { return c > ' ' && c <= '~' }

// labelKeyChar reports whether c may be in a label's key: letters, digits
// and "._-/" ("team", "app.example/thread").
func labelKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-/", c) >= 0
}

// alnum reports whether c is an ASCII letter or digit.
func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// CheckSessionKey validates a session's client key: 1 to MaxSessionKeyLen
// bytes of printable ASCII without spaces. The error wraps ErrInvalid.
func CheckSessionKey(key string) error {
	if key == "" || len(key) > MaxSessionKeyLen {
		return fmt.Errorf("session key %q: want 1 to %d characters: %w", clip(key), MaxSessionKeyLen, ErrInvalid)
	}
	for i := 0; i < len(key); i++ {
		if !keyChar(key[i]) {
			return fmt.Errorf("session key %q: byte %d (%q) is not printable ASCII without spaces: %w", clip(key), i, key[i], ErrInvalid)
		}
	}
	return nil
}

// CheckLabel validates one label: a key of 1 to MaxLabelKeyLen letters,
// digits and "._-/", starting and ending with a letter or digit, and a
// value of at most MaxLabelValueLen bytes of printable ASCII without
// spaces (empty allowed). The error wraps ErrInvalid.
func CheckLabel(key, value string) error {
	if key == "" || len(key) > MaxLabelKeyLen {
		return fmt.Errorf("label key %q: want 1 to %d characters: %w", clip(key), MaxLabelKeyLen, ErrInvalid)
	}
	if !alnum(key[0]) || !alnum(key[len(key)-1]) {
		return fmt.Errorf("label key %q: must start and end with a letter or digit: %w", key, ErrInvalid)
	}
	for i := 0; i < len(key); i++ {
		if !labelKeyChar(key[i]) {
			return fmt.Errorf("label key %q: byte %d (%q) is not a letter, digit or one of ._-/: %w", key, i, key[i], ErrInvalid)
		}
	}
	if len(value) > MaxLabelValueLen {
		return fmt.Errorf("label %s: value of %d bytes, want at most %d: %w", key, len(value), MaxLabelValueLen, ErrInvalid)
	}
	for i := 0; i < len(value); i++ {
		if !keyChar(value[i]) {
			return fmt.Errorf("label %s: value byte %d (%q) is not printable ASCII without spaces: %w", key, i, value[i], ErrInvalid)
		}
	}
	return nil
}

// CheckLabels validates a session's labels: at most MaxLabels, each as
// CheckLabel says.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%d labels, want at most %d: %w", len(labels), MaxLabels, ErrInvalid)
	}
	for k, v := range labels {
		if err := CheckLabel(k, v); err != nil {
			return err
		}
	}
	return nil
}

// ParseLabel reads a label written KEY=VALUE (the value may be empty, and
// may hold "="), and checks it as CheckLabel does.
func ParseLabel(s string) (key, value string, err error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("label %q: want KEY=VALUE: %w", clip(s), ErrInvalid)
	}
	if err := CheckLabel(key, value); err != nil {
		return "", "", err
	}
	return key, value, nil
}

// ParseLabels reads labels written KEY=VALUE, each key once.
func ParseLabels(list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(list))
	for _, s := range list {
		k, v, err := ParseLabel(s)
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("label %s given twice: %w", k, ErrInvalid)
		}
		out[k] = v
	}
	return out, CheckLabels(out)
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
