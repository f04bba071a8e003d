package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills/skilltest"
)

// The CSI tests run the node plugin (cmd/skillfs-csi) as a kubelet drives
// it: csiNode is one node (a daemon, the plugin, a kubelet's folder),
// kubelet the calls it makes for a pod's inline volumes, and container a
// pod's container, a mount namespace as runc makes one with an agent
// reading in it.

// csiDriver is the driver name the plugin serves by default, and
// csiNodeID the node id the tests give it.
const (
	csiDriver = "csi.skillfs"
	csiNodeID = "test-node"
)

// csiBuild is the plugin binary, built once beside skillfs when a test
// first needs it, as a node runs it: without cgo (unless the suite runs
// under the race detector, which needs it).
var csiBuild struct {
	once sync.Once
	path string
	err  error
}

func csiBinary(t testing.TB) string {
	t.Helper()
	csiBuild.once.Do(func() {
		p := filepath.Join(filepath.Dir(binary), "skillfs-csi")
		args := []string{"build", "-o", p}
		env := append(os.Environ(), "CGO_ENABLED=0")
		if os.Getenv("SKILLFS_TEST_RACE") == "1" {
			args, env = append(args, "-race"), nil
		}
		build := exec.Command("go", append(args, "../cmd/skillfs-csi")...)
		build.Env = env
		out, err := build.CombinedOutput()
		if err != nil {
			csiBuild.err = fmt.Errorf("build skillfs-csi: %v\n%s", err, out)
			return
		}
		csiBuild.path = p
	})
	if csiBuild.err != nil {
		t.Fatal(csiBuild.err)
	}
	return csiBuild.path
}

// The skills a node serves: csiProbe, whose every file the agents read,
// csiOther, whose files but its SKILL.md they read (it must never be
// activated), csiSecret, which alice reads but the policy lets no pod ask for.
const (
	csiProbe  = "csi-probe"
	csiOther  = "csi-other"
	csiSecret = "csi-secret"
)

// csiSkills are the skills' trees as imported, and so as a session's view
// shows each under its slug.
var csiSkills = map[string]fstest.MapFS{
	csiProbe: skilltest.Skill("name: "+csiProbe+"\ndescription: what the pods read in the CSI tests", "\n# Probe\n", map[string]string{
		"references/data.txt": "exactly these bytes\n",
		"references/big.bin":  strings.Repeat("0123456789abcdef", 24<<10), // 384 KiB: several reads
		"scripts/run.sh":      "#!/bin/sh\necho probe\n",
	}),
	csiOther: skilltest.Skill("name: "+csiOther+"\ndescription: read but never activated", "\n# Other\n", map[string]string{
		"notes.md": "# Notes\nnot an activation\n",
	}),
	csiSecret: skilltest.Skill("name: "+csiSecret+"\ndescription: no pod may claim it", "\n# Secret\n", nil),
}

// csiPolicy is the claims policy of the tests' nodes: pods of namespace
// agents running as service account runner may claim alice's csi-probe and
// csi-other, nothing else.
const csiPolicy = `claims:
  - namespace: agents
    serviceAccounts: [runner]
    users: [alice]
    skills: [csi-probe, csi-other]
`

// csiNode is a node: a daemon with users alice and bob and the skills
// above, the plugin, and a kubelet's root folder.
type csiNode struct {
	t       *testing.T
	e       *env
	d       *daemon
	dir     string
	kubelet *kubelet
	plugin  *csiPlugin
	api     *apiClient
	serve   []string // the daemon's flags
}

// startCSINode starts a node: daemon, skills, users, policy file, plugin.
func startCSINode(t *testing.T) *csiNode { return newCSINode(t, false) }

// startKeptCSINode is startCSINode with a keeper holding the daemon's FUSE
// connection (`skillfs keeper`, `serve --keeper`).
func startKeptCSINode(t *testing.T) *csiNode { return newCSINode(t, true) }

