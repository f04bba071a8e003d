package deploy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The volume attributes the plugin takes (volume_context), and the values
// of kind.
var (
	volumeAttributes = []string{"user", "skills", "all", "preload", "key", "kind"}
	volumeKinds      = []string{"", "skills", "api"}
)

// policyText is the claims policy the plugin reads: the key of the
// ConfigMap its --policy names.
func policyText(b *bundle, p *problems) (string, bool) {
	_, po, c := b.daemonSetWith(p, pluginName)
	if c == nil {
		return "", false
	}
	flags := map[string][]string{}
	if parseFlagArgs(argv(c)[1:], lookupIn(pluginFlags), "skillfs-csi", flags) != nil {
		return "", false // told by checkPlugin
	}
	pol, ok := command{flags: flags}.value("policy")
	if !ok {
		return "", false
	}
	text, err := b.configMapFile(po, c, pol)
	return text, err == nil
}

func checkPolicy(b *bundle, p *problems) {
	text, ok := policyText(b, p)
	if !ok {
		return
	}
	if _, err := parsePolicy([]byte(text)); err != nil {
		p.add(at("policy.yaml"), "the claims policy does not parse: %v", err)
	}
}

// checkExamplePod: the example's volumes are the driver's, read-only, with
// attributes the plugin knows; the skills are where serve's agent-path
// says; and the policy lets the pod's namespace and service account claim
// what its volumes ask for.
func checkExamplePod(b *bundle, p *problems) {
	pods := b.all(podKind, true)
	if len(pods) == 0 {
		p.add(at("examples"), "no example pod")
	}
	text, havePolicy := policyText(b, p)
	f := b.daemon(p)
	for _, o := range pods {
		po := o.obj.(*corev1.Pod)
		if po.Spec.ServiceAccountName == "" || b.find(serviceAccountKind, po.Namespace, po.Spec.ServiceAccountName) == nil {
			p.add(o, "pod %s: service account %q is not in the example", po.Name, po.Spec.ServiceAccountName)
		}
		var kinds []string
		for _, v := range po.Spec.Volumes {
			if v.CSI == nil {
				continue
			}
			where := at(fmt.Sprintf("%s: volume %s", o, v.Name))
			if v.CSI.Driver != driver(b) {
				p.add(where, "driver %q, want %s", v.CSI.Driver, driver(b))
				continue
			}
			if v.CSI.ReadOnly == nil || !*v.CSI.ReadOnly {
				p.add(where, "not readOnly: the view is read-only")
			}
			attrs := v.CSI.VolumeAttributes
			for k := range attrs {
				if !slices.Contains(volumeAttributes, k) {
					p.add(where, "volume attribute %q is not one the plugin takes (%s)", k, strings.Join(volumeAttributes, ", "))
				}
			}
			kind := attrs["kind"]
			if !slices.Contains(volumeKinds, kind) {
				p.add(where, "kind %q: want skills or api", kind)
				continue
			}
			kinds = append(kinds, kind)
			if kind == "api" {
				continue
			}
			if attrs["user"] == "" {
				p.add(where, "a skills volume without a user")
				continue
			}
			for _, c := range po.Spec.Containers {
				for _, m := range c.VolumeMounts {
					if m.Name == v.Name && f != nil && path.Clean(m.MountPath) != path.Clean(f.setting("agent-path")) {
						p.add(where, "mounted at %s in %s, but serve's agent-path (what prompts say) is %s", m.MountPath, c.Name, f.setting("agent-path"))
					}
				}
			}
			if !havePolicy {
				continue
			}
			pol, err := parsePolicy([]byte(text))
			if err != nil {
				continue // checkPolicy
			}
			var skills []string
			if s := attrs["skills"]; s != "" {
				skills = strings.Split(s, ",")
			}
			if err := pol.allows(po.Namespace, po.Spec.ServiceAccountName, attrs["user"], skills); err != nil {
				p.add(where, "the policy refuses the example: %v", err)
			}
		}
		if slices.Contains(kinds, "api") && !slices.ContainsFunc(kinds, func(k string) bool { return k != "api" }) {
			p.add(o, "pod %s: an api volume without a skills volume (the socket is that session's)", po.Name)
		}
	}
}
