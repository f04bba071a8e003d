package main

import (
	"errors"

	"skillfs/skills"
)

// Exit codes. Numbers are never reused; the README documents them.
const (
	exitOK         = 0 // success
	exitError      = 1 // failure not covered below; `skill validate`: the package is invalid
	exitUsage      = 2 // bad command line
	exitNotFound   = 3 // no such skill, user, session, file or source
	exitPermission = 4 // the acting user may not do this
	exitInvalid    = 5 // bad input: no or invalid SKILL.md, unsafe path, special file, limit hit, bad dependency
	exitConflict   = 6 // already exists, or the source holds several skills and none was chosen
	exitNoDaemon   = 7 // the command needs `skillfs serve` and it is not running
	exitDamaged    = 8 // the data directory is damaged or inconsistent: `skillfs check --repair`
)

// errUsage marks command-line mistakes.
var errUsage = errors.New("usage")

// errNoDaemon marks a command that could not reach the daemon.
var errNoDaemon = errors.New("daemon not running")

// kindError is an error whose message stands alone, marked with a kind
// (one of the errors exitCode knows) that picks the exit code but is not
// printed.
type kindError struct {
	msg  string
	kind error
}

func (e kindError) Error() string { return e.msg }
func (e kindError) Unwrap() error { return e.kind }

// exitCode picks the exit code for an error; only package main does this.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	case errors.Is(err, errNoDaemon):
		return exitNoDaemon
	case errors.Is(err, skills.ErrDamaged):
		return exitDamaged
	case errors.Is(err, skills.ErrNotFound):
		return exitNotFound
	case errors.Is(err, skills.ErrPermission):
		return exitPermission
	case errors.Is(err, skills.ErrExists), errors.Is(err, skills.ErrAmbiguous):
		return exitConflict
	case errors.Is(err, skills.ErrInvalidManifest), errors.Is(err, skills.ErrUnsafePath),
		errors.Is(err, skills.ErrSpecialFile), errors.Is(err, skills.ErrLimit),
		errors.Is(err, skills.ErrDependency), errors.Is(err, skills.ErrInvalid),
		errors.Is(err, skills.ErrNoManifest):
		return exitInvalid
	}
	return exitError
}