func newCSINode(t *testing.T, kept bool) *csiNode {
	t.Helper()
	e := newEnv(t)
	n := &csiNode{t: t, e: e, dir: t.TempDir(), serve: []string{"--examples=false"}}
	n.kubelet = &kubelet{t: t, root: filepath.Join(n.dir, "kubelet"), endpoint: filepath.Join(n.dir, "csi.sock")}
	policy := filepath.Join(n.dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(csiPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.sweep) // registered first: runs after every other cleanup of the node
	sharedMount(t, n.kubelet.root)
	if kept {
		n.serve = append(n.serve, "--keeper", n.startKeeper())
	}
	n.d = e.serve(n.serve...)
	src := filepath.Join(n.dir, "src")
	for slug, tree := range csiSkills {
		skilltest.WriteDir(t, filepath.Join(src, "skills", slug), tree)
	}
	e.ok("skill", "import", src, "--all", "--share", "global")
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	n.api = newAPIClient(e.home)
	n.plugin = n.startPlugin(policy)
	return n
}

// restartDaemon starts the daemon again after it stopped or was killed.
func (n *csiNode) restartDaemon() {
	n.t.Helper()
	n.d = n.e.serve(n.serve...)
}

// sweep runs after the node's test: a mount left below the kubelet's
// folder (a target the plugin did not clear) fails the test, and is
// detached with the folder's own mount so that no later test meets it.
func (n *csiNode) sweep() {
	all := mountedUnder(n.t, n.dir)
	for _, m := range slices.Backward(all) {
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if left := slices.DeleteFunc(all, func(m string) bool { return m == n.kubelet.root }); len(left) > 0 {
		n.t.Errorf("mounts left below the kubelet's folder: %v", left)
	}
}

// sharedMount makes dir a mount point of its own with shared propagation:
// the kubelet's folder as a node has it (systemd makes / shared, and the
// node plugins' containers mount the folder with Bidirectional
// propagation), whatever this machine's / is.
func sharedMount(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s onto itself: %v", dir, err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s shared: %v", dir, err)
	}
}

// driverSessions are the open sessions the plugin opened (those carrying
// its driver label), by the daemon's API.
func (n *csiNode) driverSessions() []api.SessionInfo {
	n.t.Helper()
	return n.sessions("label=" + url.QueryEscape("csi.driver="+csiDriver))
}

// sessions lists the daemon's open sessions matching query.
func (n *csiNode) sessions(query string) []api.SessionInfo {
	n.t.Helper()
	var list []api.SessionInfo
	n.api.get(n.t, "/v1/sessions?"+query, &list)
	return list
}

// activations are a session's activations, by the daemon's API.
func (n *csiNode) activations(id string) activationsInfo {
	n.t.Helper()
	var a activationsInfo
	n.api.get(n.t, "/v1/sessions/"+id+"/activations", &a)
	return a
}

// sessionOf is the one open session the plugin opened for pod p, failing
// the test unless there is exactly one.
func (n *csiNode) sessionOf(p pod) api.SessionInfo {
	n.t.Helper()
	list := n.sessions("label=" + url.QueryEscape("k8s.pod-uid="+p.uid))
	if len(list) != 1 {
		n.t.Fatalf("pod %s: %d sessions, want 1: %+v", p.name, len(list), list)
	}
	return list[0]
}

// assertClean fails the test unless no plugin's session is open and
// nothing is mounted below the kubelet's folder or at the containers' paths
// in the host's namespace.
func (n *csiNode) assertClean(when string) {
	n.t.Helper()
	if m := mountedUnder(n.t, n.kubelet.root); len(m) > 1 {
		n.t.Fatalf("%s: mounted below the kubelet's folder: %v", when, m[1:])
	}
	if m := mountedUnder(n.t, containerHome); len(m) > 0 {
		n.t.Fatalf("%s: mounted at the container's path in the host's namespace: %v", when, m)
	}
	if list := n.driverSessions(); len(list) > 0 {
		var open []string
		for _, s := range list[:min(len(list), 5)] {
			open = append(open, fmt.Sprintf("%s (pod %s, binds %q)", s.ID, s.Labels["k8s.pod"], bindTargets(s)))
		}
		n.t.Fatalf("%s: %d of the plugin's sessions still open: %s", when, len(list), strings.Join(open, ", "))
	}
}

// proc is a process of a node's (the plugin, the keeper): its output
// kept, stopped with SIGTERM when its test ends if still running.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	log  *skilltest.SyncBuffer
	done chan struct{}
}

