// Package node is the CSI node plugin's Identity and Node services: it
// gives a pod a skillfs session as an ephemeral inline volume, through the
// node's daemon (its operator API socket). The daemon, not the plugin,
// binds the session's view at the volume's target path: it serves the one
// FUSE mount, runs in the host's mount namespace and sees the kubelet's
// pods folder (mounted Bidirectional into its container), so the bind
// reaches the pod. The plugin needs no mount privilege: it talks to the
// daemon's socket and removes the target folder at unpublish (root's
// rights on the kubelet's folder), and gives an api volume's folder to its
// group, setgid: of root's capabilities, CHOWN and FSETID alone.
//
// Decisions (where the CSI specification leaves room):
//
//   - No controller, no staging: ephemeral inline volumes (the CSIDriver
//     object's volumeLifecycleModes: [Ephemeral]). NodeStageVolume,
//     NodeUnstageVolume, NodeExpandVolume and NodeGetVolumeStats answer
//     Unimplemented. The one node capability advertised is
//     VOLUME_MOUNT_GROUP (see kind=api), so the kubelet never walks a
//     volume to change its owner (a view is read-only).
//   - A request without volume id, target path or volume capability, or
//     with a block access type, is InvalidArgument; so is an attribute the
//     plugin does not know (a typo must not pass for a default).
//   - The view is read-only whatever the request says: a write access mode
//     or readonly=false (the kubelet sends SINGLE_NODE_WRITER for every
//     inline volume, and readonly only when the pod says readOnly: true)
//     is published read-only, as the filesystem can be no other way; a
//     write fails in the pod with EROFS. fs_type and mount flags are not
//     used.
//   - Publish is idempotent by volume id: the session's client key is
//     "csi:vol:"+volume id (or "csi:key:"+pod uid+"/"+key when the
//     attribute key is given: a key is the pod's own, shared by the volumes
//     of that pod that give it and never by another pod's, in any namespace
//     or on any node; a key without the pod's uid is InvalidArgument), so a
//     repeat finds the session the first call opened, in this process or
//     before a restart; a repeat at the same target is OK. The same volume
//     at another target is bound there too (a read-only view may be in
//     many places). A target taken by another session, or already a mount
//     point of something else, is AlreadyExists with the daemon's words.
//     A keyed session opened by a volume of the pod asking for other
//     skills (or another user's) is AlreadyExists: sharing it would give a
//     volume what its own claim did not ask for.
//   - Unpublish finds what is bound at the target among the plugin's
//     sessions on this daemon's host (those carrying its driver label:
//     the volume's own first, then the pod's, by the uid in the kubelet's
//     target path, and every one of the driver's only for a path naming no
//     pod), removes the bind, closes
//     the session when no bind of it remains (a keyed session shared by
//     other volumes stays until the last one goes), closes sessions of the
//     volume left without a bind (a publish that failed half way), and
//     removes the target folder. Nothing bound there, an unknown volume, a
//     missing target: OK.
//   - A target is compared with the daemon's binds in two forms: as the
//     kubelet gave it, and with the symlinks of its parent resolved (the
//     daemon records a bind resolved: a kubelet root behind a symlink).
//     The target itself is never resolved: it may be a bind of the FUSE
//     mount, and a stat of it would wait on the daemon.
//   - Calls on one volume id are serialised in the process; the plugin
//     keeps no state of its own: everything it needs is in the daemon (the
//     session's key, labels and binds), so a restart between publish and
//     unpublish changes nothing.
//   - A pod's volumes share its session and the kubelet sets them up and
//     tears them down side by side. Whether a session is closed is decided
//     after the bind's removal, on the daemon's answer then (not on the
//     listing the call began with), and under a lock of the session that
//     every bind to it is made under too: of two volumes unpublished at
//     once, the later finds no bind left and closes the session; a bind
//     is never made to a session closed meanwhile (a kind=api publish
//     racing the skills volume's unpublish is Unavailable, and its retry
//     finds no skills volume). The locks order calls of one process; a
//     second plugin process at the same time (during an update) is not
//     ordered with this one.
//   - Sessions carry labels naming the pod (k8s.namespace, k8s.pod,
//     k8s.pod-uid, k8s.service-account) and the volume (csi.driver,
//     csi.volume, csi.request): `skillfs session list --label k8s.pod=NAME`.
//   - kind=api: the session of the same pod's skills volume (found by the
//     pod's uid label, and by the pod's key when key is given) is bound
//     again at target/skills with its
//     API socket at target/skillfs.sock; Unavailable until that volume is
//     published, FailedPrecondition when the pod has several and no key
//     says which. The socket is the session's credential: who connects
//     acts as the session. With a group for it the target folder is made
//     root:group, setgid, 02750, so the daemon makes the socket 0660 of
//     that group, now and at every start: a process of the pod with that
//     group among its groups connects, whatever its user. The group is the
//     volume's attribute socketGroup (a group id) when given, else the
//     pod's fsGroup (the request's volume_mount_group: the kubelet sends
//     it, because of VOLUME_MOUNT_GROUP, whenever the pod has one, whatever
//     the CSIDriver object's fsGroupPolicy). Without either the socket is
//     root's, 0600: only a container running as root connects; so it is
//     with group 0 (root's group is no group shared on purpose: the daemon
//     makes a socket 0660 only in a folder of root's, 02750, of another
//     group). The folder is changed through a descriptor of it, never
//     through a symlink, and checked after: a setgid bit the kernel
//     dropped (the plugin without CAP_FSETID) is Internal, saying so.
//     socketGroup is there for a pod that gives its containers a group
//     (runAsGroup, supplementalGroups) but no fsGroup, so that none of them
//     has to run as root to use the socket. Any group id is taken, and the
//     claims policy does not bound it: the socket is reached only through
//     the volume's folder, below the kubelet's folder of the pod (root's,
//     closed to other users of the node), that is from the containers of
//     this pod that mount the volume, and those the pod's author sets up
//     (users and groups included) as they are free to with fsGroup; a
//     group names no one outside the pod. A group-less socket (0600) is
//     not made any wider by default: who may use it is the pod's to say.
//   - The claims policy (package claims) is checked at every publish of a
//     skills volume, before anything is opened; a denial is
//     PermissionDenied naming namespace, service account and what was
//     refused. The daemon not answering is Unavailable (the kubelet
//     retries).
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"skillfs/cmd/skillfs-csi/internal/claims"
	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
)

