package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"skillfs/skills"
)

// scaleCatalog fills d's catalog with n skills in dependency chains of four
// (s00001 depends on s00000, ...), each with a one-file version in the
// store, written straight to the index and the store: the import path is
// measured elsewhere.
func scaleCatalog(b *testing.B, d *Daemon, n int) {
	ctx := context.Background()
	now := time.Now().UTC()
	for i := range n {
		slug := fmt.Sprintf("s%05d", i)
		hash := fmt.Sprintf("%064x", i+1)
		dir := d.cat.VersionPath(slug, hash)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: "+slug+"\ndescription: d\n---\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		s := &skills.Skill{Slug: slug, Name: slug, Description: "d", SourceType: skills.SourceUpload, Source: "/src/" + slug,
			Share: skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}, Enabled: true, Creator: "operator",
			CreatedAt: now, UpdatedAt: now}
		if i%4 != 0 {
			s.SkillDependencies = []string{fmt.Sprintf("s%05d", i-1)}
		}
		v := &skills.Version{Slug: slug, Hash: hash, Path: skills.VersionRelPath(slug, hash), SourceType: skills.SourceUpload,
			Source: s.Source, Installer: "operator", InstalledAt: now, Files: 1, Bytes: 40}
		if err := d.cat.DB().InsertSkill(ctx, s, v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateSession creates and closes sessions on a catalog of
// SKILLFS_SCALE_SKILLS skills (default 10,000): five requested skills (a
// closure of up to 20), and all of them.
func BenchmarkCreateSession(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("SKILLFS_SCALE_SKILLS")); err == nil {
		n = v
	}
	d := newTestDaemon(b)
	scaleCatalog(b, d, n)
	ctx := context.Background()
	run := func(b *testing.B, req func(i int) CreateRequest) {
		for i := 0; b.Loop(); i++ {
			info, err := d.CreateSession(ctx, req(i))
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Close(ctx, info.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("5-skills", func(b *testing.B) {
		run(b, func(i int) CreateRequest {
			var want []string
			for k := range 5 {
				want = append(want, fmt.Sprintf("s%05d", (i*37+k*2011)%n))
			}
			return CreateRequest{User: "operator", Skills: want}
		})
	})
	b.Run("all", func(b *testing.B) {
		run(b, func(int) CreateRequest { return CreateRequest{User: "operator", All: true} })
	})
}
