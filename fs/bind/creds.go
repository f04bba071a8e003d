package bind

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// creds are what a process acts on files with: its filesystem uid and gid,
// its supplementary groups and its effective capabilities, as /proc shows
// them in the daemon's namespaces.
type creds struct {
	uid, gid int
	groups   []int
	capEff   uint64
}

// credsOf reads the credentials process pid acts on files with.
func credsOf(pid int) (*creds, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, namespaceError(pid, err)
	}
	c, err := parseStatus(data)
	if err != nil {
		return nil, fmt.Errorf("credentials of process %d: %w", pid, err)
	}
	return c, nil
}

// parseStatus reads the lines Uid, Gid (the fourth field of each: the
// filesystem ids), Groups and CapEff of a /proc/PID/status file; a file
// without Uid, Gid or CapEff, or with a field that is not a number, is
// refused.
func parseStatus(data []byte) (*creds, error) {
	c := &creds{}
	var seen struct{ uid, gid, caps bool }
	for line := range bytes.Lines(data) {
		key, val, ok := bytes.Cut(bytes.TrimRight(line, "\n"), []byte(":"))
		if !ok {
			continue
		}
		fields := bytes.Fields(val)
		var err error
		switch string(key) {
		case "Uid", "Gid":
			if len(fields) != 4 {
				return nil, fmt.Errorf("status line %s: want 4 ids, got %d: %w", key, len(fields), skills.ErrInvalid)
			}
			var id int
			if id, err = statusID(fields[3]); err == nil {
				if key[0] == 'U' {
					c.uid, seen.uid = id, true
				} else {
					c.gid, seen.gid = id, true
				}
			}
		case "Groups":
			c.groups = make([]int, 0, len(fields))
			for _, f := range fields {
				var id int
				if id, err = statusID(f); err != nil {
					break
				}
				c.groups = append(c.groups, id)
			}
		case "CapEff":
			if len(fields) != 1 {
				return nil, fmt.Errorf("status line CapEff: want one mask: %w", skills.ErrInvalid)
			}
			c.capEff, err = strconv.ParseUint(string(fields[0]), 16, 64)
			seen.caps = err == nil
		}
		if err != nil {
			return nil, fmt.Errorf("status line %s: %w (%w)", key, err, skills.ErrInvalid)
		}
	}
	if !seen.uid || !seen.gid || !seen.caps {
		return nil, fmt.Errorf("status without Uid, Gid or CapEff: %w", skills.ErrInvalid)
	}
	return c, nil
}

// statusID is a uid or gid of a status line: a number below 2^32-1 (the
// kernel's "no id").
func statusID(f []byte) (int, error) {
	n, err := strconv.ParseUint(string(f), 10, 32)
	if err == nil && n == 1<<32-1 {
		err = fmt.Errorf("id %d is no id", n)
	}
	return int(n), err
}

// assume makes the calling thread act on files as c: its groups, then its
// filesystem gid and uid, then no effective capability c lacks. (A
// filesystem uid other than 0 already drops those that bypass file
// permissions.) Only for a locked thread that ends with its goroutine
// (onTarget's): the calls change this thread alone.
func (c *creds) assume() error {
	if err := unix.Setgroups(c.groups); err != nil {
		return fmt.Errorf("take the groups of the sandbox's process: %w", err)
	}
	// setfsuid and setfsgid answer the previous id, never an error: ask
	// again to know the change took.
	unix.SetfsgidRetGid(c.gid)
	if got, _ := unix.SetfsgidRetGid(-1); got != c.gid {
		return fmt.Errorf("take the filesystem gid %d of the sandbox's process: still %d", c.gid, got)
	}
	unix.SetfsuidRetUid(c.uid)
	if got, _ := unix.SetfsuidRetUid(-1); got != c.uid {
		return fmt.Errorf("take the filesystem uid %d of the sandbox's process: still %d", c.uid, got)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read this thread's capabilities: %w", err)
	}
	data[0].Effective &= uint32(c.capEff)
	data[1].Effective &= uint32(c.capEff >> 32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("take the capabilities of the sandbox's process: %w", err)
	}
	return nil
}