// callTimeout bounds the daemon's work for one call (the daemon bounds each
// step on a target to 10 s): a hung daemon fails the call with
// DeadlineExceeded, and the kubelet retries, rather than holding the
// volume's lock for ever.
const callTimeout = 2 * time.Minute

// Driver is the plugin: both services.
type Driver struct {
	Name    string // the driver name (the CSIDriver object's)
	Version string
	NodeID  string
	Socket  string // the daemon's operator API socket
	Policy  *claims.Store
	Log     *slog.Logger

	volumeLocks  keyedLocks // the calls on one volume id
	sessionLocks keyedLocks // a bind to a session, and the decision to close it

	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
}

func (d *Driver) daemon() daemon { return daemon{c: &api.Client{Socket: d.Socket}} }

// GetPluginInfo names the driver.
func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.Name, VendorVersion: d.Version}, nil
}

// GetPluginCapabilities advertises nothing: no controller service, no
// topology.
func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

// Probe is ready when the daemon answers on its socket and is ready.
func (d *Driver) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if err := d.daemon().ready(ctx); err != nil {
		d.Log.Warn("probe: the skillfs daemon is not ready", "socket", d.Socket, "err", err)
		return &csi.ProbeResponse{Ready: wrapperspb.Bool(false)}, nil
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// NodeGetCapabilities advertises VOLUME_MOUNT_GROUP alone: the kubelet
// then hands the pod's fsGroup to NodePublishVolume (and never walks a
// volume to change its owner itself).
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP}},
	}}}, nil
}

// NodeGetInfo names the node; no volume limit, no topology.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.NodeID}, nil
}

