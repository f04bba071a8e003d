package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"skillfs/skills"
)

// The volume attributes (a pod's csi.volumeAttributes) the plugin reads.
const (
	AttrUser    = "user"
	AttrSkills  = "skills"
	AttrAll     = "all"
	AttrPreload = "preload"
	AttrKey     = "key"
	AttrKind    = "kind"
	// AttrSocketGroup (kind=api only) names the group id the API socket is
	// given, for a pod without an fsGroup (see the package doc).
	AttrSocketGroup = "socketGroup"
)

// The attributes the kubelet adds (podInfoOnMount, ephemeral volumes).
const (
	k8sPrefix        = "csi.storage.k8s.io/"
	AttrEphemeral    = k8sPrefix + "ephemeral"
	AttrPodName      = k8sPrefix + "pod.name"
	AttrPodNamespace = k8sPrefix + "pod.namespace"
	AttrPodUID       = k8sPrefix + "pod.uid"
	AttrServiceAcct  = k8sPrefix + "serviceAccount.name"
)

// The kinds of volume.
const (
	KindSkills = "skills" // the session's view, read-only
	KindAPI    = "api"    // the session's API socket, skillfs.sock
)

// SocketName is the API socket's name in a kind=api volume, and ViewDir
// the folder beside it where the session's view is bound with it.
const (
	SocketName = "skillfs.sock"
	ViewDir    = "skills"
)

// The labels the plugin puts on the sessions it opens.
const (
	LabelDriver    = "csi.driver"  // the driver name: what marks a session as the plugin's
	LabelVolume    = "csi.volume"  // the volume id that opened it
	LabelRequest   = "csi.request" // a digest of the request (user, skills, all, preload)
	LabelNamespace = "k8s.namespace"
	LabelPod       = "k8s.pod"
	LabelPodUID    = "k8s.pod-uid"
	LabelSA        = "k8s.service-account"
)

// maxList bounds the names of a list attribute.
const maxList = 1024

// volume is a publish request's attributes, checked.
type volume struct {
	kind      string
	user      string
	skills    []string
	all       bool
	preload   []string
	key       string // the key given, "" for none
	namespace string
	pod       string
	podUID    string
	sa        string

	socketGroup int // kind=api: the group id the socket is given, -1 for none
}

// parseVolume checks a volume context: every attribute is one the plugin
// knows (or one the kubelet adds), each of its kind, and well formed.
func parseVolume(ctx map[string]string) (volume, error) {
	v := volume{kind: KindSkills, socketGroup: -1, namespace: ctx[AttrPodNamespace], pod: ctx[AttrPodName], podUID: ctx[AttrPodUID], sa: ctx[AttrServiceAcct]}
	if k, ok := ctx[AttrKind]; ok {
		if k != KindSkills && k != KindAPI {
			return v, fmt.Errorf("volume attribute kind %q: want %q or %q", k, KindSkills, KindAPI)
		}
		v.kind = k
	}
	for _, k := range slices.Sorted(maps.Keys(ctx)) {
		val := ctx[k]
		switch {
		case strings.HasPrefix(k, k8sPrefix):
			continue
		case k == AttrKind:
		case k == AttrKey:
			if err := skills.CheckSessionKey(val); err != nil {
				return v, fmt.Errorf("volume attribute key: %w", err)
			}
			v.key = val
		case k == AttrSocketGroup && v.kind == KindAPI:
			gid, err := parseGroup(val)
			if err != nil {
				return v, fmt.Errorf("volume attribute %s: %w", k, err)
			}
			v.socketGroup = gid
		case k == AttrSocketGroup:
			return v, fmt.Errorf("volume attribute %s: only a kind=api volume has a socket", k)
		case v.kind == KindAPI:
			return v, fmt.Errorf("volume attribute %q: a kind=api volume takes only kind, key and %s (it serves the session of the pod's skills volume)", k, AttrSocketGroup)
		case k == AttrUser:
			v.user = val
		case k == AttrAll:
			if val != "true" && val != "false" {
				return v, fmt.Errorf("volume attribute all %q: want \"true\" or \"false\"", val)
			}
			v.all = val == "true"
		case k == AttrSkills, k == AttrPreload:
			list, err := parseList(k, val)
			if err != nil {
				return v, err
			}
			if k == AttrSkills {
				v.skills = list
			} else {
				v.preload = list
			}
		default:
			return v, fmt.Errorf("volume attribute %q is not one of user, skills, all, preload, key, kind, %s", k, AttrSocketGroup)
		}
	}
	if v.key != "" {
		if v.podUID == "" {
			return v, fmt.Errorf("volume attribute key needs the pod's uid (%s): a key names one of a pod's skills volumes, and the CSIDriver object must set podInfoOnMount: true", AttrPodUID)
		}
		if err := skills.CheckSessionKey(v.sessionKey("")); err != nil {
			return v, fmt.Errorf("volume attribute key with pod uid %q: %w", clip(v.podUID), err)
		}
	}
	if v.kind == KindSkills {
		if v.user == "" {
			return v, fmt.Errorf("volume attribute user is required (the skillfs user whose session the pod reads)")
		}
		if v.all && v.skills != nil {
			return v, fmt.Errorf("volume attributes all and skills: give one of them")
		}
	}
	return v, nil
}

// maxGroup is the largest group id taken (a group id is 31 bits in
// Kubernetes, as in the kernel's signed view of it).
const maxGroup = 1<<31 - 1

// parseGroup reads a group id: decimal, 0 to maxGroup.
func parseGroup(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return -1, fmt.Errorf("group %q: want a group id (0 to %d)", clip(s), maxGroup)
	}
	return int(n), nil
}

// parseList reads a comma-separated list of names; an empty value is an
// empty list.
func parseList(attr, s string) ([]string, error) {
	list := []string{}
	if strings.TrimSpace(s) == "" {
		return list, nil
	}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, fmt.Errorf("volume attribute %s %q: an empty name between commas", attr, clip(s))
		}
		if !slices.Contains(list, n) {
			list = append(list, n)
		}
		if len(list) > maxList {
			return nil, fmt.Errorf("volume attribute %s: more than %d names", attr, maxList)
		}
	}
	return list, nil
}

// sessionKey is the client key of the session a volume opens: its volume
// id's, or the key given, scoped to the pod (shared by the volumes of one
// pod that give it, never by another pod's: the pod's uid is part of it).
// Keys of the plugin's own never meet a key an operator or another client
// chose.
func (v volume) sessionKey(volumeID string) string {
	if v.key != "" {
		return "csi:key:" + v.podUID + "/" + v.key
	}
	return "csi:vol:" + volumeID
}

// request is a digest of what the session is asked to be: a volume of the
// pod that shares a key with an open session must ask for the same, or it
// would read what its own claim did not ask for.
func (v volume) request() string {
	s, p := slices.Sorted(slices.Values(v.skills)), slices.Sorted(slices.Values(v.preload))
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%t\x00%t\x00%s\x00%s", v.user, v.all, v.skills == nil, strings.Join(s, ","), strings.Join(p, ",")))
	return hex.EncodeToString(h[:12])
}

// labels are the labels of the session a volume opens.
func (v volume) labels(driver, volumeID string) map[string]string {
	l := map[string]string{LabelDriver: driver, LabelVolume: volumeID, LabelRequest: v.request()}
	for k, val := range map[string]string{LabelNamespace: v.namespace, LabelPod: v.pod, LabelPodUID: v.podUID, LabelSA: v.sa} {
		if val != "" && skills.CheckLabel(k, val) == nil {
			l[k] = val
		}
	}
	return l
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
