package git

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"skillfs/skills"
)

// The URL rewrites of git's own configuration (url.<base>.insteadOf, in the
// system and global configuration of whoever runs skillfs) apply to what
// skillfs clones, so a mirror configured for git serves skillfs too. They
// are applied here, not by git: the URL git is handed is already rewritten,
// and git runs with no rewrite configuration at all. So the URL that is
// actually read can be checked, remote or local, before anything is read.

// gitRewrite is one url.<base>.insteadOf rule: a URL starting with prefix
// is read from base followed by the rest of it.
type gitRewrite struct {
	base, prefix string
}

// gitRewrites reads the url.<base>.insteadOf rules of the system and global
// git configuration, in the order git reads them. None when git is missing
// or the configuration cannot be read.
func gitRewrites() []gitRewrite {
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil
	}
	var rules []gitRewrite
	for _, scope := range []string{"--system", "--global"} {
		cmd := exec.Command(bin, "config", scope, "--includes", "-z", "--get-regexp", `^url\..*\.insteadof$`)
		cmd.Dir = os.TempDir()
		cmd.Env = append(os.Environ(), "GIT_DIR=/nonexistent")
		out := &gitBoundedBuffer{max: 64 << 10}
		cmd.Stdout = out
		if cmd.Run() != nil || out.overflow {
			continue // none, or no such file
		}
		for _, entry := range strings.Split(string(out.Bytes()), "\x00") {
			key, prefix, ok := strings.Cut(entry, "\n")
			const head, tail = "url.", ".insteadof"
			if !ok || len(key) <= len(head)+len(tail) || !strings.EqualFold(key[:len(head)], head) ||
				!strings.EqualFold(key[len(key)-len(tail):], tail) || prefix == "" {
				continue
			}
			rules = append(rules, gitRewrite{base: key[len(head) : len(key)-len(tail)], prefix: prefix})
		}
	}
	return rules
}

// rewriteGitURL applies to u the rule whose prefix is the longest one u
// starts with, as git does (once: the result is not rewritten again); of
// equally long ones, git takes the base that first appeared in its
// configuration. ok is false when no rule applies.
func rewriteGitURL(u string, rules []gitRewrite) (string, gitRewrite, bool) {
	first := map[string]int{} // base → where it first appears
	for i, r := range rules {
		if _, ok := first[r.base]; !ok {
			first[r.base] = i
		}
	}
	best := -1
	for i, r := range rules {
		if !strings.HasPrefix(u, r.prefix) {
			continue
		}
		if best < 0 || len(r.prefix) > len(rules[best].prefix) ||
			len(r.prefix) == len(rules[best].prefix) && first[r.base] < first[rules[best].base] {
			best = i
		}
	}
	if best < 0 {
		return u, gitRewrite{}, false
	}
	r := rules[best]
	return r.base + u[len(r.prefix):], r, true
}

// ResolveURL returns the URL a clone of u reads: u with the URL
// rewrites of git's configuration applied (see rewriteGitURL). It refuses,
// with an error wrapping ErrInvalid, a remote URL (see Spec.IsRemote)
// whose path holds a "." or ".." segment, written plainly or
// percent-encoded, before or after rewriting, and a rewrite that leads to
// this machine (a path or a file:// URL) outside its base.
func ResolveURL(u string) (string, error) {
	out, err := resolveGitURL(u, gitRewrites())
	if err != nil {
		return "", fmt.Errorf("git URL %q: %w", redactGitURL(u), err)
	}
	return out, nil
}

// resolveGitURL does the work of ResolveURL with the rules given. Its
// errors name neither u nor the rule's base (where a mirror lies on this
// machine is not the business of whoever asks).
func resolveGitURL(u string, rules []gitRewrite) (string, error) {
	if isRemoteURL(u) {
		if reason := dotSegmentProblem(u); reason != "" {
			return "", fmt.Errorf("its path %s: %w", reason, skills.ErrInvalid)
		}
	}
	out, rule, ok := rewriteGitURL(u, rules)
	if !ok {
		return u, nil
	}
	const rewritten = "as rewritten by git's url.<base>.insteadOf configuration"
	if reason := gitURLProblem(out); reason != "" {
		return "", fmt.Errorf("%s, it %s: %w", rewritten, reason, skills.ErrInvalid)
	}
	if reason := dotSegmentProblem(out); reason != "" {
		return "", fmt.Errorf("%s, its path %s: %w", rewritten, reason, skills.ErrInvalid)
	}
	if !isRemoteURL(out) {
		base, at := rewriteLocalPath(rule.base), rewriteLocalPath(out)
		rel, err := filepath.Rel(filepath.Clean(base), filepath.Clean(at))
		if base == "" || err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(base) != filepath.IsAbs(at) {
			return "", fmt.Errorf("%s, it leads outside the folder of that rewrite: %w", rewritten, skills.ErrInvalid)
		}
	}
	return out, nil
}

// rewriteLocalPath is the path on this machine a local rewrite result (or
// base) names: a file:// URL's path, percent-decoded, or the path itself.
func rewriteLocalPath(u string) string {
	if len(u) >= len("file://") && strings.EqualFold(u[:len("file://")], "file://") {
		p := u[len("file://"):]
		if len(p) >= len("localhost") && strings.EqualFold(p[:len("localhost")], "localhost") {
			p = p[len("localhost"):]
		}
		return unescapeAll(p)
	}
	return u
}

// isRemoteURL reports whether u (a bare URL, no "#ref") names a repository
// on another host: an https, http, ssh or git URL, or an scp-like address.
func isRemoteURL(u string) bool {
	if u == "" || strings.HasPrefix(u, "-") || gitURLProblem(u) != "" {
		return false
	}
	lower := strings.ToLower(u)
	for _, p := range remoteSchemes {
		if strings.HasPrefix(lower, p) {
			return len(u) > len(p)
		}
	}
	return !strings.Contains(u, "://") && IsSCPLike(u)
}

// dotSegmentProblem says how the path of u — after the host of a URL, after
// the ':' of an scp-like address, or all of a local path — holds a "." or
// ".." segment, as written or percent-encoded (in any case, any number of
// times), or "". A segment ends at '/' or '\', and is read up to a '?',
// '#' or ';' in it.
func dotSegmentProblem(u string) string {
	p := u
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			return ""
		}
		p = rest[j:]
	} else if IsSCPLike(u) {
		p = u[strings.IndexByte(u, ':')+1:]
	}
	p = unescapeAll(p)
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if i := strings.IndexAny(seg, "?#;"); i >= 0 {
			seg = seg[:i]
		}
		if seg == "." || seg == ".." {
			return `holds a "` + seg + `" segment`
		}
	}
	return ""
}

// unescapeAll decodes percent escapes in s until none is left; a '%' not
// followed by two hex digits stays as it is.
func unescapeAll(s string) string {
	for {
		next := skills.PercentDecode(s)
		if next == s {
			return s
		}
		s = next
	}
}
