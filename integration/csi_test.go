package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"skillfs/cmd/skillfs/api"
)

// The volumes of the tests' pods, as their specs name them: the skills
// volume, and the api volume holding the session's API socket.
const (
	skillsVolume = "skills"
	apiVolume    = "skillfs-api"
)

// skillsAttrs are the skills volume's volumeAttributes, apiAttrs the api
// volume's.
var (
	skillsAttrs = map[string]string{"user": "alice", "skills": csiProbe + "," + csiOther}
	apiAttrs    = map[string]string{"kind": "api"}
)

// probeManifest is the path of csiProbe's SKILL.md in a container.
var probeManifest = filepath.Join(containerSkills, csiProbe, "SKILL.md")

// publishPod has the kubelet publish the pod's skills volume (and its api
// volume, withAPI), failing the test on an error.
func (n *csiNode) publishPod(p pod, withAPI bool) {
	n.t.Helper()
	if err := n.kubelet.publish(p, skillsVolume, skillsAttrs); err != nil {
		n.t.Fatalf("publish the skills volume of pod %s: %v", p.name, err)
	}
	if !withAPI {
		return
	}
	if err := n.kubelet.publish(p, apiVolume, apiAttrs); err != nil {
		n.t.Fatalf("publish the api volume of pod %s: %v", p.name, err)
	}
}

// unpublishPod has the kubelet unpublish the pod's volumes, failing the
// test on an error.
func (n *csiNode) unpublishPod(p pod, withAPI bool) {
	n.t.Helper()
	vols := []string{skillsVolume}
	if withAPI {
		vols = append(vols, apiVolume)
	}
	for _, v := range vols {
		if err := n.kubelet.unpublish(p, v); err != nil {
			n.t.Fatalf("unpublish volume %s of pod %s: %v", v, p.name, err)
		}
	}
}

// podMounts are the container's mounts of the pod's volumes: the skills
// volume at containerSkills and, withAPI, the api volume at containerAPI.
func (n *csiNode) podMounts(p pod, withAPI bool) [][2]string {
	m := [][2]string{{n.kubelet.target(p, skillsVolume), containerSkills}}
	if withAPI {
		m = append(m, [2]string{n.kubelet.target(p, apiVolume), containerAPI})
	}
	return m
}

// podReading publishes both volumes of a pod and starts its container,
// which has read 100 files when it returns.
func (n *csiNode) podReading() (pod, api.SessionInfo, *container) {
	n.t.Helper()
	p := newPod("agents", "agent-0", "runner")
	n.publishPod(p, true)
	c := startContainer(n.t, n.podMounts(p, true))
	c.waitReads(100, 30*time.Second)
	return p, n.sessionOf(p), c
}

// assertActivated fails the test unless session id's activations come to
// exactly csiProbe opened opens times (counts are stored in batches: it
// waits up to 10 s for them).
func (n *csiNode) assertActivated(id string, opens int) {
	n.t.Helper()
	var a activationsInfo
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if a = n.activations(id); slices.Equal(a.slugs(), []string{csiProbe}) && a.opens(csiProbe) == opens {
			return
		}
	}
	n.t.Fatalf("session %s: activations %+v, want %s alone, opened %d times", id, a.Activated, csiProbe, opens)
}

