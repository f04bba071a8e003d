package skills

import "strings"

// remoteSchemes are the URL schemes that name a repository on another host.
var remoteSchemes = []string{"https://", "http://", "ssh://", "git+ssh://", "ssh+git://", "git://"}

// IsRemoteGitURL reports whether s (with or without a "#ref" suffix) names
// a git repository on another host — an https, http, ssh or git URL, or an
// scp-like user@host:path — as opposed to anything on this machine (a path,
// a file:// URL). Callers that must not read local files for whoever asks
// accept only these.
func IsRemoteGitURL(s string) bool {
	u := ParseGitSource(s).URL
	if u == "" || strings.HasPrefix(u, "-") || gitURLProblem(u) != "" {
		return false
	}
	lower := strings.ToLower(u)
	for _, p := range remoteSchemes {
		if strings.HasPrefix(lower, p) {
			return len(u) > len(p)
		}
	}
	return !strings.Contains(u, "://") && isSCPLike(u)
}