// startProc starts cmd as the process called name.
func startProc(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, name: name, cmd: cmd, log: &skilltest.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	return p
}

// exited fails the test if the process has ended, saying while doing what.
func (p *proc) exited(doing string) {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Fatalf("%s exited %s: %v\n%s", p.name, doing, p.cmd.ProcessState, p.log)
	default:
	}
}

// kill is a crash: SIGKILL.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// stop ends the process with SIGTERM, as a pod's deletion or a service
// manager does.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.kill()
		p.t.Errorf("%s did not stop within 20s of SIGTERM\n%s", p.name, p.log)
	}
}

// csiPlugin is a running skillfs-csi, and the arguments it was started with.
type csiPlugin struct {
	*proc
	args []string
}

// startPlugin starts skillfs-csi on the kubelet's endpoint, talking to the
// node's daemon, and waits until it answers GetPluginInfo.
func (n *csiNode) startPlugin(policy string) *csiPlugin {
	n.t.Helper()
	args := []string{"--endpoint", "unix://" + n.kubelet.endpoint, "--skillfs-socket", filepath.Join(n.e.home, "skillfs.sock"),
		"--node-id", csiNodeID, "--policy", policy}
	return n.runPlugin(args)
}

// restartPlugin starts the plugin again, as it was started.
func (n *csiNode) restartPlugin() {
	n.t.Helper()
	n.plugin = n.runPlugin(n.plugin.args)
}

func (n *csiNode) runPlugin(args []string) *csiPlugin {
	n.t.Helper()
	p := &csiPlugin{proc: startProc(n.t, "skillfs-csi", exec.Command(csiBinary(n.t), args...)), args: args}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := n.kubelet.pluginInfo()
		if err == nil {
			if info.GetName() != csiDriver {
				n.t.Fatalf("GetPluginInfo names %q, want %q", info.GetName(), csiDriver)
			}
			return p
		}
		p.exited("before serving")
		if time.Now().After(deadline) {
			n.t.Fatalf("skillfs-csi does not answer GetPluginInfo after 30s: %v\n%s", err, p.log)
		}
	}
}

// kubelet makes the CSI calls a kubelet makes for a pod's inline volumes,
// on the plugin's endpoint, one connection per call as the kubelet's CSI
// client does, and keeps the pod's volume folders as it does.
type kubelet struct {
	t        *testing.T
	root     string // the kubelet's folder (/var/lib/kubelet)
	endpoint string // the plugin's socket, as the registrar told it
	// noPodInfo: the CSIDriver object does not set podInfoOnMount, so the
	// volume context holds the volume's attributes alone.
	noPodInfo bool
	// makesTarget: the kubelet makes the target folder itself before the
	// call, as kubelets before 1.20 did (later ones make its parent only).
	makesTarget bool
}

// pod is a pod as its volumes' calls name it.
type pod struct {
	namespace, name, uid, serviceAccount string
}

// newPod is a pod of namespace ns running as service account sa, with a
// fresh uid as the API server gives one.
func newPod(ns, name, sa string) pod {
	var b [16]byte
	rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return pod{namespace: ns, name: name, serviceAccount: sa, uid: h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]}
}

// volumeID is the volume handle a kubelet gives an inline volume: "csi-"
// and the hex SHA-256 of the pod's uid followed by the volume's name.
func (p pod) volumeID(volume string) string {
	h := sha256.Sum256([]byte(p.uid + volume))
	return "csi-" + hex.EncodeToString(h[:])
}

// target is the target path the kubelet gives the plugin for the pod's
// volume: <root>/pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount.
func (k *kubelet) target(p pod, volume string) string {
	return filepath.Join(k.root, "pods", p.uid, "volumes", "kubernetes.io~csi", volume, "mount")
}

