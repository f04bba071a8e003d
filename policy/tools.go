package policy

import "skillfs/skills"

// ToolsToLoad returns the tools and MCP servers to load for the given skills
// (a session's activated and preloaded skills, in activation order): each
// skill's own tool and MCP dependency lists, concatenated in that order
// without duplicates or empty names. Dependencies of dependencies are not
// included; a skill's dependencies load when it is activated itself. A name
// that appears both as a tool and as an MCP server stays in both lists and is
// reported in conflicts, in order of first clash, for the loader to resolve.
func ToolsToLoad(active []*skills.Skill) (tools, mcps, conflicts []string) {
	isTool := make(map[string]bool)
	isMCP := make(map[string]bool)
	clashed := make(map[string]bool)
	clash := func(name string) {
		if isTool[name] && isMCP[name] && !clashed[name] {
			clashed[name] = true
			conflicts = append(conflicts, name)
		}
	}
	for _, s := range active {
		if s == nil {
			continue
		}
		for _, t := range s.ToolDependencies {
			if t != "" && !isTool[t] {
				isTool[t] = true
				tools = append(tools, t)
				clash(t)
			}
		}
		for _, m := range s.MCPDependencies {
			if m != "" && !isMCP[m] {
				isMCP[m] = true
				mcps = append(mcps, m)
				clash(m)
			}
		}
	}
	return tools, mcps, conflicts
}
