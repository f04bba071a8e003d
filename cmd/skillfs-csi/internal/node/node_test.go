package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"skillfs/cmd/skillfs/api"
)

// podTarget is the target path a kubelet gives volume vol of pod uid.
func podTarget(root, uid, vol string) string {
	return filepath.Join(root, "pods", uid, "volumes", "kubernetes.io~csi", vol, "mount")
}

func codeOf(err error) codes.Code { return status.Code(err) }

// isMount reports whether path is a mount point here.
func isMount(t testing.TB, path string) bool {
	t.Helper()
	m, err := mountsBelow(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m {
		if p == path {
			return true
		}
	}
	return false
}

// driverSessions are the open sessions carrying the driver's label.
func (n *testNode) driverSessions() []api.SessionInfo {
	n.t.Helper()
	list, err := n.driver.daemon().sessions(context.Background(), api.SessionQuery{Labels: map[string]string{LabelDriver: n.driver.Name}})
	if err != nil {
		n.t.Fatal(err)
	}
	return list
}

// unpublishClean unpublishes volume id at target and checks that nothing
// is left: no mount, no target, no session of the driver.
func (n *testNode) unpublishClean(ctx context.Context, id, target, when string) {
	n.t.Helper()
	if _, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		n.t.Fatalf("unpublish %s: %v", when, err)
	}
	if m, _ := mountsBelow(filepath.Dir(target)); len(m) > 0 {
		n.t.Fatalf("unpublish %s left mounts %v", when, m)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		n.t.Fatalf("unpublish %s left the target: %v", when, err)
	}
	if list := n.driverSessions(); len(list) != 0 {
		n.t.Fatalf("unpublish %s left sessions %+v", when, list)
	}
}

func TestPublishUnpublish(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	target := podTarget(t.TempDir(), "uid-1", "skills")
	vc := podContext("agents", "pod-1", "uid-1", "runner", map[string]string{AttrUser: "alice", AttrSkills: testSkill})
	req := publishReq("csi-vol-1", target, vc)
	for i := range 2 { // the second is a repeat: OK, nothing more made
		if _, err := n.node().NodePublishVolume(ctx, req); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	got, err := os.ReadFile(filepath.Join(target, testSkill, "references", "data.txt"))
	if err != nil || string(got) != testFileBody {
		t.Fatalf("read at the target: %q, %v; want %q", got, err, testFileBody)
	}
	if err := os.WriteFile(filepath.Join(target, testSkill, "new.txt"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.EPERM) {
		t.Fatalf("write at the target: %v, want it refused (read-only)", err)
	}
	list := n.driverSessions()
	if len(list) != 1 || len(list[0].Binds) != 1 || list[0].User != "alice" {
		t.Fatalf("sessions after two publishes: %+v, want one of alice bound once", list)
	}
	s := list[0]
	for k, want := range map[string]string{LabelNamespace: "agents", LabelPod: "pod-1", LabelPodUID: "uid-1", LabelSA: "runner", LabelVolume: "csi-vol-1"} {
		if s.Labels[k] != want {
			t.Errorf("label %s = %q, want %q (labels %v)", k, s.Labels[k], want, s.Labels)
		}
	}
	n.unpublishClean(ctx, "csi-vol-1", target, "once")
	n.unpublishClean(ctx, "csi-vol-1", target, "again")
	// Unknown volume, unknown target: OK.
	if _, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "nope", TargetPath: target}); err != nil {
		t.Fatalf("unpublish of an unknown volume: %v", err)
	}
}

