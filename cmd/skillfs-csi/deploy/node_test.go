package deploy

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// daemonFacts is what the daemon's container says, parsed once: its
// command line against CLI.md and its configuration file.
type daemonFacts struct {
	ds      *appsv1.DaemonSet
	pod     *pod
	c       *corev1.Container
	cmd     command
	ref     cliRef
	config  map[string][]string // key → value(s), as the file gives them
	home    string
	timeout time.Duration // fuse-request-timeout
}

// daemon parses the daemon's container once; nil when it cannot be (the
// problem told once).
func (b *bundle) daemon(p *problems) *daemonFacts {
	if b.daemonDone {
		return b.daemonFacts
	}
	b.daemonDone = true
	ref, err := parseCLI(b.refs["CLI.md"])
	if err != nil {
		p.add(at("CLI.md"), "%v", err)
		return nil
	}
	ds, po, c := b.daemonSetWith(p, daemonName)
	if c == nil {
		return nil
	}
	where := at(fmt.Sprintf("%s: container %s", po.where, c.Name))
	cmd, err := parseSkillfs(ref, argv(c))
	if err != nil {
		p.add(where, "%v", err)
		return nil
	}
	if cmd.path != "serve" {
		p.add(where, "runs skillfs %s, want serve", cmd.path)
		return nil
	}
	f := &daemonFacts{ds: ds, pod: po, c: c, cmd: cmd, ref: ref, timeout: time.Minute}
	file, ok := cmd.value("config")
	if !ok {
		p.add(where, "serve without --config: the settings belong in the ConfigMap")
		return nil
	}
	text, err := b.configMapFile(po, c, file)
	if err != nil {
		p.add(where, "--config %s: %v", file, err)
		return nil
	}
	if f.config, err = parseServeConfig(ref, text); err != nil {
		p.add(where, "--config %s: %v", file, err)
		return nil
	}
	home := f.setting("home")
	if home == "" {
		p.add(where, "no home, in the config or on the command line: the data directory must be the node's")
		return nil
	}
	f.home = path.Clean(home)
	if t := f.setting("fuse-request-timeout"); t != "" {
		if f.timeout, err = time.ParseDuration(t); err != nil {
			p.add(where, "fuse-request-timeout %q: %v", t, err)
		}
	}
	b.daemonFacts = f
	return f
}

// setting is a serve setting as the daemon gets it: the command line
// first, then the file.
func (f *daemonFacts) setting(name string) string {
	if v, ok := f.cmd.value(name); ok {
		return v
	}
	if v := f.config[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func argv(c *corev1.Container) []string { return append(slices.Clone(c.Command), c.Args...) }

// configMapFile is the text of file as container c of po sees it: a key of
// the ConfigMap mounted at its folder.
func (b *bundle) configMapFile(po *pod, c *corev1.Container, file string) (string, error) {
	m, v := mountOf(po.spec, c, file)
	if m == nil || v == nil || v.ConfigMap == nil {
		return "", fmt.Errorf("not in a ConfigMap's volume")
	}
	if m.SubPath != "" {
		return "", fmt.Errorf("a subPath mount of a ConfigMap is never updated")
	}
	key := strings.TrimPrefix(path.Clean(file), path.Clean(m.MountPath)+"/")
	for _, it := range v.ConfigMap.Items {
		if it.Path == key {
			key = it.Key
		}
	}
	o := b.find(configMapKind, po.namespace, v.ConfigMap.Name)
	if o == nil {
		return "", fmt.Errorf("no ConfigMap %s/%s", po.namespace, v.ConfigMap.Name)
	}
	text, ok := o.obj.(*corev1.ConfigMap).Data[key]
	if !ok {
		return "", fmt.Errorf("ConfigMap %s has no key %q", v.ConfigMap.Name, key)
	}
	return text, nil
}

// configGlobals are the global flags serve's configuration file takes.
var configGlobals = []string{"home", "index", "debug", "log-format"}

// parseServeConfig reads a configuration file as serve does
// (cmd/skillfs/SERVE.md): one mapping whose keys are serve's flags and the
// global flags home, index, debug and log-format, each once, each with a
// single value of its flag's kind, or a list of them for a flag that may be
// repeated.
func parseServeConfig(ref cliRef, text string) (map[string][]string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return map[string][]string{}, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: not a mapping", root.Line)
	}
	serve := ref.commands["serve"]
	out := map[string][]string{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		f, ok := serve[k.Value]
		if slices.Contains(configGlobals, k.Value) {
			f, ok = ref.global[k.Value]
		}
		if !ok || k.Value == "config" {
			return nil, fmt.Errorf("line %d: %q is not a flag of skillfs serve (CLI.md)", k.Line, k.Value)
		}
		if _, dup := out[k.Value]; dup {
			return nil, fmt.Errorf("line %d: %q given twice", k.Line, k.Value)
		}
		values := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode && f.repeatable {
			values = v.Content
		}
		out[k.Value] = []string{}
		for _, x := range values {
			if x.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: %s: not a single value", x.Line, k.Value)
			}
			if err := checkValue(f, x.Value); err != nil {
				return nil, fmt.Errorf("line %d: %s: %v", x.Line, k.Value, err)
			}
			out[k.Value] = append(out[k.Value], x.Value)
		}
	}
	return out, nil
}

