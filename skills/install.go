package skills

import "time"

// Kinds of source a session installs a skill from.
const (
	InstallPath   = "path"   // a path as the session's sandbox sees it
	InstallGit    = "git"    // a remote git repository
	InstallUpload = "upload" // bytes sent with the request
)

// InstallOK is the outcome of an install that published (or found the
// skill unchanged); any other outcome is the error kind's API code.
const InstallOK = "ok"

// Install is the record of one install a session asked for, whatever came
// of it.
type Install struct {
	ID      int64     `json:"id"`
	At      time.Time `json:"at"`
	User    string    `json:"user"`
	Session string    `json:"session"`
	Kind    string    `json:"kind"`   // InstallPath, InstallGit or InstallUpload
	Source  string    `json:"source"` // the sandbox path, the git source, the upload's name
	Slug    string    `json:"slug,omitempty"`
	Version string    `json:"version,omitempty"`
	Outcome string    `json:"outcome"`         // InstallOK, or the error's code
	Error   string    `json:"error,omitempty"` // why it failed
}
