// Package policy holds the catalog's access rules as pure functions: share
// scopes, permissions and the checks for each operation, dependency
// validation, the closure that makes a session's readable set, the tools to
// load for activated skills and skill mentions in text.
//
// It does no I/O: callers hand it snapshots (skills, users, registered tools)
// and act on its answers. It imports only the skills package.
package policy

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"skillfs/skills"
)

// scopeForms is the accepted textual form, quoted in errors so a user can fix
// the input without looking it up.
const scopeForms = "global, department:ID[,ID...] or user:UID[,UID...]"

// ParseScope parses the textual form of a scope: "global",
// "department:ID[,ID...]" or "user:UID[,UID...]". Surrounding spaces are
// trimmed from the whole and from each id; ids are sorted and de-duplicated;
// kinds are lower case and matched exactly.
// An unknown kind, ids on "global", an empty id or no ids at all is an error
// wrapping skills.ErrInvalid that quotes the input.
func ParseScope(s string) (skills.Scope, error) {
	kind, members, hasIDs := strings.Cut(strings.TrimSpace(s), ":")
	kind = strings.TrimSpace(kind)
	var sc skills.Scope
	switch kind {
	case skills.ScopeGlobal:
		if hasIDs {
			return skills.Scope{}, fmt.Errorf("parse scope %q: global takes no ids: %w", s, skills.ErrInvalid)
		}
		return skills.Scope{Kind: skills.ScopeGlobal}, nil
	case skills.ScopeDepartment, skills.ScopeUser:
		if !hasIDs || strings.TrimSpace(members) == "" {
			return skills.Scope{}, fmt.Errorf("parse scope %q: %s scope needs at least one id: %w", s, kind, skills.ErrInvalid)
		}
		sc = skills.Scope{Kind: kind, IDs: strings.Split(members, ",")}
	default:
		return skills.Scope{}, fmt.Errorf("parse scope %q: unknown kind %q, want %s: %w", s, kind, scopeForms, skills.ErrInvalid)
	}
	sc, err := NormalizeScope(sc)
	if err != nil {
		return skills.Scope{}, fmt.Errorf("parse scope %q: %w", s, err)
	}
	return sc, nil
}

// FormatScope returns the textual form of sc that ParseScope reads back. The
// unset scope (Kind "", a manage scope meaning "creator only") formats as "".
func FormatScope(sc skills.Scope) string {
	switch sc.Kind {
	case "":
		return ""
	case skills.ScopeGlobal:
		return skills.ScopeGlobal
	}
	return sc.Kind + ":" + strings.Join(sc.IDs, ",")
}

// NormalizeScope checks a scope that did not come through ParseScope (a JSON
// body, a database row) and returns it in canonical form: ids trimmed, sorted
// and unique, none on a global scope. The input's slice is not modified. The
// unset scope is refused here; NormalizeShare accepts it as a manage scope.
func NormalizeScope(sc skills.Scope) (skills.Scope, error) {
	switch sc.Kind {
	case skills.ScopeGlobal:
		if len(sc.IDs) > 0 {
			return skills.Scope{}, fmt.Errorf("global scope takes no ids, got %q: %w", sc.IDs, skills.ErrInvalid)
		}
		return skills.Scope{Kind: skills.ScopeGlobal}, nil
	case skills.ScopeDepartment, skills.ScopeUser:
	default:
		return skills.Scope{}, fmt.Errorf("unknown scope kind %q, want %s: %w", sc.Kind, scopeForms, skills.ErrInvalid)
	}
	ids := make([]string, 0, len(sc.IDs))
	for _, id := range sc.IDs {
		id = strings.TrimSpace(id)
		if err := checkID(id); err != nil {
			return skills.Scope{}, fmt.Errorf("%s scope: %w", sc.Kind, err)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return skills.Scope{}, fmt.Errorf("%s scope needs at least one id: %w", sc.Kind, skills.ErrInvalid)
	}
	slices.Sort(ids)
	return skills.Scope{Kind: sc.Kind, IDs: slices.Compact(ids)}, nil
}

// checkID refuses ids that could not survive the textual form (commas, edge
// spaces) or would garble tables and logs (control characters, bad UTF-8).
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty id: %w", skills.ErrInvalid)
	case !utf8.ValidString(id):
		return fmt.Errorf("id %q is not valid UTF-8: %w", id, skills.ErrInvalid)
	case strings.TrimSpace(id) != id:
		return fmt.Errorf("id %q has surrounding spaces: %w", id, skills.ErrInvalid)
	case strings.ContainsRune(id, ','):
		return fmt.Errorf("id %q contains a comma: %w", id, skills.ErrInvalid)
	case strings.ContainsFunc(id, unicode.IsControl):
		return fmt.Errorf("id %q contains a control character: %w", id, skills.ErrInvalid)
	}
	return nil
}

// NormalizeShare checks a share config and returns it in canonical form. The
// read scope is required. An unset manage scope (Kind "") means "the creator
// only" and stays unset. A set manage scope must lie inside the read scope, so
// that the config says what it means: anything inside a global read scope;
// departments inside departments and users inside users by id. A manage scope
// of another kind than a non-global read scope is refused, because membership
// of users in departments cannot be checked from a share alone.
func NormalizeShare(sh skills.Share) (skills.Share, error) {
	read, err := NormalizeScope(sh.Read)
	if err != nil {
		return skills.Share{}, fmt.Errorf("normalize share: read scope: %w", err)
	}
	out := skills.Share{Read: read}
	if sh.Manage.Kind == "" {
		if len(sh.Manage.IDs) > 0 {
			return skills.Share{}, fmt.Errorf("normalize share: manage scope has ids %q but no kind: %w", sh.Manage.IDs, skills.ErrInvalid)
		}
		return out, nil
	}
	manage, err := NormalizeScope(sh.Manage)
	if err != nil {
		return skills.Share{}, fmt.Errorf("normalize share: manage scope: %w", err)
	}
	out.Manage = manage
	if read.Kind == skills.ScopeGlobal {
		return out, nil
	}
	if manage.Kind != read.Kind {
		return skills.Share{}, fmt.Errorf("normalize share: manage scope %s must lie inside read scope %s (use the same kind, or a global read scope): %w",
			FormatScope(manage), FormatScope(read), skills.ErrInvalid)
	}
	if outside := missingIDs(manage.IDs, read.IDs); len(outside) > 0 {
		return skills.Share{}, fmt.Errorf("normalize share: manage scope %s must lie inside read scope %s; not in it: %s: %w",
			FormatScope(manage), FormatScope(read), strings.Join(outside, ", "), skills.ErrInvalid)
	}
	return out, nil
}

// missingIDs returns the elements of sub that are not in super, in sub's order.
func missingIDs(sub, super []string) []string {
	var out []string
	for _, id := range sub {
		if !slices.Contains(super, id) {
			out = append(out, id)
		}
	}
	return out
}

// DefaultShare is the share of a newly installed skill: readable by its creator
// alone, managed by its creator alone.
func DefaultShare(creator string) skills.Share {
	return skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{creator}}}
}