// checkValue: a value is one its flag's kind can be.
func checkValue(f flag, v string) error {
	switch f.arg {
	case "":
		if v != "true" && v != "false" {
			return fmt.Errorf("%q: want true or false", v)
		}
	case "int":
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("%q: not an integer", v)
		}
	case "duration":
		if _, err := time.ParseDuration(v); err != nil {
			return fmt.Errorf("%q: not a duration", v)
		}
	default:
		if one := strings.Split(f.arg, `\|`); len(one) > 1 && !slices.Contains(one, v) {
			return fmt.Errorf("%q: want one of %s", v, strings.Join(one, ", "))
		}
	}
	return nil
}

func checkDaemonConfig(b *bundle, p *problems) {
	f := b.daemon(p)
	if f == nil {
		return
	}
	where := at(fmt.Sprintf("%s: container %s", f.pod.where, f.c.Name))
	if f.setting("mount-root") != "" && !within(f.setting("mount-root"), f.home) {
		p.add(where, "mount-root %s is outside home: the mount must be on the node's data directory's volume", f.setting("mount-root"))
	}
	if grace := f.pod.spec.TerminationGracePeriodSeconds; grace != nil && time.Duration(*grace)*time.Second >= f.timeout {
		p.add(where, "terminationGracePeriodSeconds %d is not below the fuse-request-timeout %s: readers would be cut off before the next daemon", *grace, f.timeout)
	}
}

// checkDaemon: the daemon makes the mounts, so it runs privileged with
// /dev/fuse, its data directory and the kubelet's pods folder on the node,
// Bidirectional; its probes are commands of skillfs; its DaemonSet rolls
// one node at a time with no surge.
func checkDaemon(b *bundle, p *problems) {
	f := b.daemon(p)
	if f == nil {
		return
	}
	c, spec := f.c, f.pod.spec
	where := at(fmt.Sprintf("%s: container %s", f.pod.where, c.Name))
	if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		p.add(where, "not privileged: it mounts FUSE and binds into the kubelet's pods folder")
	}
	bidirectional := func(dir, host, what string) {
		m, v := mountOf(spec, c, dir)
		switch {
		case m == nil || path.Clean(m.MountPath) != dir || v == nil || v.HostPath == nil:
			p.add(where, "%s: no hostPath volume mounted at %s", what, dir)
		case host != "" && path.Clean(v.HostPath.Path) != host:
			p.add(where, "%s: mounted from the node's %s, want %s (the kubelet's paths are the node's)", what, v.HostPath.Path, host)
		case m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional:
			p.add(where, "%s: mount of %s is not Bidirectional: the daemon's mounts would not reach the node", what, dir)
		}
	}
	bidirectional(kubeletPods, kubeletPods, "the pods folder")
	bidirectional(f.home, "", "the data directory")
	m, v := mountOf(spec, c, "/dev/fuse")
	if m == nil || m.MountPath != "/dev/fuse" || v == nil || v.HostPath == nil || v.HostPath.Path != "/dev/fuse" ||
		v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathCharDev {
		p.add(where, "/dev/fuse is not the node's character device /dev/fuse")
	}
	for name, probe := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if probe == nil || probe.Exec == nil {
			p.add(where, "no %s probe running a command", name)
			continue
		}
		cmd, err := parseSkillfs(f.ref, probe.Exec.Command)
		if err != nil {
			p.add(where, "%s probe: %v", name, err)
		} else if h, _ := cmd.value("home"); path.Clean(h) != f.home {
			p.add(where, "%s probe asks the daemon of %q, not of %s", name, h, f.home)
		}
	}
	u := f.ds.Spec.UpdateStrategy
	if u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil || u.RollingUpdate.MaxUnavailable == nil ||
		u.RollingUpdate.MaxSurge == nil || u.RollingUpdate.MaxSurge.IntValue() != 0 {
		p.add(where, "updateStrategy: want a RollingUpdate with maxUnavailable set and maxSurge 0 (two daemons cannot share a data directory)")
	}
}

