package skills

import (
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Agents whose skill folders AgentDirs knows.
const (
	AgentClaude = "claude" // Claude Code: .claude/skills
	AgentAgents = "agents" // the cross-agent convention: .agents/skills
	AgentCodex  = "codex"  // Codex: .codex/skills
)

// Scopes of an AgentDir.
const (
	AgentScopeProject = "project"
	AgentScopeUser    = "user"
)

// AgentDir is a place where an agent on this machine keeps skills, with its
// precedence (lower wins).
type AgentDir struct {
	Path  string // the skills folder, e.g. <home>/.claude/skills
	Agent string // AgentClaude, AgentAgents or AgentCodex
	Scope string // AgentScopeProject or AgentScopeUser
	Rank  int    // position in the fixed order of AgentDirs; lower wins
}

// agentDirOrder is the fixed precedence of AgentDirs.
var agentDirOrder = []struct{ scope, agent, rel string }{
	{AgentScopeProject, AgentClaude, ".claude/skills"},
	{AgentScopeProject, AgentAgents, ".agents/skills"},
	{AgentScopeProject, AgentCodex, ".codex/skills"},
	{AgentScopeUser, AgentClaude, ".claude/skills"},
	{AgentScopeUser, AgentAgents, ".agents/skills"},
	{AgentScopeUser, AgentCodex, ".codex/skills"},
}

// AgentDirs lists the skill folders of existing agents for a home directory
// and a project directory (either may be "" to leave its scope out), in this
// fixed precedence order, first wins:
//
//	0  <project>/.claude/skills
//	1  <project>/.agents/skills
//	2  <project>/.codex/skills
//	3  <home>/.claude/skills
//	4  <home>/.agents/skills
//	5  <home>/.codex/skills
//
// A project's skills win over the user's, as in the agents themselves; within
// a scope Claude Code's folder comes first, then the shared .agents
// convention, then Codex. Rank is the number above, so it does not change
// with which folders exist. Only folders that exist (symlinks to directories
// count) are returned, and a folder whose real path was already listed (home
// and project the same, or one folder linked to another) is listed once, at
// its first place.
func AgentDirs(home, project string) []AgentDir {
	var dirs []AgentDir
	seen := make(map[string]bool)
	for rank, o := range agentDirOrder {
		base := project
		if o.scope == AgentScopeUser {
			base = home
		}
		if base == "" {
			continue
		}
		p := filepath.Join(base, filepath.FromSlash(o.rel))
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if seen[real] {
			continue
		}
		seen[real] = true
		dirs = append(dirs, AgentDir{Path: p, Agent: o.agent, Scope: o.scope, Rank: rank})
	}
	return dirs
}

// String returns e.g. "claude user skills folder /home/u/.claude/skills".
func (d AgentDir) String() string {
	return fmt.Sprintf("%s %s skills folder %s", d.Agent, d.Scope, d.Path)
}

// FoundSkill is a skill discovered in an agent folder, parsed leniently.
type FoundSkill struct {
	Dir         string   // the skill folder inside From.Path; may be a symlink
	RealDir     string   // Dir with every symlink resolved
	Manifest    string   // ManifestName, or "skill.md" when only the lower-case name exists
	Slug        string   // identity, valid by ValidSlug
	Name        string   // display name
	Description string   // may be empty when neither the frontmatter nor the body has one (a warning says so)
	From        AgentDir // where it was found
	Warnings    []string // what lenient parsing let pass, collisions it won, naming notes
}

// agentManifestMax bounds the SKILL.md read while scanning: the per-file
// import limit, so nothing found here is refused later for its manifest size.
var agentManifestMax = DefaultLimits().MaxManifest

// ScanAgentDirs finds every skill in dirs: each direct subfolder holding
// SKILL.md (or, failing that, a lower-case skill.md). Hidden entries are
// skipped (Codex keeps its own built-in skills in .system), as are plain
// files and folders without a manifest. Symlinked skill folders and skills
// folders are followed, since that is how users share skills between
// agents; the import step still rejects symlinks inside a skill.
//
// Manifests are parsed in Lenient mode, as the agents load them. A skill
// that cannot be loaded (unparseable frontmatter, no usable name even from
// its folder, unreadable) is skipped with its reason in problems and never
// hides the others. A skill with no usable name takes its name and a slug
// derived from its folder name. The same real folder reached
// twice (a folder listed twice, a symlink to a skill found elsewhere) is
// counted once, at its first place. When two different folders claim the
// same slug, the first in dirs order (and by folder name within a dir)
// wins: the loser is reported in problems and the winner gets a warning,
// each naming both paths. found is in that same order.
func ScanAgentDirs(dirs []AgentDir) (found []FoundSkill, problems []string) {
	seenDirs := make(map[string]bool)
	seenSkills := make(map[string]bool)
	bySlug := make(map[string]int)
	for _, d := range dirs {
		realDir, err := filepath.EvalSymlinks(d.Path)
		if err != nil {
			problems = append(problems, fmt.Sprintf("skip %s: %v", d, err))
			continue
		}
		if seenDirs[realDir] {
			continue
		}
		seenDirs[realDir] = true
		entries, err := os.ReadDir(d.Path)
		if err != nil {
			problems = append(problems, fmt.Sprintf("skip %s: %v", d, err))
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			dir := filepath.Join(d.Path, e.Name())
			real, manifest, problem := locateAgentSkill(dir, e)
			if problem != "" {
				problems = append(problems, problem)
			}
			if manifest == "" || seenSkills[real] {
				continue
			}
			seenSkills[real] = true
			fs, err := loadAgentSkill(d, dir, real, manifest, e.Name())
			if err != nil {
				problems = append(problems, fmt.Sprintf("skip %s: %v", dir, err))
				continue
			}
			if i, taken := bySlug[fs.Slug]; taken {
				w := &found[i]
				problems = append(problems, fmt.Sprintf("skip %s: slug %q is already taken by %s (%s), which takes precedence",
					dir, fs.Slug, w.Dir, w.From))
				w.Warnings = append(w.Warnings, fmt.Sprintf("slug %q is also claimed by %s (%s), which was skipped",
					fs.Slug, dir, d))
				continue
			}
			bySlug[fs.Slug] = len(found)
			found = append(found, fs)
		}
	}
	return found, problems
}

// agentManifestNames are the manifest names a skill folder may use, in
// order of preference.
var agentManifestNames = []string{ManifestName, "skill.md"}

// locateAgentSkill reports whether dir, an entry of a skills folder, is a
// skill: its real path and manifest name, or manifest "" when it is not one.
// problem says why an entry that may have been a skill cannot be looked at.
func locateAgentSkill(dir string, e iofs.DirEntry) (real, manifest, problem string) {
	fi, err := os.Stat(dir) // follows a symlinked skill folder
	if err != nil {
		if e.Type()&iofs.ModeSymlink != 0 {
			target, _ := os.Readlink(dir)
			return "", "", fmt.Sprintf("skip %s: broken symlink to %q", dir, target)
		}
		return "", "", fmt.Sprintf("skip %s: %v", dir, err)
	}
	if !fi.IsDir() {
		return "", "", ""
	}
	for _, name := range agentManifestNames {
		if mfi, err := os.Stat(filepath.Join(dir, name)); err == nil && mfi.Mode().IsRegular() {
			manifest = name
			break
		}
	}
	if manifest == "" {
		return "", "", ""
	}
	real, err = filepath.EvalSymlinks(dir)
	if err != nil {
		return "", "", fmt.Sprintf("skip %s: %v", dir, err)
	}
	return real, manifest, ""
}

// loadAgentSkill reads and leniently parses the manifest of the skill in dir.
func loadAgentSkill(d AgentDir, dir, real, manifest, folder string) (FoundSkill, error) {
	data, err := readAgentManifest(filepath.Join(dir, manifest))
	if err != nil {
		return FoundSkill{}, err
	}
	m, warnings, err := parseAgentManifest(data, folder)
	if err != nil {
		return FoundSkill{}, err
	}
	fs := FoundSkill{
		Dir: dir, RealDir: real, Manifest: manifest,
		Slug: m.Slug, Name: m.Name, Description: m.Description,
		From: d, Warnings: warnings,
	}
	if manifest != ManifestName {
		fs.Warnings = append(fs.Warnings, fmt.Sprintf("manifest is named %s; it is stored as %s", manifest, ManifestName))
	}
	if folder != m.Slug {
		fs.Warnings = append(fs.Warnings, fmt.Sprintf("folder %q differs from slug %q; the skill is stored under its slug", folder, m.Slug))
	}
	return fs, nil
}

// readAgentManifest reads a manifest of at most agentManifestMax bytes. A
// FIFO or device by that name is refused unread, without blocking.
func readAgentManifest(path string) ([]byte, error) {
	return ReadManifest(path, filepath.Base(path), agentManifestMax, true)
}

// parseAgentManifest parses leniently, with the folder name for a skill whose
// frontmatter has no usable name: agents name such skills after their folder.
func parseAgentManifest(data []byte, folder string) (*Manifest, []string, error) {
	return ParseManifestWith(data, ParseOptions{Mode: Lenient, Folder: folder})
}