// volumeContext is the volume context the kubelet sends for the pod's
// volume: the pod spec's volumeAttributes and, the CSIDriver object setting
// podInfoOnMount, the pod's.
func (k *kubelet) volumeContext(p pod, attrs map[string]string) map[string]string {
	if k.noPodInfo {
		return attrs
	}
	vc := map[string]string{
		"csi.storage.k8s.io/ephemeral":           "true",
		"csi.storage.k8s.io/pod.name":            p.name,
		"csi.storage.k8s.io/pod.namespace":       p.namespace,
		"csi.storage.k8s.io/pod.uid":             p.uid,
		"csi.storage.k8s.io/serviceAccount.name": p.serviceAccount,
	}
	for name, v := range attrs {
		vc[name] = v
	}
	return vc
}

// call runs fn on a new connection to the plugin's endpoint.
func (k *kubelet) call(fn func(ctx context.Context, conn *grpc.ClientConn) error) error {
	conn, err := grpc.NewClient("unix://"+k.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // the kubelet's csiTimeout
	defer cancel()
	return fn(ctx, conn)
}

func (k *kubelet) pluginInfo() (*csi.GetPluginInfoResponse, error) {
	var info *csi.GetPluginInfoResponse
	err := k.call(func(ctx context.Context, conn *grpc.ClientConn) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		var err error
		info, err = csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		return err
	})
	return info, err
}

// publish is the kubelet's SetUp of the pod's inline volume with the
// attributes attrs: it makes the volume's folder (the target's parent, not
// the target: the plugin makes that) with vol_data.json in it, and calls
// NodePublishVolume as it does for an inline volume the pod mounts
// readOnly: access type mount without fs type or flags, access mode
// SINGLE_NODE_WRITER (what the kubelet sends for every inline volume of a
// driver that does not advertise SINGLE_NODE_MULTI_WRITER), readonly. A
// call that failed for good (any code but DeadlineExceeded and the other
// in-progress ones) has the kubelet remove the volume's folder if nothing is
// mounted at the target.
func (k *kubelet) publish(p pod, volume string, attrs map[string]string) error {
	k.t.Helper()
	target := k.target(p, volume)
	dir := filepath.Dir(target)
	if k.makesTarget {
		dir = target
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	dir = filepath.Dir(target)
	data, err := json.Marshal(map[string]string{"specVolID": volume, "volumeHandle": p.volumeID(volume),
		"driverName": csiDriver, "nodeName": csiNodeID, "volumeLifecycleMode": "Ephemeral"})
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "vol_data.json"), data, 0o644)
	}
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	req := &csi.NodePublishVolumeRequest{
		VolumeId:   p.volumeID(volume),
		TargetPath: target,
		Readonly:   true,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		VolumeContext: k.volumeContext(p, attrs),
	}
	err = k.call(func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := csi.NewNodeClient(conn).NodePublishVolume(ctx, req)
		return err
	})
	if err != nil && finalError(err) {
		return errors.Join(err, k.removeVolumeDir(target))
	}
	return err
}

// publishRetrying is publish retried as the kubelet retries a volume's
// SetUp while the plugin answers Unavailable: with an exponential backoff
// (the kubelet's starts at 500 ms; here 25 ms, doubling up to a second).
func (k *kubelet) publishRetrying(p pod, volume string, attrs map[string]string) error {
	k.t.Helper()
	wait := 25 * time.Millisecond
	for deadline := time.Now().Add(time.Minute); ; wait = min(2*wait, time.Second) {
		err := k.publish(p, volume, attrs)
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}

// unpublish is the kubelet's TearDown of the pod's volume:
// NodeUnpublishVolume, then the volume's folder removed if nothing is
// mounted at the target. It fails the test if the plugin left the target
// (the plugin removes it).
func (k *kubelet) unpublish(p pod, volume string) error {
	k.t.Helper()
	target := k.target(p, volume)
	err := k.call(func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := csi.NewNodeClient(conn).NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: p.volumeID(volume), TargetPath: target})
		return err
	})
	if err != nil {
		return err
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("NodeUnpublishVolume of %s answered OK and left its target %s (lstat: %v)", volume, target, err)
	}
	return k.removeVolumeDir(target)
}

// removeVolumeDir is the kubelet's removeMountDir: unless the target is a
// mount point, the target, vol_data.json and the volume's folder go.
func (k *kubelet) removeVolumeDir(target string) error {
	if slices.Contains(mountedUnder(k.t, target), target) {
		return nil
	}
	dir := filepath.Dir(target)
	for _, p := range []string{target, filepath.Join(dir, "vol_data.json"), dir} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("kubelet: %w", err)
		}
	}
	return nil
}