// TestCSIPublishReadUnpublish: a pod's skills and api volumes, published as
// the kubelet does, read from the pod's container as an agent does; the
// first read of SKILL.md activates its skill once, every read counted, and
// the api volume's socket answers as the session without a credential;
// unpublish leaves nothing; both calls are safe to repeat.
func TestCSIPublishReadUnpublish(t *testing.T) {
	n := startCSINode(t)
	k := n.kubelet
	p := newPod("agents", "agent-0", "runner")
	if err := k.publish(p, apiVolume, apiAttrs); status.Code(err) != codes.Unavailable {
		t.Fatalf("api volume before the skills volume: %v, want Unavailable (the kubelet retries)", err)
	}
	for range 2 { // a repeat is OK and makes nothing more
		n.publishPod(p, true)
	}
	s := n.sessionOf(p)
	target := k.target(p, skillsVolume)
	if s.User != "alice" || !slices.Equal(slices.Sorted(slices.Values(s.Readable)), []string{csiOther, csiProbe}) {
		t.Fatalf("the pod's session: %+v", s)
	}
	if got := bindTargets(s); !slices.Equal(got, []string{filepath.Join(k.target(p, apiVolume), "skills"), target}) {
		t.Fatalf("the pod's session is bound at %q", got)
	}
	if m := mountedUnder(t, target); !slices.Equal(m, []string{target}) {
		t.Fatalf("mounted at the target: %q", m)
	}
	if err := os.WriteFile(filepath.Join(target, csiProbe, "new.txt"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write at the target: %v, want EROFS", err)
	}

	c := startContainer(t, n.podMounts(p, true))
	for path, want := range map[string]string{k.root: "master:", containerSkills: "", containerAPI: "", containerAPI + "/skills": ""} {
		if got := c.propagation(path); want == "" && got != "" || !strings.HasPrefix(got, want) {
			t.Fatalf("the container's mount at %s has propagation %q, want %q (runc: the host's mounts slaves, the volumes private)", path, got, want)
		}
	}
	c.waitReads(300, 30*time.Second)
	c.assertNoFailure("reading the volume")
	var who struct {
		Role, Session, User string
	}
	code, body := c.curl("/v1/whoami")
	if err := json.Unmarshal([]byte(body), &who); code != 200 || err != nil || who.Role != "session" || who.Session != s.ID || who.User != "alice" {
		t.Fatalf("whoami on the api volume's socket: %d %s", code, body)
	}
	if code, body := c.curl("/v1/sessions/" + s.ID + "/activations"); code != 200 || !strings.Contains(body, `"`+csiProbe+`"`) || strings.Contains(body, `"`+csiOther+`"`) {
		t.Fatalf("the session's activations on its socket: %d %s", code, body)
	}
	other := n.e.newSession("alice", "--skills", csiProbe)
	hidden, _ := c.curl("/v1/sessions/" + other.ID + "/activations")
	missing, _ := c.curl("/v1/sessions/" + strings.Repeat("0", len(other.ID)) + "/activations")
	if hidden != 404 || missing != 404 {
		t.Fatalf("another session's activations on the pod's socket: %d (one that does not exist: %d), want 404", hidden, missing)
	}
	c.stop() // the kubelet unpublishes once the pod's containers are gone
	c.assertNoFailure("reading the volume")
	n.assertActivated(s.ID, c.opened(probeManifest))
	t.Logf("the agent read %d files (%s %d times) without a failure", c.reads, probeManifest, c.opened(probeManifest))

	for range 2 { // a repeat is OK
		n.unpublishPod(p, true)
		n.assertClean("after unpublish")
	}
	if list := n.sessions(""); len(list) != 1 || list[0].ID != other.ID {
		t.Fatalf("sessions after unpublish: %+v, want only the operator's %s", list, other.ID)
	}
	// The same pod's volumes again (a kubelet restarting its work): a new
	// session, which reads again.
	n.publishPod(p, false)
	if again := n.sessionOf(p); again.ID == s.ID {
		t.Fatalf("publish after unpublish answered the closed session %s", s.ID)
	}
	if got, err := fetch(filepath.Join(target, csiProbe, "references", "data.txt")); err != nil || string(got) != string(csiSkills[csiProbe]["references/data.txt"].Data) {
		t.Fatalf("read at the target after publishing again: %q, %v", got, err)
	}
	n.unpublishPod(p, false)
	n.assertClean("after the second unpublish")
}

// TestCSIOlderKubeletMakesTarget: a kubelet that makes the target folder
// itself before NodePublishVolume (before 1.20) gets the same: the view at
// the target, nothing left by unpublish.
func TestCSIOlderKubeletMakesTarget(t *testing.T) {
	n := startCSINode(t)
	n.kubelet.makesTarget = true
	p := newPod("agents", "agent-0", "runner")
	n.publishPod(p, true)
	target := n.kubelet.target(p, skillsVolume)
	if got, err := fetch(filepath.Join(target, csiProbe, "references", "data.txt")); err != nil || string(got) != string(csiSkills[csiProbe]["references/data.txt"].Data) {
		t.Fatalf("read at the target made by the kubelet: %q, %v", got, err)
	}
	n.unpublishPod(p, true)
	n.assertClean("after unpublish")
}

// bindTargets are the session's binds' targets, sorted.
func bindTargets(s api.SessionInfo) []string {
	var out []string
	for _, b := range s.Binds {
		out = append(out, b.Target)
	}
	slices.Sort(out)
	return out
}

// TestCSIPolicyDenials: a pod the policy does not allow what it asks gets
// PermissionDenied naming its namespace and service account and what was
// refused; no session is opened, nothing is mounted.
func TestCSIPolicyDenials(t *testing.T) {
	n := startCSINode(t)
	k := n.kubelet
	for _, c := range []struct {
		name    string
		pod     pod
		attrs   map[string]string
		podInfo bool   // the kubelet sends the pod's attributes (podInfoOnMount)
		refused string // what the message names as refused
	}{
		{"namespace", newPod("default", "web", "runner"), skillsAttrs, true, "may claim no user"},
		{"service account", newPod("agents", "job", "default"), skillsAttrs, true, "may claim no user"},
		{"user", newPod("agents", "as-bob", "runner"), map[string]string{"user": "bob", "skills": csiProbe}, true, `user "bob"`},
		{"skill", newPod("agents", "secret", "runner"), map[string]string{"user": "alice", "skills": csiProbe + "," + csiSecret}, true, csiSecret},
		{"preload", newPod("agents", "preload", "runner"), map[string]string{"user": "alice", "skills": csiProbe, "preload": csiSecret}, true, csiSecret},
		{"all", newPod("agents", "all", "runner"), map[string]string{"user": "alice", "all": "true"}, true, "all skills"},
		{"no pod info", newPod("agents", "anonymous", "runner"), skillsAttrs, false, "podInfoOnMount"},
	} {
		p := c.pod
		k.noPodInfo = !c.podInfo
		err := k.publish(p, skillsVolume, c.attrs)
		k.noPodInfo = false
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(msg, c.refused) {
			t.Fatalf("%s: publish: %v, want PermissionDenied naming %q", c.name, err, c.refused)
		}
		if c.podInfo && (!strings.Contains(msg, `"`+p.namespace+`"`) || !strings.Contains(msg, `"`+p.serviceAccount+`"`)) {
			t.Fatalf("%s: the denial %q does not name namespace %q and service account %q", c.name, msg, p.namespace, p.serviceAccount)
		}
		if list := n.sessions(""); len(list) != 0 {
			t.Fatalf("%s: a denied publish opened sessions: %+v", c.name, list)
		}
		n.assertClean(c.name + ": after a denial")
		if _, err := os.Lstat(filepath.Dir(k.target(p, skillsVolume))); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: the volume's folder is left after a denial: %v", c.name, err)
		}
	}
	// What the policy allows is published, so the denials were the policy's.
	p := newPod("agents", "allowed", "runner")
	n.publishPod(p, false)
	n.unpublishPod(p, false)
	n.assertClean("after the allowed pod")
}