// NodePublishVolume gives the volume's session at the target (see the
// package doc).
func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkIDs(id, target); err != nil {
		return nil, err
	}
	vc := req.GetVolumeCapability()
	if vc == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability missing")
	}
	if vc.GetBlock() != nil {
		return nil, status.Error(codes.InvalidArgument, "block access: a skillfs volume is a read-only folder (access type mount)")
	}
	if vc.GetMount() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability without access type: want mount")
	}
	v, err := parseVolume(req.GetVolumeContext())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s: %v", id, err)
	}
	defer d.volumeLocks.lock(id)()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	log := d.Log.With("volume", id, "target", target, "kind", v.kind, "namespace", v.namespace, "pod", v.pod)
	if v.kind == KindAPI {
		err = d.publishAPI(ctx, id, target, vc.GetMount().GetVolumeMountGroup(), v)
	} else {
		err = d.publishSkills(ctx, id, target, v)
	}
	if err != nil {
		log.Warn("publish refused", "err", err)
		return nil, err
	}
	log.Info("published")
	return &csi.NodePublishVolumeResponse{}, nil
}

// maxVolumeID is the longest volume id (the CSI specification's limit).
const maxVolumeID = 128

func checkIDs(id, target string) error {
	if id == "" {
		return status.Error(codes.InvalidArgument, "volume id missing")
	}
	if len(id) > maxVolumeID || skills.CheckSessionKey(id) != nil {
		return status.Errorf(codes.InvalidArgument, "volume id %q: want 1 to %d bytes of printable ASCII without spaces", clip(id), maxVolumeID)
	}
	if target == "" {
		return status.Error(codes.InvalidArgument, "target path missing")
	}
	if !filepath.IsAbs(target) {
		return status.Errorf(codes.InvalidArgument, "target path %q is not absolute", target)
	}
	return nil
}

func (d *Driver) publishSkills(ctx context.Context, id, target string, v volume) error {
	c := claims.Claim{Namespace: v.namespace, ServiceAccount: v.sa, User: v.user, Skills: v.skills, All: v.all, Preload: v.preload}
	if err := d.Policy.Policy().Allow(c); err != nil {
		return status.Errorf(codes.PermissionDenied, "volume %s: %v", id, err)
	}
	dm := d.daemon()
	req := api.CreateRequest{User: v.user, Skills: v.skills, All: v.all, Preload: v.preload,
		Key: v.sessionKey(id), Labels: v.labels(d.Name, id)}
	if req.Skills == nil && !req.All {
		req.Skills = []string{}
	}
	info, err := dm.create(ctx, req)
	if errors.Is(err, skills.ErrNotFound) {
		// NotFound is for a missing volume: an unknown user (or skills it
		// may read none of) is the attributes' fault.
		return status.Errorf(codes.InvalidArgument, "volume %s: volume attribute user %q (or skills): %v", id, v.user, err)
	}
	if err != nil {
		return grpcError(fmt.Sprintf("volume %s: open a session of user %q", id, v.user), err, d.Socket)
	}
	if info.Existing && (info.Parent != "" || info.Labels[LabelDriver] != d.Name || info.Labels[LabelRequest] != v.request()) {
		return status.Errorf(codes.AlreadyExists, "volume %s: key %q is that of open session %s, which a volume asking for other skills opened; give this volume a key of its own", id, v.key, info.ID)
	}
	return d.bindAt(ctx, info, id, skills.Bind{Target: target}, placeOf(target), nil)
}