// checkPlugin: the plugin serves its socket in the folder the kubelet
// knows for the driver's name, speaks to the daemon's socket on the same
// node's data directory, reads the policy from its ConfigMap, and holds no
// privilege.
func checkPlugin(b *bundle, p *problems) {
	_, po, c := b.daemonSetWith(p, pluginName)
	if c == nil {
		return
	}
	where := at(fmt.Sprintf("%s: container %s", po.where, c.Name))
	a := argv(c)
	if len(a) == 0 || a[0] != pluginBin {
		p.add(where, "does not run %s", pluginBin)
		return
	}
	flags := map[string][]string{}
	if err := parseFlagArgs(a[1:], lookupIn(pluginFlags), "skillfs-csi", flags); err != nil {
		p.add(where, "%v", err)
		return
	}
	cmd := command{flags: flags}
	d := driver(b)
	if name, ok := cmd.value("driver-name"); ok && name != d {
		p.add(where, "--driver-name %s is not the CSIDriver's %s", name, d)
	}
	ep, _ := cmd.value("endpoint")
	sock, ok := strings.CutPrefix(ep, "unix://")
	if !ok {
		p.add(where, "--endpoint %q is not a unix socket", ep)
	} else if h := hostPathOf(po.spec, c, sock); h != path.Join(kubeletPlugins, d, "csi.sock") {
		p.add(where, "--endpoint %s is the node's %q, want %s (the kubelet's folder of the driver)", ep, h, path.Join(kubeletPlugins, d, "csi.sock"))
	}
	// It removes the kubelet's targets once the daemon unbound them: it
	// must see them where the kubelet names them, with the node's mounts
	// (a private copy would keep every bind made before it started).
	if m, v := mountOf(po.spec, c, kubeletPods); m == nil || path.Clean(m.MountPath) != kubeletPods || v == nil || v.HostPath == nil ||
		path.Clean(v.HostPath.Path) != kubeletPods || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
		p.add(where, "the pods folder is not the node's, HostToContainer, at %s: the plugin removes the targets it is given", kubeletPods)
	}
	if id, _ := cmd.value("node-id"); !fromNodeName(c, id) {
		p.add(where, "--node-id %q is not the node's name (spec.nodeName through the downward API)", id)
	}
	if pol, ok := cmd.value("policy"); !ok {
		p.add(where, "no --policy")
	} else if _, err := b.configMapFile(po, c, pol); err != nil {
		p.add(where, "--policy %s: %v", pol, err)
	}
	if f := b.daemon(p); f != nil {
		want := hostPathOf(f.pod.spec, f.c, path.Join(f.home, "skillfs.sock"))
		s, _ := cmd.value("skillfs-socket")
		if h := hostPathOf(po.spec, c, s); h == "" || h != want || po.spec != f.pod.spec {
			p.add(where, "--skillfs-socket %s is the node's %q, not the daemon's socket %q of the same pod", s, h, want)
		}
		if m, _ := mountOf(po.spec, c, s); m != nil && path.Base(m.MountPath) == "skillfs.sock" {
			p.add(where, "mounts the daemon's socket file itself: the next daemon's socket would not be the one seen")
		}
	}
}

// fromNodeName: v is $(VAR) and VAR is the node's name.
func fromNodeName(c *corev1.Container, v string) bool {
	m := envRef.FindStringSubmatch(v)
	if m == nil || m[0] != v {
		return false
	}
	for _, e := range c.Env {
		if e.Name == m[1] {
			return e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
		}
	}
	return false
}

func lookupIn(s flagSet) func(string) (flag, bool) {
	return func(name string) (flag, bool) { f, ok := s[name]; return f, ok }
}

func driver(b *bundle) string {
	if ds := b.all(csiDriverKind, false); len(ds) == 1 {
		return ds[0].obj.(*storagev1.CSIDriver).Name
	}
	return driverName
}

