package main

import (
	"errors"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
)

// Exit codes of the command line itself; the error kinds' codes come from
// skills.Kinds. Numbers are never reused; the README documents them all.
const (
	exitOK       = 0 // success
	exitError    = 1 // failure of no kind (skills.ClassInternal)
	exitUsage    = 2 // bad command line
	exitNoDaemon = 7 // the command needs `skillfs serve` and it is not running
)

// cliExits are the exit codes only the command line has, with their
// meaning as the README states it; skills.Classes holds the others.
var cliExits = []skills.ExitClass{
	{Name: "ok", Exit: exitOK, Meaning: "success"},
	{Name: "usage", Exit: exitUsage, Meaning: "bad command line"},
	{Name: "no_daemon", Exit: exitNoDaemon, Meaning: "the daemon is not running"},
}

// errUsage marks command-line mistakes.
var errUsage = errors.New("usage")

// errNoDaemon marks a command that could not reach the daemon.
var errNoDaemon = api.ErrNoDaemon

// kindError is an error whose message stands alone, marked with a kind
// (one of the errors exitCode knows) that picks the exit code but is not
// printed: the type a refused API call returns too.
type kindError = api.KindError

// exitCode picks the exit code for an error; only package main does this.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	case errors.Is(err, errNoDaemon):
		return exitNoDaemon
	}
	k, _ := skills.KindOf(err)
	return k.Exit
}