// bindAt binds session info at b (target, API socket), unless it is
// bound there already (at: the target's place); a session this call opened is closed again when the
// bind fails and it has no other. The bind is made under the session's
// lock, the one a close is decided under (see closeIfUnbound): a session
// closed meanwhile is not bound again but answered Unavailable, so that
// the kubelet's retry sees what is there. With fresh, the session is read
// again under the lock and must still pass it (info is from an earlier
// listing).
func (d *Driver) bindAt(ctx context.Context, info *api.SessionInfo, id string, b skills.Bind, at place, fresh func(*api.SessionInfo) error) error {
	defer d.sessionLocks.lock(info.ID)()
	dm := d.daemon()
	if fresh != nil {
		now, err := dm.session(ctx, info.ID)
		if errors.Is(err, skills.ErrNotFound) {
			return closedMeanwhile(id, info.ID)
		}
		if err != nil {
			return grpcError(fmt.Sprintf("volume %s: read session %s", id, info.ID), err, d.Socket)
		}
		if err := fresh(now); err != nil {
			return err
		}
		now.Existing = info.Existing
		info = now
	}
	if bound(info.Binds, at) {
		return nil
	}
	if _, err := dm.bind(ctx, info.ID, b); err != nil {
		now, serr := dm.session(ctx, info.ID)
		switch {
		case errors.Is(serr, skills.ErrNotFound):
			return closedMeanwhile(id, info.ID)
		case serr == nil && bound(now.Binds, at):
			// Another caller (a second plugin process during an update)
			// bound it there meanwhile: then it is published.
			return nil
		}
		if !info.Existing {
			if _, cerr := d.closeUnbound(context.WithoutCancel(ctx), info.ID); cerr != nil {
				d.Log.Error("close a session whose bind failed", "session", info.ID, "err", cerr)
			}
		}
		return grpcError(fmt.Sprintf("volume %s: bind session %s at %s", id, info.ID, b.Target), err, d.Socket)
	}
	return nil
}

// closedMeanwhile is the answer to a publish whose session was closed
// under it (the pod's other volume unpublished at the same time).
func closedMeanwhile(id, session string) error {
	return status.Errorf(codes.Unavailable, "volume %s: session %s was closed meanwhile (its volume unpublished): not bound again", id, session)
}

// closeIfUnbound closes session id if it has no bind left, deciding on the
// daemon's answer now, under the session's lock (binds are made under it
// too): of two calls removing a session's last binds at once, the later
// one finds none left; a session closed already is no error.
func (d *Driver) closeIfUnbound(ctx context.Context, id string) (bool, error) {
	defer d.sessionLocks.lock(id)()
	return d.closeUnbound(ctx, id)
}

// closeUnbound is closeIfUnbound; the caller holds the session's lock.
func (d *Driver) closeUnbound(ctx context.Context, id string) (bool, error) {
	dm := d.daemon()
	s, err := dm.session(ctx, id)
	if errors.Is(err, skills.ErrNotFound) {
		return false, nil
	}
	if err != nil || len(s.Binds) > 0 {
		return false, err
	}
	return true, dm.close(ctx, id)
}

func (d *Driver) publishAPI(ctx context.Context, id, target, group string, v volume) error {
	if v.podUID == "" {
		return status.Errorf(codes.InvalidArgument, "volume %s: kind=api needs the pod's uid (%s): the CSIDriver object must set podInfoOnMount: true", id, AttrPodUID)
	}
	gid := v.socketGroup // the volume's own word first: the pod's author wrote both
	if gid < 0 && group != "" {
		n, err := parseGroup(group)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "volume %s: volume mount group: %v", id, err)
		}
		gid = n
	}
	dm := d.daemon()
	var list []api.SessionInfo
	var err error
	if v.key != "" {
		list, err = dm.sessions(ctx, api.SessionQuery{Key: v.sessionKey(""), Labels: map[string]string{LabelDriver: d.Name}})
	} else {
		list, err = dm.sessions(ctx, api.SessionQuery{Labels: map[string]string{LabelDriver: d.Name, LabelPodUID: v.podUID}})
	}
	if err != nil {
		return grpcError(fmt.Sprintf("volume %s: find the session of pod %s/%s", id, v.namespace, v.pod), err, d.Socket)
	}
	at := placeOf(target)
	view, podDir := at.join(ViewDir), at.up(2)
	var found []api.SessionInfo
	for _, s := range list {
		// The key is the pod's own (its uid is in it): it only picks which
		// of the pod's skills volumes this one serves.
		if s.Labels[LabelPodUID] == v.podUID {
			found = append(found, s)
		}
	}
	switch {
	case len(found) == 0:
		return status.Errorf(codes.Unavailable, "volume %s: pod %s/%s has no skillfs skills volume published yet (kind=api serves the session of that volume)", id, v.namespace, v.pod)
	case len(found) > 1:
		ids := make([]string, len(found))
		for i, s := range found {
			ids[i] = s.ID
		}
		return status.Errorf(codes.FailedPrecondition, "volume %s: pod %s/%s has %d skillfs sessions (%s): give the skills volume and this one the same key", id, v.namespace, v.pod, len(found), strings.Join(ids, ", "))
	}
	s := found[0]
	s.Existing = true // never close the pod's session here
	if gid >= 0 && !bound(s.Binds, view) {
		if err := shareFolder(target, gid); err != nil {
			return status.Errorf(codes.Internal, "volume %s: %v", id, err)
		}
	}
	// The skills volume must still be there when the bind is made: one
	// unpublished meanwhile may have closed the session, or is about to.
	return d.bindAt(ctx, &s, id, skills.Bind{Target: filepath.Join(target, ViewDir), APISocket: filepath.Join(target, SocketName)}, view,
		func(now *api.SessionInfo) error {
			if !boundInPod(now.Binds, podDir) {
				return status.Errorf(codes.Unavailable, "volume %s: session %s of pod %s/%s is bound at no skills volume of the pod (not published yet, or being unpublished)", id, s.ID, v.namespace, v.pod)
			}
			return nil
		})
}

