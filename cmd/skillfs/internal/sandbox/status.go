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
// namespace numbers them.
type Creds struct {
	UID, GID int
	Groups   []int
}

// maxGroups bounds the supplementary groups a status may list (the
// kernel's NGROUPS_MAX).
const maxGroups = 65536

// ParseStatus reads a process's credentials from its /proc/PID/status: the
// fourth (filesystem) id of the Uid: and Gid: lines, and the Groups: line.
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
			id, err := parseID(fields[3])
			if err != nil {
				return Creds{}, fmt.Errorf("process status: %s: %w", key, err)
			}
			if key == "Uid" {
				if haveUID {
					return Creds{}, fmt.Errorf("process status: Uid twice: %w", skills.ErrInvalid)
				}
				c.UID, haveUID = id, true
			} else {
				if haveGID {
					return Creds{}, fmt.Errorf("process status: Gid twice: %w", skills.ErrInvalid)
				}
				c.GID, haveGID = id, true
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
