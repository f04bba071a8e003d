// Package git reads skills from git repositories: it parses a source
// ("URL#ref:path"), clones a remote repository or reads a local one from its
// objects within the import limits, with a scrubbed environment and no
// program of the repository's ever run; it applies git's URL rewrites, names
// hosted repositories by their common names (owner/repo), tells which
// sources reach this machine, holds a clone for a caller not trusted with
// the daemon's network to https hosts on the internet or those allowed
// (RemotePolicy), inspects working trees, and hides credentials in
// everything it shows.
package git
