package source

import (
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"skillfs/skills"
)

// Agents whose skill folders AgentDirs knows.
const (
	AgentClaude   = "claude"   // Claude Code: .claude/skills
	AgentAgents   = "agents"   // the cross-agent convention: .agents/skills
	AgentCodex    = "codex"    // Codex: .codex/skills
	AgentOpenCode = "opencode" // OpenCode: .opencode/skills, ~/.config/opencode/skills
)

// Scopes of an AgentDir.
const (
	AgentScopeUser    = "user"
	AgentScopeProject = "project"
)

// How deep the folders of agents that search recursively are searched, and
// how many folders one search looks at before it stops (with a problem
// saying so): the depth is that of Codex's skill loader, so a skill Codex
// finds is found here.
const (
	AgentScanDepth   = 6
	AgentScanMaxDirs = 2000
)

// AgentDir is a place where an agent on this machine keeps skills, with its
// precedence (lower wins).
type AgentDir struct {
	Path  string // the skills folder, e.g. <home>/.claude/skills
	Agent string // AgentClaude, AgentAgents, AgentCodex or AgentOpenCode
	Scope string // AgentScopeUser or AgentScopeProject
	Rank  int    // position in the fixed order of AgentDirs; lower wins
	Depth int    // how deep skills are looked for: 1 = its direct subfolders
}

// agentDirOrder is the fixed precedence of AgentDirs.
var agentDirOrder = []struct {
	scope, agent, rel string
	depth             int
}{
	{AgentScopeUser, AgentClaude, ".claude/skills", 1},
	{AgentScopeUser, AgentAgents, ".agents/skills", AgentScanDepth},
	{AgentScopeUser, AgentCodex, ".codex/skills", AgentScanDepth},
	{AgentScopeUser, AgentOpenCode, ".config/opencode/skills", AgentScanDepth},
	{AgentScopeUser, AgentOpenCode, ".config/opencode/skill", AgentScanDepth},
	{AgentScopeProject, AgentClaude, ".claude/skills", 1},
	{AgentScopeProject, AgentAgents, ".agents/skills", AgentScanDepth},
	{AgentScopeProject, AgentCodex, ".codex/skills", AgentScanDepth},
	{AgentScopeProject, AgentOpenCode, ".opencode/skills", AgentScanDepth},
	{AgentScopeProject, AgentOpenCode, ".opencode/skill", AgentScanDepth},
}

// AgentDirs lists the skill folders of existing agents for a home directory
// and a project directory (either may be "" to leave its scope out), in this
// fixed precedence order, first wins:
//
//	0  <home>/.claude/skills              direct subfolders
//	1  <home>/.agents/skills              searched to AgentScanDepth
//	2  <home>/.codex/skills               searched to AgentScanDepth
//	3  <home>/.config/opencode/skills     searched to AgentScanDepth
//	4  <home>/.config/opencode/skill      searched to AgentScanDepth
//	5  <project>/.claude/skills           direct subfolders
//	6  <project>/.agents/skills           searched to AgentScanDepth
//	7  <project>/.codex/skills            searched to AgentScanDepth
//	8  <project>/.opencode/skills         searched to AgentScanDepth
//	9  <project>/.opencode/skill          searched to AgentScanDepth
//
// Personal skills win over a project's, as Claude Code documents its
// precedence; within a scope Claude Code's folder comes first, then the
// shared .agents convention, Codex and OpenCode. Claude Code looks only at
// the direct subfolders of its folder; Codex and OpenCode search theirs.
// Rank is the number above, so it does not change with which folders exist.
// Only folders that exist (symlinks to directories count) are returned, and
// a folder whose real path was already listed (home and project the same,
// or one folder linked to another) is listed once, at its first place.
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
		dirs = append(dirs, AgentDir{Path: p, Agent: o.agent, Scope: o.scope, Rank: rank, Depth: o.depth})
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
	Warnings    []string // what lenient parsing let pass, naming notes
}

