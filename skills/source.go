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