func TestPublishRefused(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	root := t.TempDir()
	cases := []struct {
		name string
		vc   map[string]string
		code codes.Code
	}{
		{"other user", podContext("agents", "p", "u1", "runner", map[string]string{AttrUser: "bob"}), codes.PermissionDenied},
		{"other namespace", podContext("default", "p", "u2", "runner", map[string]string{AttrUser: "alice"}), codes.PermissionDenied},
		{"other service account", podContext("agents", "p", "u3", "default", map[string]string{AttrUser: "alice"}), codes.PermissionDenied},
		{"no pod info", map[string]string{AttrUser: "alice"}, codes.PermissionDenied},
		{"no user", podContext("agents", "p", "u4", "runner", nil), codes.InvalidArgument},
		{"unknown attribute", podContext("agents", "p", "u5", "runner", map[string]string{AttrUser: "alice", "usr": "x"}), codes.InvalidArgument},
		{"unknown kind", podContext("agents", "p", "u6", "runner", map[string]string{AttrUser: "alice", AttrKind: "rw"}), codes.InvalidArgument},
		{"api before skills", podContext("agents", "p", "u7", "runner", map[string]string{AttrKind: KindAPI}), codes.Unavailable},
	}
	for i, c := range cases {
		target := podTarget(root, fmt.Sprint("u", i), "v")
		_, err := n.node().NodePublishVolume(ctx, publishReq(fmt.Sprint("vol-", i), target, c.vc))
		if codeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
		t.Logf("%s: %v", c.name, err)
	}
	if list := n.driverSessions(); len(list) != 0 {
		t.Fatalf("refused publishes opened sessions: %+v", list)
	}
	if m, _ := mountsBelow(root); len(m) > 0 {
		t.Fatalf("refused publishes left mounts: %v", m)
	}
	block := publishReq("vol-b", podTarget(root, "ub", "v"), podContext("agents", "p", "ub", "runner", map[string]string{AttrUser: "alice"}))
	block.VolumeCapability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	if _, err := n.node().NodePublishVolume(ctx, block); codeOf(err) != codes.InvalidArgument {
		t.Errorf("block access: %v, want InvalidArgument", err)
	}
}

func TestPublishRaces(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	target := podTarget(t.TempDir(), "uid-r", "skills")
	req := publishReq("csi-vol-r", target, podContext("agents", "pod-r", "uid-r", "runner", map[string]string{AttrUser: "alice", AttrSkills: testSkill}))
	un := &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-vol-r", TargetPath: target}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = n.node().NodePublishVolume(ctx, req)
			} else {
				_, err = n.node().NodeUnpublishVolume(ctx, un)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a racing call: %v", err)
		}
	}
	// Consistent: mounted exactly when a session is bound there.
	list := n.driverSessions()
	mounted := isMount(t, target)
	if mounted != (len(list) == 1 && len(list[0].Binds) == 1) || len(list) > 1 {
		t.Fatalf("after the races: mounted %v, sessions %+v", mounted, list)
	}
	t.Logf("after 20 racing calls: mounted %v, %d session(s)", mounted, len(list))
	n.unpublishClean(ctx, "csi-vol-r", target, "after the races")
}

func TestAPIVolume(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	root := t.TempDir()
	skillsTarget, apiTarget := podTarget(root, "uid-a", "skills"), podTarget(root, "uid-a", "api")
	pod := func(attrs map[string]string) map[string]string {
		return podContext("agents", "pod-a", "uid-a", "runner", attrs)
	}
	if _, err := n.node().NodePublishVolume(ctx, publishReq("vol-s", skillsTarget, pod(map[string]string{AttrUser: "alice", AttrSkills: testSkill}))); err != nil {
		t.Fatal(err)
	}
	apiReq := publishReq("vol-a", apiTarget, pod(map[string]string{AttrKind: KindAPI}))
	for range 2 {
		if _, err := n.node().NodePublishVolume(ctx, apiReq); err != nil {
			t.Fatal(err)
		}
	}
	list := n.driverSessions()
	if len(list) != 1 {
		t.Fatalf("sessions: %+v", list)
	}
	hc := apiClient(t, apiTarget)
	resp, err := hc.Get("http://skillfs/v1/whoami")
	if err != nil {
		t.Fatal(err)
	}
	var who api.Whoami
	json.NewDecoder(resp.Body).Decode(&who)
	resp.Body.Close()
	if who.Session != list[0].ID || who.Role != "session" {
		t.Fatalf("whoami on the volume's socket: %+v, want session %s", who, list[0].ID)
	}
	hc.CloseIdleConnections()
	// The skills volume goes first: the session stays for the api volume.
	for _, u := range []struct{ id, target string }{{"vol-s", skillsTarget}, {"vol-a", apiTarget}} {
		if _, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: u.id, TargetPath: u.target}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(u.target); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after unpublish: %v", u.target, err)
		}
	}
	if m, _ := mountsBelow(root); len(m) > 0 || len(n.driverSessions()) != 0 {
		t.Fatalf("left: mounts %v, sessions %+v", m, n.driverSessions())
	}
}