// ShadowedSkill is a skill of an agent folder that another skill with the
// same slug, found earlier in precedence order, hides: the agents
// themselves load only the winner.
type ShadowedSkill struct {
	Dir    string   // the hidden skill's folder
	Slug   string   // the slug both claim
	From   AgentDir // where the hidden one is
	By     string   // the winner's folder
	ByFrom AgentDir // where the winner is
}

func (s ShadowedSkill) String() string {
	return fmt.Sprintf("%s (%s) is shadowed by %s (%s), which takes precedence for slug %q",
		s.Dir, s.From, s.By, s.ByFrom, s.Slug)
}

// agentManifestMax bounds the SKILL.md read while scanning: the per-file
// import limit, so nothing found here is refused later for its manifest size.
var agentManifestMax = skills.DefaultLimits().MaxManifest

// ScanAgentDirs finds every skill in dirs: each folder holding SKILL.md
// (or, failing that, a lower-case skill.md), among the direct subfolders of
// a folder of Depth 1 and down to Depth levels otherwise; a skill's own
// subfolders are part of it and not searched. Hidden entries are skipped
// (Codex keeps its own built-in skills in .system), as are plain files and
// folders without a manifest. Symlinked skill folders and skills folders
// are followed, since that is how users share skills between agents; one
// search looks at no more than AgentScanMaxDirs folders.
//
// Manifests are parsed in Lenient mode, as the agents load them. A skill
// that cannot be loaded (unparseable frontmatter, no usable name even from
// its folder, unreadable) is skipped with its reason in problems and never
// hides the others. The same real folder reached twice (a folder listed
// twice, a symlink to a skill found elsewhere) is counted once, at its
// first place. When two different folders claim the same slug, the first in
// dirs order (and in name order within a folder) wins and the other is
// listed in shadowed. found is in that same order.
//
// Since a skill folder may be a link to anywhere, guard, when not nil, sees
// each skill's folder and then its manifest before the manifest is read:
// one it refuses is skipped, with its error in problems.
func ScanAgentDirs(dirs []AgentDir, guard func(path string) error) (found []FoundSkill, shadowed []ShadowedSkill, problems []string) {
	s := agentScan{seenSkills: map[string]bool{}, bySlug: map[string]int{}, guard: guard}
	seenDirs := make(map[string]bool)
	for _, d := range dirs {
		realDir, err := filepath.EvalSymlinks(d.Path)
		if err != nil {
			s.problems = append(s.problems, fmt.Sprintf("skip %s: %v", d, err))
			continue
		}
		if seenDirs[realDir] {
			continue
		}
		seenDirs[realDir] = true
		depth := max(d.Depth, 1)
		budget := AgentScanMaxDirs
		s.walk(d, d.Path, depth, &budget, map[string]bool{realDir: true})
	}
	return s.found, s.shadowed, s.problems
}

// agentScan is the state of one ScanAgentDirs.
type agentScan struct {
	found      []FoundSkill
	shadowed   []ShadowedSkill
	problems   []string
	seenSkills map[string]bool // real paths of skill folders looked at
	bySlug     map[string]int  // slug → index in found
	guard      func(path string) error
}

// walk looks for skills among the entries of dir, descending depth-1 more
// levels into folders that are not skills. onPath holds the real paths of
// the folders being walked, so a link back up is not followed.
func (s *agentScan) walk(d AgentDir, dir string, depth int, budget *int, onPath map[string]bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if dir == d.Path {
			s.problems = append(s.problems, fmt.Sprintf("skip %s: %v", d, err))
		} else {
			s.problems = append(s.problems, fmt.Sprintf("skip %s: %v", dir, err))
		}
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		real, manifest, isDir, problem := locateAgentSkill(sub, e)
		if problem != "" {
			s.problems = append(s.problems, problem)
			continue
		}
		if manifest != "" {
			s.add(d, sub, real, manifest, e.Name())
			continue
		}
		if !isDir || depth <= 1 || onPath[real] {
			continue
		}
		if *budget <= 0 {
			if *budget == 0 { // said once; -1 marks it said
				s.problems = append(s.problems, fmt.Sprintf("stopped searching %s after %d folders; skills further in were not looked for", d, AgentScanMaxDirs))
				*budget = -1
			}
			continue
		}
		*budget--
		onPath[real] = true
		s.walk(d, sub, depth-1, budget, onPath)
		delete(onPath, real)
	}
}

