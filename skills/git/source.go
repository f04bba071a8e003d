package git

import (
	"fmt"
	"strings"

	"skillfs/skills"
)

// remoteSchemes are the URL schemes that name a repository on another host.
var remoteSchemes = []string{"https://", "http://", "ssh://", "git+ssh://", "ssh+git://", "git://"}

// IsRemoteGitURL reports whether s (with or without a "#ref" suffix) names
// a git repository on another host — an https, http, ssh or git URL, or an
// scp-like user@host:path — as opposed to anything on this machine (a path,
// a file:// URL). It looks at s as written: see ReadsRemote for where a
// clone of it actually reads.
func IsRemoteGitURL(s string) bool {
	return isRemoteURL(ParseSource(s).URL)
}

// SourcePaths are the paths on this machine a read of a source reaches
// (see LocalPaths).
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

// LocalPaths says where on this machine a read of the source s (a path, a
// file:// URL or a git URL, each with or without a "#ref" suffix) reaches:
// none for a remote git URL (see IsRemoteGitURL) that stays remote once
// the URL rewrites of git's configuration are applied (see ResolveGitURL).
// Callers that must not read files on this machine for whoever asks check
// these paths. Nothing is looked up on disk. err, wrapping ErrInvalid,
// says why s cannot be read at all: a remote URL with a "." or ".."
// segment in its path, a rewrite leading outside its folder, or a file://
// URL (as written or rewritten) that names no path of this machine (a host
// other than localhost, a query).
func LocalPaths(s string) (SourcePaths, error) {
	s = strings.TrimSpace(s)
	u := ParseSource(s).URL
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
		// No transport git is let use (see CloneGit): nothing is read.
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

// HasCredentials reports whether the URL of the source s (with or without
// a "#ref" suffix) carries credentials: any user information of an http(s)
// URL (a username alone is often a token), a password in any other, a
// secret parameter in its query (see SecretParam). These are what String,
// RedactSource and error messages hide as "xxxxx".
func HasCredentials(s string) bool {
	return RedactSource(s) != s
}

// RedactSource returns the source s as given, with credentials in its URL
// (see HasCredentials) replaced by "xxxxx": safe to show, log and record.
// The user information is read up to the authority's last '@' before any
// '/', so a '#' or '?' in a password is part of it, not a ref or a query.
func RedactSource(s string) string {
	u := ParseSource(s).URL
	r := redactGitURL(u)
	if r == u || u == "" {
		return s
	}
	return strings.Replace(s, u, r, 1)
}

// RefuseCredentials is nil when the source s carries no credentials (see
// HasCredentials), and otherwise an error wrapping ErrInvalid that says why
// what (e.g. "curated source") may not hold them and what to do instead.
func RefuseCredentials(what, s string) error {
	if !HasCredentials(s) {
		return nil
	}
	return fmt.Errorf("%s %q carries credentials in its URL, which would be kept and shown to every user: "+
		"skillfs sends no credentials of its own and uses no credential helper; name a repository the daemon "+
		"can read without them (a public URL, or a mirror it can read): %w", what, RedactSource(s), skills.ErrInvalid)
}