// apiClient is an HTTP client of the API socket in kind=api volume
// target, dialled through the folder's descriptor: the path may be longer
// than a socket address holds (the pod sees it at a short one).
func apiClient(t testing.TB, target string) *http.Client {
	t.Helper()
	dfd, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d/%s", dfd.Fd(), SocketName))
	}}}
	t.Cleanup(func() { hc.CloseIdleConnections(); dfd.Close() })
	return hc
}

// TestForgedLabels: a pod's session credential may not give a sub-agent
// session the plugin's labels, and a sub-agent session carrying them
// anyway (an operator's) is none of the plugin's: another pod's api volume
// does not find it, and unpublish leaves it to its parent.
func TestForgedLabels(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	root := t.TempDir()
	skillsA, apiA := n.publishPod(ctx, root, "uid-a", true)
	hc := apiClient(t, apiA)
	for _, label := range []string{LabelDriver, LabelPodUID} {
		body := fmt.Sprintf(`{"labels":{%q:"uid-b"}}`, label)
		resp, err := hc.Post("http://skillfs/v1/sessions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e api.Error
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(e.Error, label) {
			t.Fatalf("a child with label %s made by the pod's session: %d %q, want 403 naming it", label, resp.StatusCode, e.Error)
		}
	}
	parent := n.driverSessions()[0].ID
	child, err := n.driver.daemon().create(ctx, api.CreateRequest{User: "alice", Parent: parent,
		Labels: map[string]string{LabelDriver: n.driver.Name, LabelPodUID: "uid-b", LabelVolume: "vol-a-uid-b"}})
	if err != nil {
		t.Fatal(err)
	}
	if list := n.driverSessions(); len(list) != 1 || list[0].ID != parent {
		t.Fatalf("the plugin's sessions: %+v, want pod a's alone (not sub-agent %s)", list, child.ID)
	}
	_, err = n.node().NodePublishVolume(ctx, publishReq("vol-a-uid-b", podTarget(root, "uid-b", "api"), podContext("agents", "pod-uid-b", "uid-b", "runner", map[string]string{AttrKind: KindAPI})))
	if codeOf(err) != codes.Unavailable {
		t.Fatalf("pod b's api volume with a sub-agent labelled as its: %v, want Unavailable (no skills volume of pod b)", err)
	}
	for _, u := range []struct{ id, target string }{{"vol-a-uid-a", apiA}, {"vol-s-uid-a", skillsA}} {
		if _, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: u.id, TargetPath: u.target}); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := mountsBelow(root); len(m) > 0 || len(n.driverSessions()) != 0 {
		t.Fatalf("left: mounts %v, sessions %+v", m, n.driverSessions())
	}
}

// TestSymlinkedPodsFolder: with the kubelet's pods folder behind a
// symlink (the daemon records binds at resolved paths), the api volume
// finds the pod's session, and unpublish removes both binds and closes it.
func TestSymlinkedPodsFolder(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	root, real := t.TempDir(), t.TempDir()
	if err := os.Symlink(real, filepath.Join(root, "pods")); err != nil {
		t.Fatal(err)
	}
	skillsTarget, apiTarget := n.publishPod(ctx, root, "uid-l", true)
	resolved := func(p string) string { return filepath.Join(real, strings.TrimPrefix(p, filepath.Join(root, "pods"))) }
	list := n.driverSessions()
	if len(list) != 1 || !bound(list[0].Binds, place{resolved(skillsTarget)}) || !bound(list[0].Binds, place{resolved(filepath.Join(apiTarget, ViewDir))}) {
		t.Fatalf("sessions: %+v, want one bound at both volumes' resolved paths", list)
	}
	if got, err := os.ReadFile(filepath.Join(apiTarget, ViewDir, testSkill, "references", "data.txt")); err != nil || string(got) != testFileBody {
		t.Fatalf("read in the api volume: %q, %v", got, err)
	}
	if _, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-a-uid-l", TargetPath: apiTarget}); err != nil {
		t.Fatal(err)
	}
	n.unpublishClean(ctx, "vol-s-uid-l", skillsTarget, "behind a symlink")
	if m, _ := mountsBelow(real); len(m) > 0 {
		t.Fatalf("left mounts %v", m)
	}
	if _, err := os.Stat(apiTarget); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the api volume's target after unpublish: %v", err)
	}
}