// TestCSIPluginCrash: a kill -9 of the plugin while the pod's agent reads
// changes nothing for the agent; the kubelet's calls fail Unavailable until
// the plugin is back, and the restarted plugin (which keeps no state of
// its own) answers a repeated publish with the same session and
// unpublishes.
func TestCSIPluginCrash(t *testing.T) {
	n := startCSINode(t)
	p, s, c := n.podReading()
	n.plugin.kill()
	killed := time.Now()
	c.waitReads(300, 30*time.Second)
	c.assertNoFailure("with the plugin killed")
	if code, _ := c.curl("/v1/whoami"); code != 200 {
		t.Fatalf("whoami on the pod's socket with the plugin killed: %d", code)
	}
	other := newPod("agents", "agent-1", "runner")
	if err := n.kubelet.publish(other, skillsVolume, skillsAttrs); status.Code(err) != codes.Unavailable {
		t.Fatalf("publish with the plugin down: %v, want Unavailable", err)
	}
	t.Logf("plugin killed: the agent's longest pause %v over %v of reads", c.longestPause(killed, time.Now()).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))

	n.restartPlugin()
	n.publishPod(p, true)
	if again := n.sessionOf(p); again.ID != s.ID || len(again.Binds) != 2 {
		t.Fatalf("publish after the plugin's restart: %+v, want session %s as it was", again, s.ID)
	}
	c.waitReads(100, 30*time.Second)
	c.stop()
	c.assertNoFailure("after the plugin's restart")
	n.assertActivated(s.ID, c.opened(probeManifest))
	n.unpublishPod(p, true)
	n.assertClean("after unpublish by the restarted plugin")
}

