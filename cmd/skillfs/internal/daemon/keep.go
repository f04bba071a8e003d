package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"skillfs/fs/bind"
	"skillfs/fs/keeper"
	"skillfs/skills"
)

// With a keeper (Options.Keeper, `serve --keeper`) the daemon's FUSE
// connection outlives it: the keeper holds a duplicate of its /dev/fuse
// descriptor, so when the daemon dies or stops (Detach) the mount and every
// bind of it — the daemon's own, sandboxes', pods' — stay in place, their
// readers waiting, and the next start takes the connection back (fs.Mount
// resumes it). Nothing then needs binding again: only the sessions are set
// again, and the API sockets made again, since those die with the process.
//
// Until the connection is served again, anything that touches the mount
// root waits for a server: the start path touches it only once fs.Mount
// resumed it (or found nothing kept and mounted anew).

// keeperWatchEvery is how often the daemon checks that the keeper still
// holds its connection, and gives it again to a keeper restarted meanwhile.
const keeperWatchEvery = time.Second

// stateDirName is the folder of the data directory holding what a daemon
// taking a kept connection back needs of the one that served it
// (fs.Options.StateDir).
const stateDirName = "keep"

// DialKeeper returns the client of the keeper at path, refusing one that
// does not answer: the operator asked for a mount that survives the
// daemon, and a start without it would quietly give a mount that does not.
func DialKeeper(path string) (*keeper.Client, error) {
	k := keeper.Dial(path)
	if err := k.Ping(); err != nil {
		return nil, fmt.Errorf("the keeper (--keeper %s) cannot be reached: %w; start it (`skillfs keeper --socket %s`, the skillfs-keeper service) or serve without --keeper", path, err, path)
	}
	return k, nil
}

// prepareKeptRoot makes the mount root if it is missing without looking
// into it: mkdir of a path where a mount is answers EEXIST from the parent
// folder, never asking the mount's server, which may not run yet.
func prepareKeptRoot(root string) error {
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return fmt.Errorf("create the mount root's folder: %w", err)
	}
	if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create mount root: %w", err)
	}
	return nil
}

// keptBind reports whether bind b of a resumed mount is still in place:
// the top mount at its target, in its namespace, is one of this mount's
// (the same device). A sandbox that is gone is not found
// (skills.ErrNotFound).
func (d *Daemon) keptBind(b skills.Bind) (bool, error) {
	pid := "self"
	if b.PID > 0 {
		ns, err := bind.NamespaceOf(b.PID)
		if err != nil {
			return false, err
		}
		if ns != b.NS {
			return false, fmt.Errorf("process %d is in another mount namespace than when bound: %w", b.PID, skills.ErrNotFound)
		}
		pid = strconv.Itoa(b.PID)
	}
	root, err := filepath.Abs(d.mountRoot)
	if err != nil {
		return false, err
	}
	ours, ok, err := mountDevAt("self", root)
	if err != nil || !ok {
		return false, err
	}
	dev, ok, err := mountDevAt(pid, b.Target)
	if err != nil || !ok {
		return false, err
	}
	return dev == ours, nil
}

// maxMountinfoLine bounds a line of mountinfo.
const maxMountinfoLine = 1 << 20

// mountDevAt returns the device (major:minor) of the top mount at path in
// the mount namespace of process pid ("self" for this one), as its
// /proc/PID/mountinfo says (paths as that process sees them), and whether
// anything is mounted there.
func mountDevAt(pid, path string) (string, bool, error) {
	f, err := os.Open("/proc/" + pid + "/mountinfo")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", false, fmt.Errorf("process %s: %w", pid, skills.ErrNotFound)
		}
		return "", false, err
	}
	defer f.Close()
	dev, found, err := parseMountDev(f, path)
	if err != nil {
		return "", false, fmt.Errorf("read /proc/%s/mountinfo: %w", pid, err)
	}
	return dev, found, nil
}

// parseMountDev reads mountinfo (proc(5)) and returns the device of the
// last mount at path, and whether there is one. Lines not of its shape are
// skipped.
func parseMountDev(r io.Reader, path string) (string, bool, error) {
	dev, found := "", false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxMountinfoLine)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ...
		fields := strings.SplitN(sc.Text(), " ", 6)
		if len(fields) < 6 {
			continue
		}
		if unescapeOctal(fields[4]) == path {
			dev, found = fields[2], true // later lines are mounted on top
		}
	}
	return dev, found, sc.Err()
}

// unescapeOctal undoes mountinfo's escapes (\040 for a space, and so on).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