// shareFolder makes target a folder of group gid, setgid (02750): the
// daemon then makes the API socket in it 0660 and the group's, so that
// the pod's processes (of its fsGroup) may connect, whatever their user.
// Made anew at every start of the daemon, the socket stays the folder's
// group's. The folder is changed through a descriptor of it (never
// following a symlink), and checked after: without CAP_FSETID the kernel
// drops the setgid bit of a folder whose group the caller is not in.
func shareFolder(target string, gid int) error {
	if err := unix.Mkdir(target, 0o750); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("make the target folder %s: %w", target, err)
	}
	fd, err := unix.Open(target, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("target %s is not a folder: %w", target, err)
	}
	defer unix.Close(fd)
	if mounted, err := isMountPoint(target); err != nil || mounted {
		return fmt.Errorf("target %s is a mount point (or cannot be told apart from one: %v)", target, err)
	}
	if err := unix.Fchown(fd, 0, gid); err != nil {
		return fmt.Errorf("give the target folder %s to group %d: %w", target, gid, err)
	}
	if err := unix.Fchmod(fd, 0o2750); err != nil {
		return fmt.Errorf("make the target folder %s setgid: %w", target, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("target folder %s: %w", target, err)
	}
	if st.Mode&0o7777 != 0o2750 || st.Uid != 0 || int(st.Gid) != gid {
		return fmt.Errorf("target folder %s is mode %04o of %d:%d, not 02750 of 0:%d: the setgid bit was not kept: the plugin needs CAP_FSETID", target, st.Mode&0o7777, st.Uid, st.Gid, gid)
	}
	return nil
}

// boundInPod reports whether a bind of binds is a volume of
// the pod whose volumes folder is dir (kubelet: <pod>/volumes/<plugin>/<volume>/mount).
func boundInPod(binds []skills.Bind, dir place) bool {
	return slices.ContainsFunc(binds, func(b skills.Bind) bool {
		return b.PID == 0 && dir.is(filepath.Dir(filepath.Dir(b.Target)))
	})
}