func TestPluginRestart(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	target := podTarget(t.TempDir(), "uid-x", "skills")
	if _, err := n.node().NodePublishVolume(ctx, publishReq("vol-x", target, podContext("agents", "pod-x", "uid-x", "runner", map[string]string{AttrUser: "alice", AttrAll: "true"}))); err != nil {
		t.Fatal(err)
	}
	n.restartPlugin()
	n.unpublishClean(ctx, "vol-x", target, "by a restarted plugin")
}

func TestDaemonDown(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	n.stopDaemon()
	target := podTarget(t.TempDir(), "uid-d", "skills")
	_, err := n.node().NodePublishVolume(ctx, publishReq("vol-d", target, podContext("agents", "p", "uid-d", "runner", map[string]string{AttrUser: "alice"})))
	if codeOf(err) != codes.Unavailable {
		t.Fatalf("publish with the daemon down: %v, want Unavailable", err)
	}
	t.Log(err)
	p, err := csi.NewIdentityClient(n.conn).Probe(ctx, &csi.ProbeRequest{})
	if err != nil || p.GetReady().GetValue() {
		t.Fatalf("probe with the daemon down: %v, %v; want not ready", p, err)
	}
}

func TestKeyedVolumes(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	root := t.TempDir()
	attrs := map[string]string{AttrUser: "alice", AttrSkills: testSkill, AttrKey: "thread-7"}
	pod := func(uid string, attrs map[string]string) map[string]string {
		return podContext("agents", "pod-"+uid, uid, "runner", attrs)
	}
	// Two volumes of pod 1 with one key share a session.
	t1, t2 := podTarget(root, "uid-1", "skills-a"), podTarget(root, "uid-1", "skills-b")
	for i, target := range []string{t1, t2} {
		if _, err := n.node().NodePublishVolume(ctx, publishReq(fmt.Sprint("vol-1-", i), target, pod("uid-1", attrs))); err != nil {
			t.Fatal(err)
		}
	}
	if list := n.driverSessions(); len(list) != 1 || len(list[0].Binds) != 2 {
		t.Fatalf("two volumes of one pod and one key: %+v, want one session bound twice", list)
	}
	first := n.driverSessions()[0].ID
	// Another pod giving the same key (same user, same skills) gets a
	// session of its own, and its api volume that session's socket.
	t3, a3 := podTarget(root, "uid-2", "skills"), podTarget(root, "uid-2", "api")
	if _, err := n.node().NodePublishVolume(ctx, publishReq("vol-2", t3, pod("uid-2", attrs))); err != nil {
		t.Fatal(err)
	}
	if _, err := n.node().NodePublishVolume(ctx, publishReq("vol-2-api", a3, pod("uid-2", map[string]string{AttrKind: KindAPI, AttrKey: "thread-7"}))); err != nil {
		t.Fatal(err)
	}
	list := n.driverSessions()
	if len(list) != 2 {
		t.Fatalf("two pods giving one key: %+v, want a session each", list)
	}
	for _, s := range list {
		if s.ID == first {
			if len(s.Binds) != 2 || s.Labels[LabelPodUID] != "uid-1" {
				t.Fatalf("pod 1's session after pod 2's publish: %+v", s)
			}
			continue
		}
		if s.Labels[LabelPodUID] != "uid-2" || len(s.Binds) != 2 || !bound(s.Binds, placeOf(t3)) || !bound(s.Binds, placeOf(a3).join(ViewDir)) {
			t.Fatalf("pod 2's session: %+v, want bound at its skills and api volumes", s)
		}
	}
	// The key with another request in the same pod: refused.
	other := map[string]string{AttrUser: "alice", AttrAll: "true", AttrKey: "thread-7"}
	_, err := n.node().NodePublishVolume(ctx, publishReq("vol-1-x", podTarget(root, "uid-1", "skills-x"), pod("uid-1", other)))
	if codeOf(err) != codes.AlreadyExists {
		t.Fatalf("the key with another request: %v, want AlreadyExists", err)
	}
	t.Log(err)
	// A key without the pod's uid: refused.
	noUID := map[string]string{AttrUser: "alice", AttrKey: "thread-7"}
	if _, err := n.node().NodePublishVolume(ctx, publishReq("vol-nouid", podTarget(root, "uid-0", "skills"), noUID)); codeOf(err) != codes.InvalidArgument {
		t.Fatalf("a key without the pod's uid: %v, want InvalidArgument", err)
	}
	for _, u := range []struct{ id, target string }{{"vol-2-api", a3}, {"vol-2", t3}, {"vol-1-0", t1}} {
		if _, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: u.id, TargetPath: u.target}); err != nil {
			t.Fatal(err)
		}
	}
	if list := n.driverSessions(); len(list) != 1 || list[0].ID != first || len(list[0].Binds) != 1 {
		t.Fatalf("after pod 2 and one of pod 1's volumes unpublished: %+v, want pod 1's session kept for its other volume", list)
	}
	n.unpublishClean(ctx, "vol-1-1", t2, "the last keyed volume")
}

