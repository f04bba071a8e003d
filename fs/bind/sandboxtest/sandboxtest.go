// Package sandboxtest starts real sandboxes (bwrap, an unprivileged uid
// inside) for the tests of what reads as a sandboxed process.
package sandboxtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Box is a sandbox for tests: a bwrap process in mount, pid, ipc, net and
// uts namespaces of its own, with /usr and a workspace folder bound in, and
// running as an unprivileged uid (not root with a user namespace: the
// daemon's view of its uid is then that uid).
type Box struct {
	PID int    // the sandboxed process, as the daemon numbers it
	NS  string // its mount namespace
	cmd *exec.Cmd
}

// Sandboxed starts a Box as uid and gid with the host folder workspace at
// /workspace, and more bwrap arguments (binds) before the command. It
// waits until the process runs as that uid. Stop ends it.
func Sandboxed(workspace string, uid, gid int, binds ...string) (*Box, error) {
	return sandboxed(false, workspace, uid, gid, binds...)
}

// SandboxedSharingPIDs is Sandboxed with the daemon's pid namespace: its
// /proc shows every process of the host's, the daemon's among them.
func SandboxedSharingPIDs(workspace string, uid, gid int, binds ...string) (*Box, error) {
	return sandboxed(true, workspace, uid, gid, binds...)
}

func sandboxed(sharePID bool, workspace string, uid, gid int, binds ...string) (*Box, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	args := []string{"--unshare-pid", "--as-pid-1"}
	if sharePID {
		args = nil
	}
	args = append(args, "--unshare-ipc", "--unshare-net", "--unshare-uts", "--die-with-parent",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
		"--bind", workspace, "/workspace", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--info-fd", "3")
	args = append(args, binds...)
	args = append(args, "--", "setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", gid), "--clear-groups",
		"--inh-caps=-all", "sleep", "infinity")
	cmd := exec.Command(bwrap, args...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	w.Close()
	b := &Box{cmd: cmd}
	var info struct {
		PID int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil {
		b.Stop()
		return nil, fmt.Errorf("bwrap info: %w", err)
	}
	b.PID = info.PID
	// setpriv execs sleep once it took the uid.
	for deadline := time.Now().Add(30 * time.Second); ; {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", b.PID))
		if strings.HasPrefix(string(cmdline), "sleep\x00") {
			break
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, fmt.Errorf("sandbox process %d did not start", b.PID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if b.NS, err = os.Readlink(filepath.Join("/proc", fmt.Sprint(b.PID), "ns", "mnt")); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

// Command is argv to run inside the sandbox — in its mount, pid, net, ipc
// and uts namespaces — as uid and gid, without supplementary groups or
// capabilities: a process of the sandbox, as an agent's tool would be.
// (The sandbox's /usr holds the commands.)
func (b *Box) Command(uid, gid int, argv ...string) *exec.Cmd {
	args := append([]string{"-t", fmt.Sprint(b.PID), "-m", "-p", "-n", "-i", "-u", "--",
		"setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", gid), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--"}, argv...)
	return exec.Command("nsenter", args...)
}

// Stop kills the sandbox and waits for it and its process to be gone.
func (b *Box) Stop() {
	if pidfd, err := unix.PidfdOpen(b.PID, 0); err == nil {
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				break
			}
		}
		unix.Close(pidfd)
	}
	b.cmd.Process.Kill()
	b.cmd.Wait()
}

// Curl is the command line of curl sending method path (a JSON body unless
// "", and the headers hdr, each "Name: value") to the API at the Unix
// socket sock, with more flags: what an agent's tool in a sandbox runs.
// With the flags "-i", "--raw" it prints the answer as sent, which
// ParseAnswer reads.
func Curl(sock string, flags []string, method, path, body string, hdr ...string) []string {
	args := append([]string{"curl", "-sS", "--unix-socket", sock, "-X", method}, flags...)
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data-binary", body)
	}
	for _, h := range hdr {
		args = append(args, "-H", h)
	}
	return append(args, "http://skillfs"+path)
}

// Answer is an HTTP answer as curl got it.
type Answer struct {
	Code   int
	Header http.Header
	Body   []byte
}

func (a Answer) String() string { return fmt.Sprintf("%d %s", a.Code, a.Body) }

// ParseAnswer reads the answer curl -i --raw printed.
func ParseAnswer(raw []byte) (Answer, error) {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		return Answer{}, fmt.Errorf("curl answered %q: %w", raw, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Code: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// Same says whether a answers as b does, byte for byte once what each
// asked for (aWord, bWord) is swapped in: status, content type, allowed
// methods and body.
func (a Answer) Same(b Answer, aWord, bWord string) bool {
	return a.Code == b.Code && a.Header.Get("Content-Type") == b.Header.Get("Content-Type") &&
		a.Header.Get("Allow") == b.Header.Get("Allow") && bytes.Equal(bytes.ReplaceAll(a.Body, []byte(aWord), []byte(bWord)), b.Body)
}
