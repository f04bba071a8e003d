package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"skillfs/skills"
)

// Creds are the credentials a process's files are checked against: its
// filesystem uid and gid and its supplementary groups, as the daemon's user
// namespace numbers them, and all four of its uids and gids (real,
// effective, saved, filesystem).
type Creds struct {
	UID, GID   int
	Groups     []int
	UIDs, GIDs [4]int // real, effective, saved and filesystem id
}

// Check refuses to read as a process whose credentials are not one
// user's: its real, effective, saved and filesystem uids (or gids) not
// all the same (a setuid or setgid program, or one that changed its ids:
// what it may read is not what its user may), or a filesystem uid of 0,
// root's, unless allowRoot. Both are ErrPermission errors naming pid.
func (c Creds) Check(pid int, allowRoot bool) error {
	for _, ids := range []struct {
		what string
		ids  [4]int
	}{{"uids", c.UIDs}, {"gids", c.GIDs}} {
		if ids.ids[0] != ids.ids[1] || ids.ids[0] != ids.ids[2] || ids.ids[0] != ids.ids[3] {
			return fmt.Errorf("process %d runs with %s %d, %d, %d, %d (real, effective, saved, filesystem): a setuid or setgid program, or one that changed its ids, whose permissions are not one user's; nothing is read as it: %w",
				pid, ids.what, ids.ids[0], ids.ids[1], ids.ids[2], ids.ids[3], skills.ErrPermission)
		}
	}
	if c.UID == 0 && !allowRoot {
		return fmt.Errorf("process %d runs as root (uid 0): nothing is read with root's permissions unless the daemon is started to allow it: %w",
			pid, skills.ErrPermission)
	}
	return nil
}

// maxGroups bounds the supplementary groups a status may list (the
// kernel's NGROUPS_MAX).
const maxGroups = 65536

// ParseStatus reads a process's credentials from its /proc/PID/status: the
// four ids of the Uid: and Gid: lines (the fourth, the filesystem id, is
// what files are checked against), and the Groups: line.
// A status without both id lines, or with ids that are not numbers of 32
// bits, is ErrInvalid.
func ParseStatus(b []byte) (Creds, error) {
	var c Creds
	var haveUID, haveGID bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), len(b)+1)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		switch key {
		case "Uid", "Gid":
			if len(fields) != 4 {
				return Creds{}, fmt.Errorf("process status: %s: want 4 ids, got %d: %w", key, len(fields), skills.ErrInvalid)
			}
			var ids [4]int
			for i, f := range fields {
				id, err := parseID(f)
				if err != nil {
					return Creds{}, fmt.Errorf("process status: %s: %w", key, err)
				}
				ids[i] = id
			}
			if key == "Uid" {
				if haveUID {
					return Creds{}, fmt.Errorf("process status: Uid twice: %w", skills.ErrInvalid)
				}
				c.UID, c.UIDs, haveUID = ids[3], ids, true
			} else {
				if haveGID {
					return Creds{}, fmt.Errorf("process status: Gid twice: %w", skills.ErrInvalid)
				}
				c.GID, c.GIDs, haveGID = ids[3], ids, true
			}
		case "Groups":
			if c.Groups != nil {
				return Creds{}, fmt.Errorf("process status: Groups twice: %w", skills.ErrInvalid)
			}
			if len(fields) > maxGroups {
				return Creds{}, fmt.Errorf("process status: more than %d groups: %w", maxGroups, skills.ErrInvalid)
			}
			c.Groups = make([]int, 0, len(fields))
			for _, f := range fields {
				id, err := parseID(f)
				if err != nil {
					return Creds{}, fmt.Errorf("process status: Groups: %w", err)
				}
				c.Groups = append(c.Groups, id)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Creds{}, fmt.Errorf("process status: %v: %w", err, skills.ErrInvalid)
	}
	if !haveUID || !haveGID {
		return Creds{}, fmt.Errorf("process status: no Uid or Gid line: %w", skills.ErrInvalid)
	}
	if c.Groups == nil {
		c.Groups = []int{}
	}
	return c, nil
}

// parseID is a uid or gid: a decimal number below 2^32-1 (which is -1, "no
// id", to the system calls).
func parseID(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, fmt.Errorf("id %q is not a number of 32 bits: %w", s, skills.ErrInvalid)
	}
	return int(n), nil
}
