package deploy

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What the manifests are built around.
const (
	driverName     = "csi.skillfs"
	kubeletPods    = "/var/lib/kubelet/pods"
	kubeletPlugins = "/var/lib/kubelet/plugins"
	registryDir    = "/var/lib/kubelet/plugins_registry"
	daemonName     = "skillfs"     // the daemon's container
	pluginName     = "skillfs-csi" // the plugin's container
	registrarName  = "node-driver-registrar"
	probeName      = "liveness-probe"
	keeperName     = "keeper"
	skillfsBin     = "/usr/local/bin/skillfs"
	pluginBin      = "/usr/local/bin/skillfs-csi"
	criticalClass  = "system-node-critical"
)

// pod is a pod spec of the manifests: a DaemonSet's template or a Pod.
type pod struct {
	where     fmt.Stringer
	namespace string
	spec      *corev1.PodSpec
	labels    map[string]string
}

func (b *bundle) daemonSets() []*appsv1.DaemonSet {
	var out []*appsv1.DaemonSet
	for _, o := range b.all(daemonSetKind, false) {
		out = append(out, o.obj.(*appsv1.DaemonSet))
	}
	return out
}

// daemonSetWith is the DaemonSet whose pods run container name, and the pod.
func (b *bundle) daemonSetWith(p *problems, name string) (*appsv1.DaemonSet, *pod, *corev1.Container) {
	for _, o := range b.all(daemonSetKind, false) {
		ds := o.obj.(*appsv1.DaemonSet)
		if c := container(&ds.Spec.Template.Spec, name); c != nil {
			return ds, &pod{where: o, namespace: ds.Namespace, spec: &ds.Spec.Template.Spec, labels: ds.Spec.Template.Labels}, c
		}
	}
	p.add(at("manifests"), "no DaemonSet runs a container %q", name)
	return nil, nil, nil
}

func (b *bundle) pods() []*pod {
	var out []*pod
	for _, o := range b.all(daemonSetKind, false) {
		ds := o.obj.(*appsv1.DaemonSet)
		out = append(out, &pod{where: o, namespace: ds.Namespace, spec: &ds.Spec.Template.Spec, labels: ds.Spec.Template.Labels})
	}
	for _, o := range b.all(podKind, true) {
		po := o.obj.(*corev1.Pod)
		out = append(out, &pod{where: o, namespace: po.Namespace, spec: &po.Spec, labels: po.Labels})
	}
	return out
}