// finalError reports whether the kubelet takes a NodePublishVolume error
// as the operation's end (not one still in progress in the plugin).
func finalError(err error) bool {
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled, codes.Aborted, codes.ResourceExhausted:
		return false
	}
	return true
}

// containerHome is where the containers see their volumes: the agent's
// home, in a tmpfs of the container's own at /home.
const containerHome = "/home/gem"

// The container's paths of the skills volume and of the api volume.
const (
	containerSkills = containerHome + "/skills"
	containerAPI    = containerHome + "/.skillfs"
)

// agentEnv names the variable that makes the test binary a container's
// agent (see runAgent): the path of its plan.
const agentEnv = "SKILLFS_TEST_CSI_AGENT"

func init() {
	if plan := os.Getenv(agentEnv); plan != "" {
		os.Exit(runAgent(plan))
	}
}

// agentPlan is what a container's agent does: its mounts, made as runc
// makes a volume's (rbind, then rprivate), each host path at a path of the
// container; then, in rounds until its standard input closes, every folder
// of Dirs listed and every file of Files read and checked.
type agentPlan struct {
	Mounts [][2]string         `json:"mounts"` // host path, container path
	Files  map[string]string   `json:"files"`  // container path → hex SHA-256 of its bytes
	Dirs   map[string][]string `json:"dirs"`   // container path → its names, sorted
	Pause  time.Duration       `json:"pause"`  // between rounds
}

