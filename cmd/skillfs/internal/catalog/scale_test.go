package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skillfs/skills"
	"skillfs/skills/store"
)

// BenchmarkImportAtScale imports batches of 200 skills (each depending on
// the one before it in chains of four) into a catalog that already holds
// 0 or 10,000 skills (written straight to the index), to show what an
// install costs as the catalog grows.
func BenchmarkImportAtScale(b *testing.B) {
	for _, size := range []int{0, 10000} {
		b.Run(fmt.Sprintf("catalog-%d", size), func(b *testing.B) {
			c := open(b)
			ctx := context.Background()
			now := time.Now().UTC()
			for i := range size {
				slug := fmt.Sprintf("pre%05d", i)
				s := &skills.Skill{Slug: slug, Name: slug, Description: "d", SourceType: skills.SourceUpload, Source: "/src/" + slug,
					Share: skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}, Enabled: true, Creator: Operator,
					CreatedAt: now, UpdatedAt: now}
				hash := fmt.Sprintf("%064x", i+1)
				v := &skills.Version{Slug: slug, Hash: hash, Path: store.VersionRelPath(slug, hash), SourceType: skills.SourceUpload,
					Source: s.Source, Installer: Operator, InstalledAt: now, Files: 1, Bytes: 40}
				if err := c.DB().InsertSkill(ctx, s, v); err != nil {
					b.Fatal(err)
				}
			}
			for n := 0; b.Loop(); n++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "src")
				for k := range 200 {
					slug := fmt.Sprintf("b%03d-%03d", n, k)
					deps := ""
					if k%4 != 0 {
						deps = fmt.Sprintf("skill_dependencies: [b%03d-%03d]\n", n, k-1)
					}
					skillDir(b, filepath.Join(dir, slug), "name: "+slug+"\ndescription: d\n"+deps)
				}
				b.StartTimer()
				if _, err := c.Import(ctx, ImportRequest{Source: dir, All: true}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*200), "µs/skill")
		})
	}
}

// BenchmarkDeleteUserAtScale deletes a user who created 100 skills, in a
// catalog that holds 10,000 more (written straight to the index): the
// delete reads every skill in its transaction to hand the user's on and
// take the uid out of every share, so this is what that costs.
func BenchmarkDeleteUserAtScale(b *testing.B) {
	c := open(b)
	ctx := context.Background()
	now := time.Now().UTC()
	insert := func(slug, creator string, share skills.Share) {
		s := &skills.Skill{Slug: slug, Name: slug, Description: "d", SourceType: skills.SourceUpload, Source: "/src/" + slug,
			Share: share, Enabled: true, Creator: creator, CreatedAt: now, UpdatedAt: now}
		hash := fmt.Sprintf("%064x", len(slug)+1)
		v := &skills.Version{Slug: slug, Hash: hash, Path: store.VersionRelPath(slug, hash), SourceType: skills.SourceUpload,
			Source: s.Source, Installer: creator, InstalledAt: now, Files: 1, Bytes: 40}
		if err := c.DB().InsertSkill(ctx, s, v); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 10000 {
		insert(fmt.Sprintf("pre%05d", i), Operator, skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}})
	}
	for n := 0; b.Loop(); n++ {
		b.StopTimer()
		uid := fmt.Sprintf("u%04d", n)
		if err := c.PutUser(ctx, "", skills.User{UID: uid, Role: skills.RoleUser}, true); err != nil {
			b.Fatal(err)
		}
		for k := range 100 {
			insert(fmt.Sprintf("%s-%03d", uid, k), uid, skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{Operator, uid}}})
		}
		b.StartTimer()
		res, err := c.DeleteUser(ctx, "", uid, "", false, nil)
		if err != nil || len(res.Handed) != 100 {
			b.Fatalf("delete %s: %+v %v", uid, res, err)
		}
	}
}