func container(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

func volume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// mountOf is the mount of container c that holds p (the longest
// mountPath it is in), and its volume.
func mountOf(spec *corev1.PodSpec, c *corev1.Container, p string) (*corev1.VolumeMount, *corev1.Volume) {
	var best *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		if within(p, m.MountPath) && (best == nil || len(m.MountPath) > len(best.MountPath)) {
			best = m
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, volume(spec, best.Name)
}

func within(p, dir string) bool {
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// hostPathOf is where p of container c is on the node: "" when p is not
// on a hostPath volume.
func hostPathOf(spec *corev1.PodSpec, c *corev1.Container, p string) string {
	m, v := mountOf(spec, c, p)
	if m == nil || v == nil || v.HostPath == nil || m.SubPath != "" || m.SubPathExpr != "" {
		return ""
	}
	rel := strings.TrimPrefix(path.Clean(p), path.Clean(m.MountPath))
	return path.Clean(v.HostPath.Path + rel)
}

// find is the object of kind gvk named namespace/name, nil if none.
func (b *bundle) find(gvk schema.GroupVersionKind, namespace, name string) *object {
	for i := range b.objs {
		o := &b.objs[i]
		meta, ok := o.obj.(metav1.Object)
		if ok && o.obj.GetObjectKind().GroupVersionKind() == gvk && meta.GetNamespace() == namespace && meta.GetName() == name {
			return o
		}
	}
	return nil
}

func checkKustomization(b *bundle, p *problems) {
	ks := b.all(kustomizationKind, false)
	if len(ks) != 1 {
		p.add(at("manifests"), "want one kustomization.yaml, found %d", len(ks))
		return
	}
	k := ks[0].obj.(*kustomization)
	for name := range b.files {
		if isManifest(name) && !strings.Contains(name, "/") && name != "kustomization.yaml" && !slices.Contains(k.Resources, name) {
			p.add(ks[0], "%s is not listed in resources", name)
		}
	}
	for _, r := range k.Resources {
		if _, ok := b.files[r]; !ok || strings.Contains(r, "/") {
			p.add(ks[0], "resource %s is not a manifest of this folder", r)
		}
	}
	used := map[string]string{} // image name → tag
	for _, po := range b.pods() {
		if strings.HasPrefix(po.where.String(), "examples/") {
			continue
		}
		for _, c := range po.spec.Containers {
			name, tag, _ := strings.Cut(c.Image, ":")
			used[name] = tag
		}
	}
	for _, im := range k.Images {
		tag, ok := used[im.Name]
		switch {
		case !ok:
			p.add(ks[0], "images: %s is no container's image", im.Name)
		case im.NewTag != tag:
			p.add(ks[0], "images: %s's newTag %q is not the manifests' %q", im.Name, im.NewTag, tag)
		case im.NewName != "":
			p.add(ks[0], "images: %s has a newName: the folder names no registry (an operator's own kustomization does)", im.Name)
		}
		delete(used, im.Name)
	}
	for name := range used {
		p.add(ks[0], "images: %s is missing (operators point each image at their registry there)", name)
	}
}

// checkNamespaced: every object of the folder is in a namespace the folder
// makes (the CSIDriver and Namespaces are cluster-wide), the example's in
// one the example makes; service accounts hold no token.
func checkNamespaced(b *bundle, p *problems) {
	for _, o := range b.objs {
		meta, ok := o.obj.(metav1.Object)
		if !ok {
			continue
		}
		gvk := o.obj.GetObjectKind().GroupVersionKind()
		if gvk == namespaceKind || gvk == csiDriverKind || gvk == kustomizationKind {
			continue
		}
		examples := strings.HasPrefix(o.file, "examples/")
		made := slices.ContainsFunc(b.all(namespaceKind, examples), func(n object) bool {
			return n.obj.(*corev1.Namespace).Name == meta.GetNamespace()
		})
		if !made {
			p.add(o, "%s %s is in namespace %q, which the %s do not make", gvk.Kind, meta.GetName(),
				meta.GetNamespace(), map[bool]string{false: "manifests", true: "examples"}[examples])
		}
		if sa, ok := o.obj.(*corev1.ServiceAccount); ok && (sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken) {
			p.add(o, "service account %s mounts a token (automountServiceAccountToken not false): nothing here calls the API", sa.Name)
		}
	}
	for _, o := range b.all(namespaceKind, false) {
		ns := o.obj.(*corev1.Namespace)
		if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
			p.add(o, "namespace %s does not admit privileged pods (pod-security.kubernetes.io/enforce: privileged)", ns.Name)
		}
	}
}

func checkCSIDriver(b *bundle, p *problems) {
	ds := b.all(csiDriverKind, false)
	if len(ds) != 1 {
		p.add(at("manifests"), "want one CSIDriver, found %d", len(ds))
		return
	}
	d := ds[0].obj.(*storagev1.CSIDriver)
	s := d.Spec
	if d.Name != driverName {
		p.add(ds[0], "CSIDriver is named %q, want %q", d.Name, driverName)
	}
	if s.AttachRequired == nil || *s.AttachRequired {
		p.add(ds[0], "attachRequired must be false: nothing to attach")
	}
	if s.PodInfoOnMount == nil || !*s.PodInfoOnMount {
		p.add(ds[0], "podInfoOnMount must be true: the claims policy needs the pod's namespace and service account")
	}
	if !slices.Equal(s.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}) {
		p.add(ds[0], "volumeLifecycleModes %v, want [Ephemeral] alone", s.VolumeLifecycleModes)
	}
	if s.FSGroupPolicy == nil || *s.FSGroupPolicy != storagev1.NoneFSGroupPolicy {
		p.add(ds[0], "fsGroupPolicy must be None: the view is read-only, the kubelet must not chown it")
	}
	if s.RequiresRepublish != nil && *s.RequiresRepublish {
		p.add(ds[0], "requiresRepublish: the binds need no republishing")
	}
	if len(s.TokenRequests) > 0 {
		p.add(ds[0], "tokenRequests: the plugin calls no API")
	}
}

// checkPods holds for every pod of the folder and the examples: labels a
// DaemonSet selects, containers bounded and unprivileged but the daemon,
// images bare names, volumes and config maps that exist.
func checkPods(b *bundle, p *problems) {
	for _, o := range b.all(daemonSetKind, false) {
		ds := o.obj.(*appsv1.DaemonSet)
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		switch {
		case err != nil:
			p.add(o, "DaemonSet %s: selector: %v", ds.Name, err)
		case sel.Empty():
			p.add(o, "DaemonSet %s selects every pod of its namespace", ds.Name)
		case !sel.Matches(labels.Set(ds.Spec.Template.Labels)):
			p.add(o, "DaemonSet %s: selector %s does not match its template's labels %v", ds.Name, sel, ds.Spec.Template.Labels)
		}
		spec := &ds.Spec.Template.Spec
		if spec.PriorityClassName != criticalClass {
			p.add(o, "DaemonSet %s: priorityClassName %q, want %s", ds.Name, spec.PriorityClassName, criticalClass)
		}
		if !slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool {
			return t.Key == "" && t.Operator == corev1.TolerationOpExists && t.Effect == ""
		}) {
			p.add(o, "DaemonSet %s does not tolerate every taint: agent pods may run on any node", ds.Name)
		}
		if spec.TerminationGracePeriodSeconds == nil {
			p.add(o, "DaemonSet %s: no terminationGracePeriodSeconds", ds.Name)
		}
		if ds.Spec.UpdateStrategy.Type == "" {
			p.add(o, "DaemonSet %s: no updateStrategy", ds.Name)
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			p.add(o, "DaemonSet %s shares the node's network, pid or ipc namespace: none is needed", ds.Name)
		}
		if spec.ServiceAccountName == "" || b.find(serviceAccountKind, ds.Namespace, spec.ServiceAccountName) == nil {
			p.add(o, "DaemonSet %s: service account %q is not in the manifests", ds.Name, spec.ServiceAccountName)
		}
	}
	for _, po := range b.pods() {
		spec := po.spec
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			p.add(po.where, "pod mounts a service account token: automountServiceAccountToken must be false")
		}
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil && b.find(configMapKind, po.namespace, v.ConfigMap.Name) == nil {
				p.add(po.where, "volume %s: no ConfigMap %s/%s in the manifests", v.Name, po.namespace, v.ConfigMap.Name)
			}
			if v.HostPath != nil && (v.HostPath.Type == nil || *v.HostPath.Type == corev1.HostPathUnset) {
				p.add(po.where, "volume %s: a hostPath without a type (say what must be there)", v.Name)
			}
		}
		for i := range spec.Containers {
			checkContainer(po, &spec.Containers[i], p)
		}
	}
}

