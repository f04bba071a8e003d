package api

// Turn formats: TurnRequest.Format.
const (
	TurnXML      = "xml"
	TurnMarkdown = "markdown"
	TurnJSON     = "json"
)

// Why a turn selected a skill: TurnSkill.Why.
const (
	WhyPreloaded = "preloaded" // the session preloads it (or a preloaded skill depends on it)
	WhyAlways    = "always"    // its SKILL.md says alwaysApply: true
	WhyMentioned = "mentioned" // the turn's message names it ($slug) or invokes it (/skill:slug args)
)

// TurnRequest is the body of POST /v1/sessions/{id}/turn: one turn's
// message, whether the agent has a tool to read files with (ReadTool; nil
// is true), and the format of the text (xml, the default, markdown or json).
type TurnRequest struct {
	Message  string `json:"message"`
	ReadTool *bool  `json:"read_tool,omitempty"`
	Format   string `json:"format,omitempty"`
}

// Turn is what a session's agent gets for one turn: the list of its
// available skills (Prompt; omitted when the agent has no read tool, since
// it could not read them) and the skills selected for this turn, each
// with its SKILL.md (Selected), and, in the xml and markdown formats,
// the two rendered together (Text), ready to put into the model's context.
type Turn struct {
	Prompt   string      `json:"prompt,omitempty"`
	Selected []TurnSkill `json:"selected"`
	Text     string      `json:"text,omitempty"`
}

// TurnSkill is a skill selected for a turn.
type TurnSkill struct {
	Slug string `json:"slug"`
	Name string `json:"name"` // the name the session's prompt shows it under
	Path string `json:"path"` // its SKILL.md, as the agent sees it
	Why  string `json:"why"`  // WhyPreloaded, WhyAlways or WhyMentioned
	// Args are the arguments of the /skill:slug command that invoked it
	// (the rest of that line), "" when none did.
	Args    string `json:"args,omitempty"`
	Content string `json:"content"` // its SKILL.md, whole
}

// GlobsRequest is the body of POST /v1/sessions/{id}/globs: file paths,
// relative to the agent's project.
type GlobsRequest struct {
	Paths []string `json:"paths"`
}

// Globs is the answer of POST /v1/sessions/{id}/globs: for each path
// asked, in order, the readable skills whose globs match it.
type Globs struct {
	Paths []PathSkills `json:"paths"`
}

// PathSkills is one path and the skills that apply to it: those whose
// globs match it, in the readable set's order, each with the globs that
// matched.
type PathSkills struct {
	Path   string      `json:"path"`
	Skills []GlobMatch `json:"skills"`
}

// GlobMatch is a skill that applies to a path, and its globs that match it.
type GlobMatch struct {
	Slug  string   `json:"slug"`
	Name  string   `json:"name"`
	Globs []string `json:"globs"`
}

// Limits of a globs request: its paths, their bytes, and the bytes of
// each of their segments (a file name's limit).
const (
	MaxGlobPaths      = 1000
	MaxGlobPathLen    = 4096
	MaxGlobSegmentLen = 255
)
