package deploy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"skillfs/cmd/skillfs-csi/internal/claims"
	"skillfs/cmd/skillfs-csi/internal/node"
)

// The volume attributes the plugin takes (volume_context), and the values
// of kind ("" is the default, skills), by the plugin's own names.
var (
	volumeAttributes = []string{node.AttrUser, node.AttrSkills, node.AttrAll, node.AttrPreload, node.AttrKey, node.AttrKind}
	volumeKinds      = []string{"", node.KindSkills, node.KindAPI}
)

// list is a list attribute's names, as the plugin reads them.
func list(attr string) []string {
	var out []string
	for _, n := range strings.Split(attr, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

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
	if _, err := claims.Parse([]byte(text)); err != nil {
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
			kind := attrs[node.AttrKind]
			if !slices.Contains(volumeKinds, kind) {
				p.add(where, "kind %q: want skills or api", kind)
				continue
			}
			kinds = append(kinds, kind)
			if kind == node.KindAPI {
				continue
			}
			if attrs[node.AttrUser] == "" {
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
			pol, err := claims.Parse([]byte(text))
			if err != nil {
				continue // checkPolicy
			}
			claim := claims.Claim{Namespace: po.Namespace, ServiceAccount: po.Spec.ServiceAccountName, User: attrs[node.AttrUser],
				Skills: list(attrs[node.AttrSkills]), All: attrs[node.AttrAll] == "true", Preload: list(attrs[node.AttrPreload])}
			if err := pol.Allow(claim); err != nil {
				p.add(where, "the policy refuses the example: %v", err)
			}
		}
		if !slices.Contains(kinds, node.KindAPI) {
			continue
		}
		if !slices.ContainsFunc(kinds, func(k string) bool { return k != node.KindAPI }) {
			p.add(o, "pod %s: an api volume without a skills volume (the socket is that session's)", po.Name)
		}
		// The socket is the pod's fsGroup's (0660), or root's (0600)
		// when the pod has none.
		if sc := po.Spec.SecurityContext; sc == nil || sc.FSGroup == nil {
			for _, c := range po.Spec.Containers {
				if uid := runAsUser(&po.Spec, &c); uid == nil || *uid != 0 {
					p.add(o, "pod %s: an api volume but no fsGroup: its socket is root's, and container %s does not run as root", po.Name, c.Name)
				}
			}
		}
	}
}

// runAsUser is the uid container c of spec runs as, when the spec says.
func runAsUser(spec *corev1.PodSpec, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if spec.SecurityContext != nil {
		return spec.SecurityContext.RunAsUser
	}
	return nil
}
