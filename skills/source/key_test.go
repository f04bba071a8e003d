package source

import "testing"

// A skill's provenance key reads back as the source and folder it was
// made of; a source there is nothing to read again from reads as none.
func TestSkillKeyReadsBack(t *testing.T) {
	for _, tc := range []struct {
		tree string
		rel  string
		want Recorded
	}{
		{"git:https://example.com/acme/skills.git", ".", Recorded{Kind: "git", Base: "https://example.com/acme/skills.git"}},
		{"git:https://example.com/acme/skills.git", "skills/pdf", Recorded{Kind: "git", Base: "https://example.com/acme/skills.git", Rel: "skills/pdf"}},
		{"local:/srv/skills", "pdf", Recorded{Kind: "local", Base: "/srv/skills", Rel: "pdf"}},
	} {
		key := SkillKey(tc.tree, Candidate{Rel: tc.rel}, false)
		got, ok := ParseSkillKey(key)
		if !ok || got != tc.want {
			t.Errorf("ParseSkillKey(%q) = %+v, %v; want %+v", key, got, ok, tc.want)
		}
	}
	if got := SkillKey("agent:", Candidate{Rel: "/home/a/.claude/skills/pdf"}, true); got != "agent:/home/a/.claude/skills/pdf" {
		t.Errorf("an agent folder's key = %q", got)
	}
	for _, key := range []string{"zip:/tmp/a.zip", "file:/tmp/SKILL.md", "upload:a.zip", "agent:/home/a/x", "local:rel/path", "git:"} {
		if got, ok := ParseSkillKey(key); ok {
			t.Errorf("ParseSkillKey(%q) = %+v, want none", key, got)
		}
	}
}