// TestCSIPluginCrashMidPublish: a kill -9 of the plugin while 20 pods'
// volumes are being published; the kubelet retries what failed
// Unavailable until the restarted plugin answers: every pod ends with one
// session bound at its targets, and unpublishing leaves nothing (no
// session a publish cut short opened).
func TestCSIPluginCrashMidPublish(t *testing.T) {
	const pods = 20
	n := startCSINode(t)
	all := make([]pod, pods)
	for i := range all {
		all[i] = newPod("agents", fmt.Sprintf("agent-%d", i), "runner")
	}
	calls := make([]func() error, 0, 2*pods)
	for _, p := range all {
		calls = append(calls,
			func() error { return n.kubelet.publishRetrying(p, skillsVolume, skillsAttrs) },
			func() error { return n.kubelet.publishRetrying(p, apiVolume, apiAttrs) })
	}
	var errs []error
	done := make(chan struct{})
	go func() { errs = sideBySide(calls...); close(done) }()
	for deadline := time.Now().Add(30 * time.Second); len(n.driverSessions()) < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no session opened within 30s")
		}
	}
	n.plugin.kill()
	killedAt := len(n.driverSessions())
	n.restartPlugin()
	<-done
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("publish across the plugin's crash: %v", err)
	}
	for _, p := range all {
		s := n.sessionOf(p)
		want := []string{filepath.Join(n.kubelet.target(p, apiVolume), "skills"), n.kubelet.target(p, skillsVolume)}
		if !slices.Equal(bindTargets(s), want) {
			t.Fatalf("pod %s: session bound at %q, want %q", p.name, bindTargets(s), want)
		}
	}
	t.Logf("plugin killed with %d of %d sessions opened: every pod published once retried", killedAt, pods)
	for _, p := range all {
		n.unpublishPod(p, true)
	}
	n.assertClean("after unpublishing every pod")
}