// add loads the skill in dir, unless its real folder was seen already, and
// settles who has its slug.
func (s *agentScan) add(d AgentDir, dir, real, manifest, folder string) {
	if s.seenSkills[real] {
		return
	}
	s.seenSkills[real] = true
	if err := s.guarded(dir, manifest); err != nil {
		s.problems = append(s.problems, fmt.Sprintf("skip %s: %v", dir, err))
		return
	}
	fs, err := loadAgentSkill(d, dir, real, manifest, folder)
	if err != nil {
		s.problems = append(s.problems, fmt.Sprintf("skip %s: %v", dir, err))
		return
	}
	if i, taken := s.bySlug[fs.Slug]; taken {
		w := s.found[i]
		s.shadowed = append(s.shadowed, ShadowedSkill{Dir: dir, Slug: fs.Slug, From: d, By: w.Dir, ByFrom: w.From})
		return
	}
	s.bySlug[fs.Slug] = len(s.found)
	s.found = append(s.found, fs)
}

// guarded asks the scan's guard about the skill folder dir and its
// manifest, in that order.
func (s *agentScan) guarded(dir, manifest string) error {
	if s.guard == nil {
		return nil
	}
	if err := s.guard(dir); err != nil {
		return err
	}
	return s.guard(filepath.Join(dir, manifest))
}

// locateAgentSkill reports what sub, an entry of a folder being searched,
// is: a skill (its real path and manifest name), a folder that is not one
// (isDir), or something else. problem says why an entry that may have been
// a skill cannot be looked at.
func locateAgentSkill(sub string, e iofs.DirEntry) (real, manifest string, isDir bool, problem string) {
	fi, err := os.Stat(sub) // follows a symlinked folder
	if err != nil {
		if e.Type()&iofs.ModeSymlink != 0 {
			target, _ := os.Readlink(sub)
			return "", "", false, fmt.Sprintf("skip %s: broken symlink to %q", sub, target)
		}
		return "", "", false, fmt.Sprintf("skip %s: %v", sub, err)
	}
	if !fi.IsDir() {
		return "", "", false, ""
	}
	real, err = filepath.EvalSymlinks(sub)
	if err != nil {
		return "", "", false, fmt.Sprintf("skip %s: %v", sub, err)
	}
	for _, name := range manifestNames {
		if mfi, err := os.Stat(filepath.Join(sub, name)); err == nil && mfi.Mode().IsRegular() {
			return real, name, true, ""
		}
	}
	return real, "", true, ""
}

// loadAgentSkill reads and leniently parses the manifest of the skill in dir.
func loadAgentSkill(d AgentDir, dir, real, manifest, folder string) (FoundSkill, error) {
	data, err := readAgentManifest(filepath.Join(dir, manifest))
	if err != nil {
		return FoundSkill{}, err
	}
	m, warnings, err := ParseManifest(data, folder)
	if err != nil {
		return FoundSkill{}, err
	}
	fs := FoundSkill{
		Dir: dir, RealDir: real, Manifest: manifest,
		Slug: m.Slug, Name: m.Name, Description: m.Description,
		From: d, Warnings: warnings,
	}
	if manifest != skills.ManifestName {
		fs.Warnings = append(fs.Warnings, fmt.Sprintf("manifest is named %s; it is stored as %s", manifest, skills.ManifestName))
	}
	if folder != m.Slug {
		fs.Warnings = append(fs.Warnings, fmt.Sprintf("folder %q differs from slug %q; the skill is stored under its slug", folder, m.Slug))
	}
	return fs, nil
}

// readAgentManifest reads a manifest of at most agentManifestMax bytes. A
// FIFO or device by that name is refused unread, without blocking.
func readAgentManifest(path string) ([]byte, error) {
	return skills.ReadManifest(path, filepath.Base(path), agentManifestMax, true)
}