// agentRead is the agent's line for one read: when it started and ended
// (Unix nanoseconds) and what went wrong, "" for nothing.
type agentRead struct {
	Path  string `json:"path"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Err   string `json:"err,omitempty"`
}

// runAgent is the agent in a container: the test starts the test binary
// with the plan's path in agentEnv, in a new mount namespace. It makes
// every mount of the namespace a slave of the host's (runc's default root
// propagation), puts a tmpfs at /home, makes the plan's mounts,
// prints "ready" and then a JSON agentRead for every read, until its
// standard input closes.
func runAgent(planPath string) int {
	fail := func(err error) int { fmt.Println("fatal:", err); return 1 }
	data, err := os.ReadFile(planPath)
	if err != nil {
		return fail(err)
	}
	var plan agentPlan
	if err := json.Unmarshal(data, &plan); err != nil {
		return fail(err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SLAVE, ""); err != nil {
		return fail(fmt.Errorf("make / rslave: %w", err))
	}
	if err := syscall.Mount("tmpfs", filepath.Dir(containerHome), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"); err != nil {
		return fail(fmt.Errorf("tmpfs at %s: %w", filepath.Dir(containerHome), err))
	}
	for _, m := range plan.Mounts {
		if err := os.MkdirAll(m[1], 0o755); err != nil {
			return fail(err)
		}
		if err := syscall.Mount(m[0], m[1], "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fail(fmt.Errorf("rbind %s at %s: %w", m[0], m[1], err))
		}
		if err := syscall.Mount("", m[1], "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
			return fail(fmt.Errorf("make %s rprivate: %w", m[1], err))
		}
	}
	stop := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	fmt.Fprintln(out, "ready")
	out.Flush()
	files, dirs := slices.Sorted(maps.Keys(plan.Files)), slices.Sorted(maps.Keys(plan.Dirs))
	report := func(p string, start time.Time, err error) {
		r := agentRead{Path: p, Start: start.UnixNano(), End: time.Now().UnixNano()}
		if err != nil {
			r.Err = err.Error()
		}
		enc.Encode(r)
	}
	for {
		for _, d := range dirs {
			start := time.Now()
			report(d, start, checkNames(d, plan.Dirs[d]))
		}
		for _, p := range files {
			start := time.Now()
			report(p, start, checkBytes(p, plan.Files[p]))
		}
		out.Flush()
		select {
		case <-stop:
			return 0
		case <-time.After(plan.Pause):
		}
	}
}

// checkBytes reads p as fetch does (its cached pages dropped first, so that
// the read reaches the daemon) and compares its SHA-256 with want.
func checkBytes(p, want string) error {
	data, err := fetch(p)
	if err != nil {
		return err
	}
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != want {
		return fmt.Errorf("%s: %d bytes of SHA-256 %x, want %s", p, len(data), got, want)
	}
	return nil
}

func checkNames(dir string, want []string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s lists %q, want %q", dir, got, want)
	}
	return nil
}

// readPlan is what an agent reads of the skills volume at containerSkills:
// every file of csiProbe, every file but SKILL.md of csiOther, and the
// view's top (the two skills' folders).
func readPlan() (files map[string]string, dirs map[string][]string) {
	files = map[string]string{}
	for _, slug := range []string{csiProbe, csiOther} {
		for name, f := range csiSkills[slug] {
			if f.Mode.IsDir() || slug == csiOther && name == "SKILL.md" {
				continue
			}
			h := sha256.Sum256(f.Data)
			files[filepath.Join(containerSkills, slug, name)] = hex.EncodeToString(h[:])
		}
	}
	return files, map[string][]string{containerSkills: {csiOther, csiProbe}}
}

// container is a pod's container: the agent in a mount namespace of its
// own, reading in a loop, and what it reported.
type container struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int
	done  chan struct{}

	mu       sync.Mutex
	reads    int            // successful reads
	failures []string       // failed reads, the first 20
	failed   int            // failed reads
	spans    [][2]int64     // when each successful read started and ended (Unix nanoseconds)
	opens    map[string]int // successful reads by path
	exited   error          // the agent's end, once done is closed
	fatal    string         // what the agent said stopped it before it read
}

// startContainer starts a container of the pod whose volumes are mounts
// (host path → container path) with an agent reading the readPlan, and
// waits until its mounts are made.
func startContainer(t *testing.T, mounts [][2]string) *container {
	t.Helper()
	files, dirs := readPlan()
	plan, err := json.Marshal(agentPlan{Mounts: mounts, Files: files, Dirs: dirs, Pause: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	planPath := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planPath, plan, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &container{t: t, done: make(chan struct{}), opens: map[string]int{}}
	c.cmd = exec.Command(self)
	c.cmd.Env = append(os.Environ(), agentEnv+"="+planPath)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	c.cmd.Stderr = os.Stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start the container's agent: %v", err)
	}
	c.pid = c.cmd.Process.Pid
	ready := make(chan struct{})
	go c.collect(out, ready)
	t.Cleanup(c.kill)
	select {
	case <-ready:
	case <-c.done:
		t.Fatalf("the container's agent ended before reading: %v %s", c.exited, c.fatal)
	case <-time.After(30 * time.Second):
		t.Fatal("the container's agent not ready after 30s")
	}
	return c
}

func (c *container) collect(out io.Reader, ready chan struct{}) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "ready":
			close(ready)
			continue
		case strings.HasPrefix(line, "fatal: "):
			c.mu.Lock()
			c.fatal = line
			c.mu.Unlock()
			continue
		}
		var r agentRead
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			r.Err = fmt.Sprintf("agent line %q: %v", line, err)
		}
		c.mu.Lock()
		if r.Err == "" {
			c.reads++
			c.spans = append(c.spans, [2]int64{r.Start, r.End})
			c.opens[r.Path]++
		} else {
			c.failed++
			if len(c.failures) < 20 {
				c.failures = append(c.failures, time.Unix(0, r.End).Format(time.StampMilli)+" "+r.Err)
			}
		}
		c.mu.Unlock()
	}
	c.exited = c.cmd.Wait()
	close(c.done)
}

// stop ends the agent after its round (its standard input closed) and
// waits for it; a container already gone is left alone.
func (c *container) stop() {
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
		c.t.Errorf("container %d: the agent did not end within 30s of its input closing", c.pid)
	}
}

// kill ends the container at once (the end of a test, which may have left
// it reading from a daemon no longer there).
func (c *container) kill() {
	c.cmd.Process.Kill()
	<-c.done
}

// waitReads waits until the agent read n files more (with success) than
// it had, and fails the test after limit.
func (c *container) waitReads(n int, limit time.Duration) {
	c.t.Helper()
	c.mu.Lock()
	want := c.reads + n
	c.mu.Unlock()
	deadline := time.Now().Add(limit)
	for {
		c.mu.Lock()
		got, failures := c.reads, slices.Clone(c.failures)
		c.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-c.done:
			c.t.Fatalf("container %d: the agent ended (%v) after %d reads; failures: %q", c.pid, c.exited, got, failures)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("container %d: %d reads of %d within %v; failures: %q", c.pid, got, want, limit, failures)
		}
	}
}

// assertNoFailure fails the test if any read of the agent failed.
func (c *container) assertNoFailure(when string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed > 0 {
		c.t.Fatalf("%s: container %d: %d of %d reads failed, the first: %q", when, c.pid, c.failed, c.failed+c.reads, c.failures[:min(len(c.failures), 5)])
	}
}

// longestPause is the longest time between two successful reads of the
// agent ending in [from, to] (or from and the first, the last and to).
func (c *container) longestPause(from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, worst := from.UnixNano(), int64(0)
	for _, sp := range c.spans {
		e := sp[1]
		if e < prev {
			continue
		}
		if e > to.UnixNano() {
			break
		}
		worst = max(worst, e-prev)
		prev = e
	}
	worst = max(worst, to.UnixNano()-prev)
	return time.Duration(worst)
}

// propagation is the optional fields of the container's mount at path (its
// last one there): "" for a private mount, "master:N" for a slave.
func (c *container) propagation(path string) string {
	c.t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", c.pid))
	if err != nil {
		c.t.Fatal(err)
	}
	found, opt := false, ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[4] != path {
			continue
		}
		found, opt = true, strings.Join(f[6:slices.Index(f, "-")], " ")
	}
	if !found {
		c.t.Fatalf("container %d: nothing mounted at %s", c.pid, path)
	}
	return opt
}

// across is how many successful reads of the agent were under way at t:
// started before, ended after.
func (c *container) across(t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, sp := range c.spans {
		if sp[0] < t.UnixNano() && sp[1] > t.UnixNano() {
			n++
		}
	}
	return n
}

// opened is how often the agent read path with success.
func (c *container) opened(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens[path]
}

// curl is the agent's tool asking the api volume's socket for path,
// from inside the container's mount namespace, without any credential; it
// returns the HTTP status and body.
func (c *container) curl(path string) (int, string) {
	c.t.Helper()
	requireCommand(c.t, "nsenter")
	requireCommand(c.t, "curl")
	out, err := exec.Command("nsenter", "-t", fmt.Sprint(c.pid), "-m", "--",
		"curl", "-sS", "-w", "\n%{http_code}", "--unix-socket", containerAPI+"/skillfs.sock", "http://skillfs"+path).CombinedOutput()
	if err != nil {
		c.t.Fatalf("curl %s in container %d: %v\n%s", path, c.pid, err, out)
	}
	s := strings.TrimSpace(string(out))
	i := strings.LastIndexByte(s, '\n')
	code, err := strconv.Atoi(s[i+1:])
	if err != nil {
		c.t.Fatalf("curl %s in container %d: no status in %q", path, c.pid, out)
	}
	return code, s[:max(i, 0)]
}

// startKeeper starts `skillfs keeper` on a socket in the node's folder,
// for a daemon served with --keeper, and waits until it listens. It is
// stopped (SIGTERM) when the test ends, after the daemon; a mount it kept
// for a daemon that stopped is then detached.
func (n *csiNode) startKeeper() string {
	n.t.Helper()
	sock := filepath.Join(n.dir, "keeper.sock")
	mnt := filepath.Join(n.e.home, "mnt")
	n.t.Cleanup(func() { // after the keeper's stop
		if slices.Contains(mountedUnder(n.t, mnt), mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	k := startProc(n.t, "skillfs keeper", n.e.command(context.Background(), "keeper", "--socket", sock))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(sock); err == nil && fi.Mode().Type() == fs.ModeSocket {
			return sock // it listens once its socket is there (a fresh folder)
		}
		k.exited("before listening")
		if time.Now().After(deadline) {
			n.t.Fatalf("skillfs keeper not listening after 30s\n%s", k.log)
		}
	}
}