// TestCSIHundredPods: 100 pods' volumes (skills and api, side by side as
// the kubelet sets a pod's volumes up) published at once, each pod its own
// session at its own targets, read from the containers of a sample of
// them; then all unpublished at once: nothing left.
func TestCSIHundredPods(t *testing.T) {
	const pods, sample = 100, 4
	n := startCSINode(t)
	all := make([]pod, pods)
	for i := range all {
		all[i] = newPod("agents", fmt.Sprintf("agent-%d", i), "runner")
	}
	parallel := func(fn func(pod) error) (time.Duration, []error) {
		start := time.Now()
		calls := make([]func() error, pods)
		for i, p := range all {
			calls[i] = func() error { return fn(p) }
		}
		errs := sideBySide(calls...)
		return time.Since(start), errs
	}
	// The kubelet sets a pod's volumes up side by side: the api volume may
	// come first, and is retried until the skills volume is there.
	published, errs := parallel(func(p pod) error {
		return errors.Join(sideBySide(
			func() error { return n.kubelet.publish(p, skillsVolume, skillsAttrs) },
			func() error { return n.kubelet.publishRetrying(p, apiVolume, apiAttrs) })...)
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("publish %d pods at once: %v", pods, err)
	}
	t.Logf("%d pods' volumes published at once in %v", pods, published.Round(time.Millisecond))
	sessions := n.driverSessions()
	if len(sessions) != pods {
		t.Fatalf("%d sessions for %d pods", len(sessions), pods)
	}
	byPod := map[string]api.SessionInfo{}
	for _, s := range sessions {
		byPod[s.Labels["k8s.pod-uid"]] = s
	}
	data := csiSkills[csiProbe]["references/data.txt"].Data
	for _, p := range all {
		target := n.kubelet.target(p, skillsVolume)
		want := []string{filepath.Join(n.kubelet.target(p, apiVolume), "skills"), target}
		if s := byPod[p.uid]; s.Labels["k8s.pod"] != p.name || !slices.Equal(bindTargets(s), want) {
			t.Fatalf("pod %s: session %+v, want one bound at %q", p.name, s, want)
		}
		if got, err := fetch(filepath.Join(target, csiProbe, "references", "data.txt")); err != nil || string(got) != string(data) {
			t.Fatalf("pod %s: read at the target: %q, %v", p.name, got, err)
		}
	}
	readers := map[string]*container{} // by pod uid: a sample, from the first pod to the last
	for i := range sample {
		p := all[i*(pods-1)/(sample-1)]
		readers[p.uid] = startContainer(t, n.podMounts(p, true))
	}
	for _, c := range readers {
		c.waitReads(100, 30*time.Second)
		c.stop()
		c.assertNoFailure("reading in one of 100 pods")
	}
	for _, p := range all {
		s := byPod[p.uid]
		if c := readers[p.uid]; c != nil {
			n.assertActivated(s.ID, c.opened(probeManifest))
		} else if a := n.activations(s.ID); len(a.Activated) != 0 {
			t.Fatalf("pod %s, whose SKILL.md nobody read: activations %+v", p.name, a.Activated)
		}
	}
	unpublished, errs := parallel(func(p pod) error {
		return errors.Join(sideBySide(
			func() error { return n.kubelet.unpublish(p, skillsVolume) },
			func() error { return n.kubelet.unpublish(p, apiVolume) })...)
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("unpublish %d pods at once: %v", pods, err)
	}
	t.Logf("%d pods' volumes unpublished at once in %v", pods, unpublished.Round(time.Millisecond))
	n.assertClean("after unpublishing every pod")
	for _, p := range all {
		for _, v := range []string{skillsVolume, apiVolume} {
			if _, err := os.Lstat(filepath.Dir(n.kubelet.target(p, v))); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("pod %s: volume folder %s left: %v", p.name, v, err)
			}
		}
	}
}

// TestCSIPodVolumesTornDownTogether: the kubelet tears a pod's volumes down
// side by side (an operation per volume); the skills and api volumes of
// one pod, which share its session, unpublished at once leave no session
// open and nothing mounted.
func TestCSIPodVolumesTornDownTogether(t *testing.T) {
	n := startCSINode(t)
	for i := range 10 {
		p := newPod("agents", fmt.Sprintf("agent-%d", i), "runner")
		n.publishPod(p, true)
		if err := errors.Join(sideBySide(
			func() error { return n.kubelet.unpublish(p, skillsVolume) },
			func() error { return n.kubelet.unpublish(p, apiVolume) })...); err != nil {
			t.Fatalf("pod %d: unpublish both volumes at once: %v", i, err)
		}
		n.assertClean(fmt.Sprintf("pod %d: after unpublishing both volumes at once", i))
	}
}

// sideBySide runs the calls at once and returns their errors.
func sideBySide(calls ...func() error) []error {
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { errs[i] = call() })
	}
	wg.Wait()
	return errs
}
