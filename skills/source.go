package skills

import (
	"fmt"
	"strings"
)

// remoteSchemes are the URL schemes that name a repository on another host.
var remoteSchemes = []string{"https://", "http://", "ssh://", "git+ssh://", "ssh+git://", "git://"}

// IsRemoteGitURL reports whether s (with or without a "#ref" suffix) names
// a git repository on another host — an https, http, ssh or git URL, or an
// scp-like user@host:path — as opposed to anything on this machine (a path,
// a file:// URL). It looks at s as written: see ReadsRemote for where a
// clone of it actually reads.
func IsRemoteGitURL(s string) bool {
	return isRemoteURL(ParseGitSource(s).URL)
}

// ReadsRemote reports whether a clone of s (with or without a "#ref"
// suffix) reads a repository on another host: s is a remote git URL (see
// IsRemoteGitURL) and still is once the URL rewrites of git's
// configuration are applied (see ResolveGitURL). Callers that must not
// read files on this machine for whoever asks accept only these. err,
// wrapping ErrInvalid, says why a remote URL cannot be read at all (a "."
// or ".." segment in its path, a rewrite leading outside its folder).
func ReadsRemote(s string) (bool, error) {
	u := ParseGitSource(s).URL
	if !isRemoteURL(u) {
		return false, nil
	}
	out, err := ResolveGitURL(u)
	if err != nil {
		return false, err
	}
	return isRemoteURL(out), nil
}

// HasCredentials reports whether the URL of the source s (with or without
// a "#ref" suffix) carries credentials: any user information of an http(s)
// URL (a user name alone is often a token), a password in any other. These
// are what String and error messages hide as "xxxxx".
func HasCredentials(s string) bool {
	u := ParseGitSource(s).URL
	return redactGitURL(u) != u || redactGitURL(s) != s // a '#' in a password cuts the URL short
}

// RedactSource returns the source s as given, with credentials in its URL
// (see HasCredentials) replaced by "xxxxx": safe to show, log and record.
func RedactSource(s string) string {
	if r := redactGitURL(s); r != s {
		// The user information as written, read up to the authority's
		// last '@' before any '/': a '#' in a password is part of it.
		return r
	}
	u := ParseGitSource(s).URL
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
		"can read without them (a public URL, or a mirror it can read): %w", what, RedactSource(s), ErrInvalid)
}