func TestTargetTaken(t *testing.T) {
	n := startNode(t)
	ctx := ctxOf(t)
	target := podTarget(t.TempDir(), "uid-t", "skills")
	if err := os.MkdirAll(target, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", target, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount a tmpfs at the target: %v", err)
	}
	defer syscall.Unmount(target, syscall.MNT_DETACH)
	_, err := n.node().NodePublishVolume(ctx, publishReq("vol-t", target, podContext("agents", "p", "uid-t", "runner", map[string]string{AttrUser: "alice"})))
	if codeOf(err) != codes.AlreadyExists {
		t.Fatalf("publish at a mount point of something else: %v, want AlreadyExists", err)
	}
	t.Log(err)
	if list := n.driverSessions(); len(list) != 0 {
		t.Fatalf("a refused bind left its session open: %+v", list)
	}
	_, err = n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-t", TargetPath: target})
	if codeOf(err) != codes.FailedPrecondition || !isMount(t, target) {
		t.Fatalf("unpublish at a mount point of something else: %v (still mounted: %v), want FailedPrecondition and the mount left alone", err, isMount(t, target))
	}
	t.Log(err)
}

// BenchmarkPublishUnpublish measures a pod's volume coming and going: a
// publish (policy, session opened, bound) and its unpublish (unbound,
// closed, target removed), one after the other.
func BenchmarkPublishUnpublish(b *testing.B) {
	n := startNode(b)
	ctx := ctxOf(b)
	root := b.TempDir()
	vc := podContext("agents", "pod-b", "uid-b", "runner", map[string]string{AttrUser: "alice", AttrSkills: testSkill})
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprint("vol-b-", i)
		target := podTarget(root, "uid-b", id)
		if _, err := n.node().NodePublishVolume(ctx, publishReq(id, target, vc)); err != nil {
			b.Fatal(err)
		}
		if _, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAPIVolumeGroup: with a group for the socket — the pod's fsGroup
// (volume_mount_group), or the volume's socketGroup (which wins over the
// fsGroup) — the API socket is the group's, 0660: a process of another
// user in that group connects, one outside it does not; without either it
// is root's, 0600.
func TestAPIVolumeGroup(t *testing.T) {
	curl := "/usr/bin/curl"
	if _, err := os.Stat(curl); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("curl not installed, and CI=true: %v", err)
		}
		t.Skip("curl not installed")
	}
	n := startNode(t)
	ctx := ctxOf(t)
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} { // an unprivileged user reaches the kubelet's folders
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name         string
		mountGroup   string // the request's volume_mount_group
		socketGroup  string // the volume's attribute
		gid          uint32 // the socket's group, and the one that connects
		restartAfter bool
	}{
		{"fsGroup", "4242", "", 4242, true},
		{"socketGroup", "", "4244", 4244, false},
		{"socketGroup over fsGroup", "4243", "4245", 4245, false},
		{"neither", "", "", 0, false},
	}
	for i, c := range cases {
		uid := fmt.Sprint("uid-g", i)
		skillsTarget, apiTarget := podTarget(root, uid, "skills"), podTarget(root, uid, "api")
		if err := os.MkdirAll(filepath.Dir(apiTarget), 0o755); err != nil { // as the kubelet makes it
			t.Fatal(err)
		}
		pod := func(attrs map[string]string) map[string]string {
			return podContext("agents", "pod-"+uid, uid, "runner", attrs)
		}
		if _, err := n.node().NodePublishVolume(ctx, publishReq("vol-gs-"+uid, skillsTarget, pod(map[string]string{AttrUser: "alice", AttrSkills: testSkill}))); err != nil {
			t.Fatal(err)
		}
		attrs := map[string]string{AttrKind: KindAPI}
		if c.socketGroup != "" {
			attrs[AttrSocketGroup] = c.socketGroup
		}
		req := publishReq("vol-ga-"+uid, apiTarget, pod(attrs))
		req.VolumeCapability.GetMount().VolumeMountGroup = c.mountGroup
		if _, err := n.node().NodePublishVolume(ctx, req); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sock := filepath.Join(apiTarget, SocketName)
		var st syscall.Stat_t
		if err := syscall.Lstat(sock, &st); err != nil {
			t.Fatalf("%s: socket: %v", c.name, err)
		}
		wantMode := uint32(0o660)
		if c.gid == 0 {
			wantMode = 0o600
		}
		if st.Mode&0o7777 != wantMode || st.Gid != c.gid {
			t.Fatalf("%s: socket: mode %o gid %d; want %o of group %d", c.name, st.Mode&0o7777, st.Gid, wantMode, c.gid)
		}
		as := func(gid uint32) (string, error) {
			cmd := exec.Command(curl, "-sS", "--fail", "--unix-socket", SocketName, "http://skillfs/v1/whoami")
			cmd.Dir = apiTarget // the path may be longer than a socket address holds
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: gid, Groups: []uint32{}}}
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		connects := func(when string) {
			t.Helper()
			if c.gid == 0 {
				if out, err := as(0); err == nil {
					t.Fatalf("%s: whoami as another user of group 0 answered on a socket of root's, 0600:\n%s", c.name, out)
				}
				return
			}
			if out, err := as(c.gid); err != nil || !strings.Contains(strings.ReplaceAll(out, " ", ""), `"role":"session"`) {
				t.Fatalf("%s: whoami as a user of the group%s: %v\n%q", c.name, when, err, out)
			}
			if out, err := as(c.gid + 100); err == nil {
				t.Fatalf("%s: whoami as a user outside the group%s answered:\n%s", c.name, when, out)
			}
		}
		connects("")
		if c.restartAfter {
			// The daemon makes the socket again at its next start: the group's still.
			n.stopDaemon()
			n.startDaemon()
			connects(" after a daemon restart")
		}
		if _, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-gs-" + uid, TargetPath: skillsTarget}); err != nil {
			t.Fatal(err)
		}
		n.unpublishClean(ctx, "vol-ga-"+uid, apiTarget, c.name+": the api volume")
	}
}

