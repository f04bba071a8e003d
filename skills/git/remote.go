package git

import (
	"path"
	"strings"

	"skillfs/skills"
)

// Hosts whose common names ParseRemoteName resolves.
const (
	githubBase = "https://github.com/"
	gitlabBase = "https://gitlab.com/"
)

// ParseRemoteName resolves the common names of repositories on GitHub and
// GitLab, as skill installers accept them, to the git source they stand
// for: a URL git clones, a ref and a sub-folder.
//
//	owner/repo, owner/repo/path/to/skill     GitHub
//	github:owner/repo[/path]
//	gitlab:group[/sub...]/repo[//path]       GitLab, whose groups nest
//	https://github.com/OWNER/REPO/tree/REF[/PATH]
//	https://github.com/OWNER/REPO/blob/REF/PATH/SKILL.md   (the folder of that SKILL.md)
//	https://gitlab.com/GROUP[/SUB...]/REPO/-/tree/REF[/PATH]
//	https://gitlab.com/GROUP[/SUB...]/REPO/-/blob/REF/PATH/SKILL.md
//
// The shorthands resolve to https://github.com/OWNER/REPO.git (or
// gitlab.com's); a "#ref" or "#ref:path" after a shorthand works as after
// any git URL (see ParseSource). GitLab groups nest, so every component
// of a gitlab: name is the project's path, and its folder comes after
// "//" (or as "#ref:path"): gitlab:group/sub/repo is the repository
// group/sub/repo, never group/sub with the folder repo. A ref in a tree or blob URL is its
// first component after tree/ or blob/: a branch holding '/' is named with
// a shorthand and "#ref" instead. A blob URL must name a SKILL.md. A plain
// repository URL (https://github.com/OWNER/REPO) is already what git
// clones and is not a name this resolves.
//
// ok is false for anything else, including every path that starts with
// '.', '/' or '~', so a caller that checks first whether s exists on disk
// (a local path always wins) can hand the rest to git.
func ParseRemoteName(s string) (g Source, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" || gitURLProblem(s) != "" {
		return Source{}, false
	}
	lower := strings.ToLower(s)
	for _, p := range []string{"https://", "http://"} {
		if strings.HasPrefix(lower, p) {
			return parseHostedURL(s[len(p):])
		}
	}
	frag := ParseSource(s)
	name := frag.URL
	base := githubBase
	switch l := strings.ToLower(name); {
	case strings.HasPrefix(l, "github:"):
		name = name[len("github:"):]
	case strings.HasPrefix(l, "gitlab:"):
		name, base = name[len("gitlab:"):], gitlabBase
	case strings.ContainsAny(name, ":\\") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "~"):
		return Source{}, false
	}
	if strings.Contains(name, "#") {
		return Source{}, false
	}
	var project []string
	var sub string
	if base == gitlabBase {
		p, folder, _ := strings.Cut(name, "//")
		project, sub = strings.Split(p, "/"), folder
		if len(project) < 2 || sub == "" && strings.HasSuffix(name, "//") {
			return Source{}, false
		}
	} else {
		parts := strings.Split(name, "/")
		if len(parts) < 2 {
			return Source{}, false
		}
		project, sub = parts[:2], strings.Join(parts[2:], "/")
	}
	if !validOwner(project[0]) {
		return Source{}, false
	}
	for _, seg := range project[1:] {
		if !validRepo(seg) {
			return Source{}, false
		}
	}
	last := len(project) - 1
	project[last] = strings.TrimSuffix(project[last], ".git")
	if low := strings.ToLower(project[last]); base == githubBase && (strings.HasSuffix(low, ".zip") || strings.HasSuffix(low, ".md")) {
		return Source{}, false // a missing archive or SKILL.md, not a repository
	}
	if !validRepo(project[last]) {
		return Source{}, false // "..git" was ".."
	}
	g = Source{URL: base + strings.Join(project, "/") + ".git", Ref: frag.Ref}
	switch {
	case sub != "" && frag.Path != "":
		return Source{}, false // two folders: neither is the one meant
	case sub != "":
		g.Path = cleanSubPath(sub)
	default:
		g.Path = frag.Path
	}
	return g, true
}

// parseHostedURL resolves the tree and blob URLs of github.com and
// gitlab.com, given without their scheme.
func parseHostedURL(rest string) (Source, bool) {
	if strings.ContainsAny(rest, "#?") {
		return Source{}, false
	}
	host, p, _ := strings.Cut(rest, "/")
	var repoPath, kind string
	var tail []string
	switch strings.ToLower(host) {
	case "github.com", "www.github.com":
		parts := strings.Split(p, "/")
		if len(parts) < 4 || !validOwner(parts[0]) || !validRepo(parts[1]) {
			return Source{}, false
		}
		repoPath, kind, tail = parts[0]+"/"+strings.TrimSuffix(parts[1], ".git"), parts[2], parts[3:]
		host = "github.com"
	case "gitlab.com", "www.gitlab.com":
		project, after, found := strings.Cut(p, "/-/")
		if !found {
			return Source{}, false
		}
		segs := strings.Split(project, "/")
		if len(segs) < 2 {
			return Source{}, false
		}
		for i, s := range segs {
			if !validRepo(s) || i == 0 && !validOwner(s) {
				return Source{}, false
			}
		}
		segs[len(segs)-1] = strings.TrimSuffix(segs[len(segs)-1], ".git")
		parts := strings.Split(after, "/")
		if len(parts) < 2 {
			return Source{}, false
		}
		repoPath, kind, tail = strings.Join(segs, "/"), parts[0], parts[1:]
		host = "gitlab.com"
	default:
		return Source{}, false
	}
	if len(tail) == 0 || tail[0] == "" || gitRefProblem(tail[0]) != "" {
		return Source{}, false
	}
	g := Source{URL: "https://" + host + "/" + repoPath + ".git", Ref: tail[0]}
	sub := strings.Join(tail[1:], "/")
	switch kind {
	case "tree":
	case "blob":
		if path.Base(sub) != skills.ManifestName {
			return Source{}, false
		}
		sub = path.Dir(sub)
	default:
		return Source{}, false
	}
	g.Path = cleanSubPath(sub)
	return g, true
}

// validOwner reports whether s could be a GitHub user or organisation (or
// a GitLab group): letters, digits, '-', '_' and '.', not starting with
// '-' or '.'.
func validOwner(s string) bool {
	return validRepo(s) && s[0] != '-' && s[0] != '.'
}

// validRepo reports whether s could be the name of a repository (or a
// GitLab subgroup): letters, digits, '-', '_' and '.', and not "." or "..";
// a leading '.' is allowed, as in .github.
func validRepo(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