// NodeUnpublishVolume removes what the volume put at the target (see the
// package doc).
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkIDs(id, target); err != nil {
		return nil, err
	}
	defer d.volumeLocks.lock(id)()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	log := d.Log.With("volume", id, "target", target)
	if err := d.unpublish(ctx, id, filepath.Clean(target), placeOf(target)); err != nil {
		log.Warn("unpublish failed", "err", err)
		return nil, err
	}
	log.Info("unpublished")
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (d *Driver) unpublish(ctx context.Context, id, target string, at place) error {
	dm := d.daemon()
	view, atView := filepath.Join(target, ViewDir), at.join(ViewDir)
	// This daemon's sessions the volume opened first; when none of those
	// is bound at the target (a keyed session another volume of the pod
	// opened, a kind=api volume's session), the pod's (by the uid in the
	// kubelet's target path), and all of the driver's only when the path
	// names no pod.
	host, err := dm.host(ctx)
	if err != nil {
		return grpcError(fmt.Sprintf("volume %s: ask the daemon its host", id), err, d.Socket)
	}
	list, err := dm.sessions(ctx, api.SessionQuery{Host: host, Labels: map[string]string{LabelDriver: d.Name, LabelVolume: id}})
	if err == nil && !slices.ContainsFunc(list, func(s api.SessionInfo) bool { return bound(s.Binds, at, atView) }) {
		labels := map[string]string{LabelDriver: d.Name}
		if uid, ok := podUIDOf(target); ok {
			labels[LabelPodUID] = uid
		}
		var more []api.SessionInfo
		more, err = dm.sessions(ctx, api.SessionQuery{Host: host, Labels: labels})
		list = append(list, more...)
	}
	if err != nil {
		return grpcError(fmt.Sprintf("volume %s: list the driver's sessions", id), err, d.Socket)
	}
	done := map[string]bool{}
	for _, s := range list {
		if done[s.ID] {
			continue
		}
		done[s.ID] = true
		removed := false
		for _, b := range s.Binds {
			if !bound([]skills.Bind{b}, at, atView) {
				continue
			}
			if err := dm.unbind(ctx, s.ID, b.Target); err != nil {
				return grpcError(fmt.Sprintf("volume %s: remove the bind of session %s at %s", id, s.ID, b.Target), err, d.Socket)
			}
			removed = true
		}
		// Whether binds are left is the daemon's answer after the removal,
		// not the listing's: the pod's other volume may be unpublished at
		// the same time.
		if !removed && s.Labels[LabelVolume] != id {
			continue
		}
		closed, err := d.closeIfUnbound(ctx, s.ID)
		if err != nil {
			return grpcError(fmt.Sprintf("volume %s: close session %s", id, s.ID), err, d.Socket)
		}
		if closed {
			d.Log.Info("session closed", "session", s.ID, "volume", id)
		}
	}
	return removeTarget(id, target, view)
}

// removeTarget removes the target folder, and the view's folder in it (a
// kind=api volume's), each only if it is an empty folder that is not a
// mount point: never a file, never what something else mounted there.
func removeTarget(id, target, view string) error {
	for _, p := range []string{view, target} {
		if mounted, err := isMountPoint(p); err == nil && mounted {
			return status.Errorf(codes.FailedPrecondition, "volume %s: %s is a mount point no session of this driver is bound at: left alone", id, p)
		}
		err := unix.Rmdir(p)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT), p == view && errors.Is(err, unix.ENOTDIR):
		default:
			return status.Errorf(codes.Internal, "volume %s: remove %s: %v", id, p, err)
		}
	}
	return nil
}

// isMountPoint reports whether path is the root of a mount.
func isMountPoint(path string) (bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_BASIC_STATS, &st); err != nil {
		return false, err
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, fmt.Errorf("statx %s: the kernel does not tell mount roots", path)
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// grpcError is a failed daemon call as the kubelet is told it: what was
// done, the daemon's words, and the code its kind names.
func grpcError(doing string, err error, socket string) error {
	code := codes.Internal
	switch {
	case errors.Is(err, api.ErrNoDaemon):
		return status.Errorf(codes.Unavailable, "%s: the skillfs daemon does not answer on %s (is it running on this node?): %v", doing, socket, err)
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, skills.ErrUnavailable), errors.Is(err, skills.ErrBusy):
		code = codes.Unavailable
	case errors.Is(err, skills.ErrInvalid), errors.Is(err, skills.ErrUnsafePath), errors.Is(err, skills.ErrDependency):
		code = codes.InvalidArgument
	case errors.Is(err, skills.ErrLimit):
		code = codes.ResourceExhausted
	case errors.Is(err, skills.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, skills.ErrPermission):
		code = codes.PermissionDenied
	case errors.Is(err, skills.ErrExists):
		code = codes.AlreadyExists
	case errors.As(err, new(net.Error)):
		// No answer of the daemon: the socket, the connection.
		code = codes.Unavailable
	}
	return status.Errorf(code, "%s: %v", doing, err)
}

// keyedLocks serialise what is done under one key.
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

// lock locks key id and returns its unlock.
func (l *keyedLocks) lock(id string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*keyedLock{}
	}
	e := l.m[id]
	if e == nil {
		e = &keyedLock{}
		l.m[id] = e
	}
	e.users++
	l.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		l.mu.Lock()
		if e.users--; e.users == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}