// publishPod publishes pod uid's skills volume and then its kind=api
// volume under root, and returns their targets.
func (n *testNode) publishPod(ctx context.Context, root, uid string, api bool) (skillsTarget, apiTarget string) {
	n.t.Helper()
	skillsTarget, apiTarget = podTarget(root, uid, "skills"), podTarget(root, uid, "api")
	pod := podContext("agents", "pod-"+uid, uid, "runner", map[string]string{AttrUser: "alice", AttrSkills: testSkill})
	if _, err := n.node().NodePublishVolume(ctx, publishReq("vol-s-"+uid, skillsTarget, pod)); err != nil {
		n.t.Fatalf("pod %s: publish the skills volume: %v", uid, err)
	}
	if api {
		if _, err := n.node().NodePublishVolume(ctx, publishReq("vol-a-"+uid, apiTarget, podContext("agents", "pod-"+uid, uid, "runner", map[string]string{AttrKind: KindAPI}))); err != nil {
			n.t.Fatalf("pod %s: publish the api volume: %v", uid, err)
		}
	}
	return skillsTarget, apiTarget
}

// sideBySide runs the calls at once (released together) and returns their
// errors.
func sideBySide(calls ...func() error) []error {
	errs := make([]error, len(calls))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { <-start; errs[i] = call() })
	}
	close(start)
	wg.Wait()
	return errs
}

