package git

import (
	"fmt"
	"strings"

	"skillfs/skills"
)

// Spec is a source as a user names it — a path, a file:// URL, or a git URL
// or scp-like address, each with an optional "#ref" or "#ref:path" suffix —
// parsed once (see ParseSpec), so that every step of an import is handed
// the parsed form instead of parsing the string again.
type Spec struct {
	// Given is the source as written, surrounding space included.
	Given string
	// Git is Given read as a git source (see ParseSource); a path without
	// '#' is its URL.
	Git Source
}

// ParseSpec parses the source s once (see ParseSource).
func ParseSpec(s string) Spec { return Spec{Given: s, Git: ParseSource(s)} }

// remoteSchemes are the URL schemes that name a repository on another host.
var remoteSchemes = []string{"https://", "http://", "ssh://", "git+ssh://", "ssh+git://", "git://"}

// IsRemote reports whether the source (with or without a "#ref" suffix)
// names a git repository on another host — an https, http, ssh or git URL, or an
// scp-like user@host:path — as opposed to anything on this machine (a path,
// a file:// URL). It looks at the source as written: see ResolveURL for where a
// clone of it actually reads.
func (s Spec) IsRemote() bool {
	return isRemoteURL(s.Git.URL)
}

// SourcePaths are the paths on this machine a read of a source reaches
// (see Spec.LocalPaths).
type SourcePaths struct {
	// Named are the paths the source names as written: a path (both with
	// and without its "#ref" suffix, as a file's name may hold a '#'), or
	// the path of a file:// URL.
	Named []string
	// Rewritten is the path on this machine that a URL rewrite of git's
	// configuration sends the source to, "" when none does. Where it lies
	// is the operator's business: it is never shown to whoever asked.
	Rewritten string
}

// Local reports whether a read of the source reaches this machine.
func (p SourcePaths) Local() bool { return len(p.Named) > 0 || p.Rewritten != "" }

// Spec.LocalPaths says where on this machine a read of the source (a path, a
// file:// URL or a git URL, each with or without a "#ref" suffix) reaches:
// none for a remote git URL (see IsRemote) that stays remote once the URL
// rewrites of git's configuration are applied (see ResolveURL).
// Callers that must not read files on this machine for whoever asks check
// these paths. Nothing is looked up on disk. err, wrapping ErrInvalid,
// says why the source cannot be read at all: a remote URL with a "." or ".."
// segment in its path, a rewrite leading outside its folder, or a file://
// URL (as written or rewritten) that names no path of this machine (a host
// other than localhost, a query).
func (spec Spec) LocalPaths() (SourcePaths, error) {
	s := strings.TrimSpace(spec.Given)
	u := spec.Git.URL
	var sp SourcePaths
	switch {
	case u == "" || isRemoteURL(u):
	case hasFileScheme(u):
		p, ok := localRepoPath(u)
		if !ok {
			return sp, fmt.Errorf("file URL %q: a file URL names a path of this machine as file:///PATH: %w", redactGitURL(u), skills.ErrInvalid)
		}
		sp.Named = []string{p}
	case strings.Contains(u, "://"):
		// No transport git is let use (see Clone): nothing is read.
	default:
		sp.Named = []string{s}
		if u != s {
			sp.Named = append(sp.Named, u)
		}
	}
	if u == "" {
		return sp, nil
	}
	out, err := ResolveURL(u)
	if err != nil {
		return sp, err
	}
	if out != u && !isRemoteURL(out) {
		p, ok := localRepoPath(out)
		if !ok {
			return sp, fmt.Errorf("git URL %q: as rewritten by git's url.<base>.insteadOf configuration, it names no path of this machine: %w", redactGitURL(u), skills.ErrInvalid)
		}
		sp.Rewritten = p
	}
	return sp, nil
}

// hasFileScheme reports whether u is a file:// URL, in any case.
func hasFileScheme(u string) bool {
	return len(u) >= len("file://") && strings.EqualFold(u[:len("file://")], "file://")
}

// Spec.HasCredentials reports whether the URL of the source (with or without a
// "#ref" suffix) carries credentials: any user information of an http(s)
// URL (a username alone is often a token), a password in any other, a
// secret parameter in its query (see SecretParam). These are what
// Source.String, Spec.String and error messages hide as "xxxxx".
func (s Spec) HasCredentials() bool {
	return s.String() != s.Given
}

// String returns the source as given, with credentials in its URL (see
// Spec.HasCredentials) replaced by "xxxxx": safe to show, log and record.
// The user information is read up to the authority's last '@' before any
// '/', so a '#' or '?' in a password is part of it, not a ref or a query.
func (s Spec) String() string {
	u := s.Git.URL
	r := redactGitURL(u)
	if r == u || u == "" {
		return s.Given
	}
	return strings.Replace(s.Given, u, r, 1)
}

// Spec.RefuseCredentials is nil when the source carries no credentials (see
// Spec.HasCredentials), and otherwise an error wrapping ErrInvalid that says why
// what (e.g. "curated source") may not hold them and what to do instead.
func (s Spec) RefuseCredentials(what string) error {
	if !s.HasCredentials() {
		return nil
	}
	return fmt.Errorf("%s %q carries credentials in its URL, which would be kept and shown to every user: "+
		"skillfs sends no credentials of its own and uses no credential helper; name a repository the daemon "+
		"can read without them (a public URL, or a mirror it can read): %w", what, s.String(), skills.ErrInvalid)
}

// IsGit reports whether the source (with or without a "#ref" suffix) names
// a git repository: an https://, http://,
// ssh://, git:// or file:// URL, an scp-like address user@host:path, a path
// ending in .git, or a local directory that is a working tree (it holds
// .git) or a bare repository (HEAD, objects/ and refs/).
//
// It does not decide precedence, which is the caller's: every http(s) URL
// counts, so check for archive URLs (.zip) first; and a local working tree
// is also a plain directory, so a caller that imports directories as they
// are on disk (uncommitted changes included) checks for a directory first.
func (s Spec) IsGit() bool {
	u := s.Git.URL
	if u == "" || strings.HasPrefix(u, "-") {
		return false
	}
	lower := strings.ToLower(u)
	for _, p := range gitSchemes {
		if strings.HasPrefix(lower, p) {
			return len(u) > len(p)
		}
	}
	if strings.Contains(u, "://") {
		return false
	}
	if IsSCPLike(u) {
		return true
	}
	if strings.HasSuffix(strings.TrimRight(u, "/"), ".git") {
		return true
	}
	return isLocalGitRepo(u)
}
