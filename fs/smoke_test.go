package fs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestSmoke(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "s1", View{st.alpha1, st.beta1})
	out, err := exec.Command("ls", "-laR", dir).CombinedOutput()
	t.Logf("%s %v", out, err)
	out, err = exec.Command("ls", "-la", srv.Mountpoint()).CombinedOutput()
	t.Logf("%s %v", out, err)
	b, err := os.ReadFile(filepath.Join(dir, "alpha/SKILL.md"))
	t.Logf("%s %v", b, err)
	out, err = exec.Command(filepath.Join(dir, "alpha/scripts/run.sh"), "x").CombinedOutput()
	t.Logf("%s %v", out, err)
	out, _ = exec.Command("grep", "skillfs", "/proc/self/mountinfo").CombinedOutput()
	t.Logf("%s", out)
}