// checkSidecars: the registrar tells the kubelet the plugin's socket where
// the node has it, from the kubelet's registration folder; the liveness
// probe probes that socket on the port the plugin's probe asks; their flags
// are theirs.
func checkSidecars(b *bundle, p *problems) {
	_, po, plugin := b.daemonSetWith(p, pluginName)
	if plugin == nil {
		return
	}
	sock := path.Join(kubeletPlugins, driver(b), "csi.sock")
	for _, name := range []string{registrarName, probeName} {
		c := container(po.spec, name)
		if c == nil {
			p.add(po.where, "no container %s", name)
			continue
		}
		where := at(fmt.Sprintf("%s: container %s", po.where, c.Name))
		known, ok := sidecarFlags[c.Image]
		if !ok {
			p.add(where, "image %s: its flags are not known here (sidecarFlags)", c.Image)
			continue
		}
		flags := map[string][]string{}
		if err := parseFlagArgs(argv(c), lookupIn(known), c.Image, flags); err != nil {
			p.add(where, "%v", err)
			continue
		}
		cmd := command{flags: flags}
		if a, _ := cmd.value("csi-address"); hostPathOf(po.spec, c, a) != sock {
			p.add(where, "--csi-address %q is not the plugin's socket %s", a, sock)
		}
		ep, _ := cmd.value("http-endpoint")
		port, err := strconv.Atoi(strings.TrimPrefix(ep, ":"))
		if err != nil || !strings.HasPrefix(ep, ":") {
			p.add(where, "--http-endpoint %q: want :PORT (the health check)", ep)
			continue
		}
		probed := c // the registrar's own probe; the probe sidecar's is the plugin's
		if name == probeName {
			probed = plugin
		}
		if got := probePort(po.spec, probed); got != port {
			p.add(where, "serves health on %d, but %s's liveness probe asks port %d", port, probed.Name, got)
		}
		if name != registrarName {
			continue
		}
		if r, _ := cmd.value("kubelet-registration-path"); r != sock {
			p.add(where, "--kubelet-registration-path %q, want %s (the plugin's socket on the node)", r, sock)
		}
		reg, ok := cmd.value("plugin-registration-path")
		if !ok {
			reg = "/registration"
		}
		if h := hostPathOf(po.spec, c, reg); h != registryDir {
			p.add(where, "registration folder %s is the node's %q, want %s", reg, h, registryDir)
		}
	}
}

// probePort is the port c's liveness probe asks over HTTP, by number or
// by a name of a port of the pod's containers; 0 if none.
func probePort(spec *corev1.PodSpec, c *corev1.Container) int {
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil {
		return 0
	}
	port := c.LivenessProbe.HTTPGet.Port
	if port.IntValue() != 0 {
		return port.IntValue()
	}
	for _, o := range spec.Containers {
		for _, cp := range o.Ports {
			if cp.Name == port.StrVal {
				return int(cp.ContainerPort)
			}
		}
	}
	return 0
}

// checkKeeper: the keeper runs in a DaemonSet of its own that the
// controller never replaces, holds its socket where the daemon looks for
// it on the node, and holds no privilege.
func checkKeeper(b *bundle, p *problems) {
	f := b.daemon(p)
	kds, po, c := b.daemonSetWith(p, keeperName)
	if f == nil || c == nil {
		return
	}
	where := at(fmt.Sprintf("%s: container %s", po.where, c.Name))
	if kds == f.ds {
		p.add(where, "the keeper is in the daemon's DaemonSet: replacing its pods (a rolling update) would end every view on the node")
	}
	if kds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		p.add(where, "updateStrategy %q: replacing a keeper ends the node's views, so only an operator may (OnDelete)", kds.Spec.UpdateStrategy.Type)
	}
	cmd, err := parseSkillfs(f.ref, argv(c))
	if err != nil {
		p.add(where, "%v", err)
		return
	}
	if cmd.path != "keeper" {
		p.add(where, "runs skillfs %s, want keeper", cmd.path)
		return
	}
	sock, _ := cmd.value("socket")
	want := f.setting("keeper")
	if want == "" {
		p.add(at(fmt.Sprintf("%s: container %s", f.pod.where, f.c.Name)), "serve has no --keeper: a daemon crash would end every view")
		return
	}
	kh, dh := hostPathOf(po.spec, c, sock), hostPathOf(f.pod.spec, f.c, want)
	if kh == "" || kh != dh {
		p.add(where, "keeper's socket %s is the node's %q, the daemon's --keeper %s the node's %q: not the same", sock, kh, want, dh)
	}
}
