package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// boxAPISocket is where an agent finds the skillfs API in its box: in its
// home, beside its skills.
const boxAPISocket = boxHome + "/.skillfs.sock"

// boxPy is the Python client's command line inside a box, on the socket
// at boxAPISocket.
const boxPy = "python3 " + boxClient + " --socket " + boxAPISocket

// TestSandboxAgentUsesClient: an agent in a box, as agentUID, with its
// session's view bound at /home/gem/skills and the session's API socket
// beside it by `session mount --pid --api-socket`, reads SKILL.md with
// cat, and with the Python client on that socket (no token: the socket is
// the credential) learns who it is and reads the same file by its URI, its
// prompt, its activation (made by its own read) and the event of it. The
// daemon's own socket, bound into the box, refuses the agent's uid.
func TestSandboxAgentUsesClient(t *testing.T) {
	requireCommand(t, "python3")
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no /usr/bin/python3 for the box, and CI=true: %v", err)
		}
		t.Skipf("no /usr/bin/python3 for the box: %v", err)
	}
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "release-notes")
	b := boundBox(t, e, s.ID, "--bind", filepath.Join(e.home, "skillfs.sock"), boxHome+"/operator.sock")

	var who struct {
		Role, Session, User, Token string
	}
	if err := json.Unmarshal([]byte(b.ok(boxPy+" whoami")), &who); err != nil {
		t.Fatal(err)
	}
	if who != (struct{ Role, Session, User, Token string }{"session", s.ID, "alice", ""}) {
		t.Errorf("whoami on the box's socket: %+v", who)
	}
	manifest := b.ok("cat " + boxSkills + "/release-notes/SKILL.md")
	if !strings.HasPrefix(manifest, "---\nname: release-notes\n") {
		t.Fatalf("SKILL.md in the box: %q", manifest)
	}
	prompt := b.ok(boxPy + " prompt " + s.ID)
	if !strings.Contains(prompt, boxSkills+"/release-notes/SKILL.md") || !strings.Contains(prompt, "commit-messages") {
		t.Errorf("the prompt in the box: %q", prompt)
	}
	var act activationsInfo
	if err := json.Unmarshal([]byte(b.ok(boxPy+" activations "+s.ID)), &act); err != nil {
		t.Fatal(err)
	}
	if len(act.Activated) != 1 || act.opens("release-notes") != 1 {
		t.Errorf("activations after the agent's cat: %+v", act.Activated)
	}
	if got := b.ok(boxPy + " resolve " + s.ID + " skill://release-notes"); got != manifest {
		t.Errorf("the client's resolve in the box: %q, want what cat read", got)
	}
	var ev streamEvent
	if err := json.Unmarshal([]byte(b.ok(boxPy+" events "+s.ID+" --after 0 --count 1")), &ev.Event); err != nil {
		t.Fatal(err)
	}
	if ev.describe() != "activated release-notes" || ev.Event.Session != s.ID {
		t.Errorf("the first event in the box: %+v", ev.Event)
	}
	// The operator's socket is root's: bound in, it is no way out.
	r := b.run("python3 " + boxClient + " --socket " + boxHome + "/operator.sock show " + s.ID)
	if r.code != 7 || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("the daemon's socket from the box: exit %d, %q%q; want exit 7, permission denied", r.code, r.stdout, r.stderr)
	}
}
