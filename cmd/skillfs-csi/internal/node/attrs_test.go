package node

import (
	"strings"
	"testing"

	"skillfs/skills"
)

func TestParseVolume(t *testing.T) {
	v, err := parseVolume(podContext("ns", "p", "u", "sa", map[string]string{AttrUser: "alice", AttrSkills: "pdf, docx,pdf", AttrPreload: "pdf", AttrKey: "thread-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if v.kind != KindSkills || v.user != "alice" || strings.Join(v.skills, ",") != "pdf,docx" || v.key != "thread-1" || v.sessionKey("vol") != "csi:key:u/thread-1" {
		t.Fatalf("parsed %+v", v)
	}
	if v, _ := parseVolume(map[string]string{AttrUser: "alice"}); v.sessionKey("vol-1") != "csi:vol:vol-1" || v.skills != nil {
		t.Fatalf("without key or skills: %+v", v)
	}
	if v, err := parseVolume(map[string]string{AttrKind: KindAPI, AttrSocketGroup: "1000"}); err != nil || v.socketGroup != 1000 {
		t.Fatalf("kind=api with socketGroup 1000: %+v, %v", v, err)
	}
	if v, _ := parseVolume(map[string]string{AttrKind: KindAPI}); v.socketGroup != -1 {
		t.Fatalf("kind=api without socketGroup: %+v, want no group", v)
	}
	a, _ := parseVolume(map[string]string{AttrUser: "alice", AttrSkills: "pdf,docx"})
	b, _ := parseVolume(map[string]string{AttrUser: "alice", AttrSkills: "docx,pdf"})
	c, _ := parseVolume(map[string]string{AttrUser: "alice", AttrSkills: "pdf"})
	if a.request() != b.request() || a.request() == c.request() {
		t.Fatal("request digests: the same request differs, or different ones agree")
	}
	for attrs, want := range map[string]map[string]string{
		"user is required":       {AttrSkills: "pdf"},
		"give one of them":       {AttrUser: "a", AttrAll: "true", AttrSkills: "pdf"},
		`want "true" or "false"`: {AttrUser: "a", AttrAll: "yes"},
		"an empty name":          {AttrUser: "a", AttrSkills: "pdf,,docx"},
		"takes only kind, key":   {AttrKind: KindAPI, AttrUser: "a"},
		"only a kind=api volume": {AttrUser: "a", AttrSocketGroup: "1000"},
		"want a group id":        {AttrKind: KindAPI, AttrSocketGroup: "-1"},
		"(0 to 2147483647)":      {AttrKind: KindAPI, AttrSocketGroup: "2147483648"},
		"not one of":             {AttrUser: "a", "Skills": "pdf"},
		"session key":            {AttrUser: "a", AttrKey: "has space", AttrPodUID: "u"},
		"needs the pod's uid":    {AttrUser: "a", AttrKey: "k"},
		"with pod uid":           {AttrUser: "a", AttrKey: "k", AttrPodUID: strings.Repeat("u", 300)},
	} {
		if _, err := parseVolume(want); err == nil || !strings.Contains(err.Error(), attrs) {
			t.Errorf("%v: %v, want an error saying %q", want, err, attrs)
		}
	}
}

func FuzzParseVolume(f *testing.F) {
	f.Add("alice", "pdf,docx", "false", "pdf", "k", "skills", "pod-uid", "")
	f.Add("", "", "true", "", "", "api", "", "1000")
	f.Add("a", " , ", "maybe", ",", "a b", "x", "u", "-1")
	f.Fuzz(func(t *testing.T, user, skillList, all, preload, key, kind, uid, group string) {
		ctx := map[string]string{AttrUser: user, AttrSkills: skillList, AttrAll: all, AttrPreload: preload, AttrKey: key, AttrKind: kind, AttrPodUID: uid}
		if group != "" {
			ctx[AttrSocketGroup] = group
		}
		v, err := parseVolume(ctx)
		if err != nil {
			return
		}
		if v.socketGroup != -1 {
			t.Fatalf("a skills volume parsed with socket group %d", v.socketGroup)
		}
		if v.kind != KindSkills {
			t.Fatalf("kind %q parsed with user and skills attributes", v.kind)
		}
		if v.user == "" || len(v.skills) > maxList || len(v.preload) > maxList {
			t.Fatalf("parsed %+v", v)
		}
		for _, s := range append(v.skills, v.preload...) {
			if s == "" || strings.Contains(s, ",") || strings.TrimSpace(s) != s {
				t.Fatalf("name %q in a parsed list", s)
			}
		}
		if err := skills.CheckSessionKey(v.sessionKey("csi-0123")); err != nil {
			t.Fatalf("session key of a parsed volume: %v", err)
		}
		if err := skills.CheckLabels(v.labels("csi.skillfs", "csi-0123")); err != nil {
			t.Fatalf("labels of a parsed volume: %v", err)
		}
	})
}