// TestPodVolumesTornDownTogether: a kubelet tears a pod's volumes down side
// by side; the skills and api volumes, which share the pod's session,
// unpublished at once leave no session open and nothing mounted, round
// after round.
func TestPodVolumesTornDownTogether(t *testing.T) {
	const rounds = 30
	n := startNode(t)
	ctx := ctxOf(t)
	root := t.TempDir()
	for i := range rounds {
		uid := fmt.Sprint("uid-t", i)
		skillsTarget, apiTarget := n.publishPod(ctx, root, uid, true)
		errs := sideBySide(
			func() error {
				_, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-s-" + uid, TargetPath: skillsTarget})
				return err
			},
			func() error {
				_, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-a-" + uid, TargetPath: apiTarget})
				return err
			})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: unpublish both volumes at once: %v", i, err)
		}
		if list := n.driverSessions(); len(list) != 0 {
			t.Fatalf("round %d: after both volumes unpublished at once, sessions left open: %+v", i, list)
		}
		if m, _ := mountsBelow(root); len(m) > 0 {
			t.Fatalf("round %d: mounts left: %v", i, m)
		}
	}
}

// TestAPIPublishRacesSkillsUnpublish: a pod's api volume published while
// its skills volume goes (a pod deleted while its volumes are set up). The
// api publish either succeeds, and then its socket and view are there,
// bound, or it is refused Unavailable and nothing of it is left; never a
// volume reported published whose session was closed under it.
func TestAPIPublishRacesSkillsUnpublish(t *testing.T) {
	const rounds = 30
	n := startNode(t)
	ctx := ctxOf(t)
	root := t.TempDir()
	published := 0
	for i := range rounds {
		uid := fmt.Sprint("uid-p", i)
		skillsTarget, apiTarget := n.publishPod(ctx, root, uid, false)
		apiReq := publishReq("vol-a-"+uid, apiTarget, podContext("agents", "pod-"+uid, uid, "runner", map[string]string{AttrKind: KindAPI}))
		errs := sideBySide(
			func() error {
				_, err := n.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-s-" + uid, TargetPath: skillsTarget})
				return err
			},
			func() error {
				_, err := n.node().NodePublishVolume(ctx, apiReq)
				return err
			})
		if errs[0] != nil {
			t.Fatalf("round %d: unpublish the skills volume: %v", i, errs[0])
		}
		list := n.driverSessions()
		view := filepath.Join(apiTarget, ViewDir)
		switch {
		case errs[1] == nil:
			published++
			if len(list) != 1 || len(list[0].Binds) != 1 || list[0].Binds[0].Target != view || !isMount(t, view) {
				t.Fatalf("round %d: the api volume was published, but sessions are %+v (mounted at %s: %v); want one bound there", i, list, view, isMount(t, view))
			}
			if _, err := os.Lstat(filepath.Join(apiTarget, SocketName)); err != nil {
				t.Fatalf("round %d: the api volume was published without its socket: %v", i, err)
			}
		case codeOf(errs[1]) == codes.Unavailable:
			if len(list) != 0 {
				t.Fatalf("round %d: the api publish was refused (%v), but sessions are open: %+v", i, errs[1], list)
			}
		default:
			t.Fatalf("round %d: api publish: %v, want OK or Unavailable", i, errs[1])
		}
		n.unpublishClean(ctx, "vol-a-"+uid, apiTarget, fmt.Sprintf("round %d: the api volume", i))
	}
	t.Logf("%d rounds: the api volume published in %d, refused Unavailable in %d", rounds, published, rounds-published)
}
