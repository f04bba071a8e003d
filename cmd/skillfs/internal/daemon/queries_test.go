package daemon

import (
	"context"
	"testing"
)

// A skill revoked from the live view after the session was read (a set or
// a disable racing the message) is left out of the mentions, not an error.
func TestMentionsSkipASkillRevokedMeanwhile(t *testing.T) {
	d, _, info := oneSkillSession(t)
	ctx := context.Background()
	set, err := d.db.SkillSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.fs.SetSession(info.ID, d.view(set, nil)); err != nil { // the view without x; the index still pins it
		t.Fatal(err)
	}
	m, err := d.Mentions(ctx, info.ID, "use $x and\n/skill:x now")
	if err != nil || len(m) != 0 {
		t.Fatalf("mentions of a revoked skill: %+v, %v; want none", m, err)
	}
}