// containerCaps are the capabilities a container holds beyond none: the
// plugin gives a kind=api volume's folder to the pod's fsGroup (chown to a
// group root is not in) and makes it setgid (kept only with CAP_FSETID),
// so that the daemon makes the socket in it that group's.
var containerCaps = map[string][]string{pluginName: {"CHOWN", "FSETID"}}

func capNames(add []corev1.Capability) []string {
	var out []string
	for _, c := range add {
		out = append(out, string(c))
	}
	slices.Sort(out)
	return out
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func checkContainer(po *pod, c *corev1.Container, p *problems) {
	where := at(fmt.Sprintf("%s: container %s", po.where, c.Name))
	if strings.Contains(c.Image, "/") || !strings.Contains(c.Image, ":") || strings.HasSuffix(c.Image, ":latest") {
		p.add(where, "image %q: want a bare name with a released tag (operators point it at their registry)", c.Image)
	}
	if c.ImagePullPolicy == corev1.PullAlways {
		p.add(where, "imagePullPolicy Always: a restart would wait for the registry")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[r]
		lim, hasLim := c.Resources.Limits[r]
		switch {
		case !hasReq:
			p.add(where, "no %s request", r)
		case !hasLim:
			p.add(where, "no %s limits", r)
		case req.Cmp(lim) > 0:
			p.add(where, "%s request %s above its limit %s", r, req.String(), lim.String())
		}
	}
	for _, m := range c.VolumeMounts {
		if volume(po.spec, m.Name) == nil {
			p.add(where, "mount of %s: the pod has no such volume", m.Name)
		}
	}
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
	}
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		for _, m := range envRef.FindAllStringSubmatch(a, -1) {
			if !env[m[1]] {
				p.add(where, "%q refers to $(%s), which the container's env does not set", a, m[1])
			}
		}
	}
	sc := c.SecurityContext
	privileged := sc != nil && sc.Privileged != nil && *sc.Privileged
	if c.Name == daemonName && strings.HasPrefix(c.Image, "skillfs:") {
		return // checkDaemon
	}
	switch {
	case privileged:
		p.add(where, "privileged: only the daemon makes mounts")
	case sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		p.add(where, "allowPrivilegeEscalation must be false")
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || !slices.Equal(capNames(sc.Capabilities.Add), containerCaps[c.Name]):
		p.add(where, "capabilities: want drop [ALL] and add %v, not %v", containerCaps[c.Name], sc.Capabilities)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
			p.add(where, "mount %s is Bidirectional: only the daemon's mounts reach the node", m.Name)
		}
	}
}
