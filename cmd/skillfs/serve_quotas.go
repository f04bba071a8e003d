package main

import (
	"github.com/spf13/pflag"

	"skillfs/cmd/skillfs/internal/daemon"
	"skillfs/skills"
	"skillfs/skills/git"
)

// installQuotas are serve's settings of what each user's sessions may
// install (daemon.Quotas).
type installQuotas struct {
	skills, mib, perHour int
	gitHosts             string
	asRoot               bool
}

// addInstallQuotas defines the flags of q on fs. Their ranges are rows of
// settingRules, checked with every other setting's.
func addInstallQuotas(fs *pflag.FlagSet) *installQuotas {
	q := &installQuotas{}
	fs.IntVar(&q.skills, "install-max-skills", daemon.DefaultQuotaSkills,
		"a session's install is refused once its user created this many skills")
	fs.IntVar(&q.mib, "install-max-mib", daemon.DefaultQuotaBytes>>20,
		"or once every version of the skills its user created would hold more than this many MiB")
	fs.IntVar(&q.perHour, "installs-per-hour", daemon.DefaultQuotaInstallsHour,
		"or once its user's sessions asked for this many installs in the last hour (those refused for a quota not counted)")
	fs.StringVar(&q.gitHosts, "install-git-hosts", "",
		"the only `HOSTS` a session's install reads git from, whatever their addresses, separated by commas: HOST[:PORT], or http://HOST[:PORT] to allow plain http too (default: any https host whose addresses are all public)")
	fs.BoolVar(&q.asRoot, "install-as-root", false,
		"let a session's install read a path in its sandbox as a process running as root (by default refused)")
	return q
}

// gitHostsProblem is why v is no list of hosts for --install-git-hosts.
func gitHostsProblem(v string) string {
	if _, err := git.ParseHosts(v); err != nil {
		return skills.Message(err)
	}
	return ""
}

// apply sets the quotas in o.
func (q *installQuotas) apply(o *daemon.Options) {
	o.Quotas = daemon.Quotas{Skills: q.skills, Bytes: int64(q.mib) << 20, InstallsHour: q.perHour}
	o.InstallGitHosts, _ = git.ParseHosts(q.gitHosts) // checked with the settings
	o.InstallAsRoot = q.asRoot
}

// sessionCaps are serve's settings of how many sessions may be open
// (daemon.Caps).
type sessionCaps struct {
	children, perUser int
}

// addSessionCaps defines the flags of c on fs, ranges in settingRules.
func addSessionCaps(fs *pflag.FlagSet) *sessionCaps {
	c := &sessionCaps{}
	fs.IntVar(&c.children, "max-children", daemon.MaxChildren,
		"a session may have this many open sub-agent sessions; one more is refused")
	fs.IntVar(&c.perUser, "max-user-sessions", daemon.DefaultMaxUserSessions,
		"a user may have this many open sessions, sub-agent sessions included; one more is refused")
	return c
}

// apply sets the caps in o.
func (c *sessionCaps) apply(o *daemon.Options) {
	o.Caps = daemon.Caps{MaxChildren: c.children, MaxUserSessions: c.perUser}
}
