package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
	"skillfs/skills/skilltest"
	"skillfs/skills/store"
)

// scaleCatalog fills d's catalog with n skills in dependency chains of four
// (s00001 depends on s00000, ...), each with a one-file version in the
// store, written straight to the index and the store: the import path is
// measured elsewhere.
func scaleCatalog(b testing.TB, d *Daemon, n int) {
	ctx := context.Background()
	now := time.Now().UTC()
	for i := range n {
		slug := fmt.Sprintf("s%05d", i)
		hash := fmt.Sprintf("%064x", i+1)
		dir := d.cat.VersionPath(slug, hash)
		skilltest.WriteFile(b, filepath.Join(dir, "SKILL.md"), []byte(skilltest.Manifest("name: "+slug+"\ndescription: d", "")), 0o644)
		s := &skills.Skill{Slug: slug, Name: slug, Description: "d", SourceType: skills.SourceUpload, Source: "/src/" + slug,
			Share: skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}, Enabled: true, Creator: "operator",
			CreatedAt: now, UpdatedAt: now}
		if i%4 != 0 {
			s.SkillDependencies = []string{fmt.Sprintf("s%05d", i-1)}
		}
		v := &skills.Version{Slug: slug, Hash: hash, Path: store.VersionRelPath(slug, hash), SourceType: skills.SourceUpload,
			Source: s.Source, Installer: "operator", InstalledAt: now, Files: 1, Bytes: 40}
		if err := d.db.InsertSkill(ctx, s, v); err != nil {
			b.Fatal(err)
		}
	}
}

// scaleSkills is the size of the catalogs the scale benchmarks make:
// SKILLFS_SCALE_SKILLS, default 10,000.
func scaleSkills() int {
	if v, err := strconv.Atoi(os.Getenv("SKILLFS_SCALE_SKILLS")); err == nil {
		return v
	}
	return 10000
}

// BenchmarkCreateSession creates and closes sessions on a catalog of
// SKILLFS_SCALE_SKILLS skills (default 10,000): five requested skills (a
// closure of up to 20), and all of them.
func BenchmarkCreateSession(b *testing.B) {
	n := scaleSkills()
	d := newTestDaemon(b)
	scaleCatalog(b, d, n)
	ctx := context.Background()
	run := func(b *testing.B, req func(i int) api.CreateRequest) {
		for i := 0; b.Loop(); i++ {
			info, err := d.CreateSession(ctx, req(i))
			if err != nil {
				b.Fatal(err)
			}
			if err := d.CloseSession(ctx, info.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("5-skills", func(b *testing.B) {
		run(b, func(i int) api.CreateRequest {
			var want []string
			for k := range 5 {
				want = append(want, fmt.Sprintf("s%05d", (i*37+k*2011)%n))
			}
			return api.CreateRequest{User: "operator", Skills: want}
		})
	})
	b.Run("all", func(b *testing.B) {
		run(b, func(int) api.CreateRequest { return api.CreateRequest{User: "operator", All: true} })
	})
}

// BenchmarkFirstActivation measures what recording an activation adds to
// the first read of a SKILL.md in a session beyond its durability cost, in
// one run: the first read of SKILL.md in a new session (activation
// recorded durably before the bytes are returned), the first read of
// another file of the same size in a new session (no activation), and a
// bare durable commit of an activation in the same index. overhead-% is
// (first SKILL.md read - first other read - commit) / first other read
// + commit: what activation costs beyond the commit itself.
func BenchmarkFirstActivation(b *testing.B) {
	d := newTestDaemon(b)
	ctx := context.Background()
	install(b, d, "name: x\ndescription: read me", skills.ScopeGlobal)
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	var manifest, other, commit time.Duration
	buf := make([]byte, 64<<10)
	for i := 0; b.Loop(); i++ {
		info, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: []string{"x"}})
		if err != nil {
			b.Fatal(err)
		}
		dir := filepath.Join(d.mountRoot, info.ID, "x")
		p := filepath.Join(dir, "SKILL.md")
		size(p) // lookups outside the timing: only the read differs
		start := time.Now()
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		f.Read(buf)
		f.Close()
		manifest += time.Since(start)

		// The same file in a session whose activation of x is already
		// stored: its first read goes the same way through the daemon
		// but finds the activation recorded, so it costs everything but
		// the commit.
		info2, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: []string{"x"}})
		if err != nil {
			b.Fatal(err)
		}
		if err := d.rec.Opened(info2.ID, "x"); err != nil {
			b.Fatal(err)
		}
		p2 := filepath.Join(d.mountRoot, info2.ID, "x", "SKILL.md")
		size(p2)
		start = time.Now()
		f, err = os.Open(p2)
		if err != nil {
			b.Fatal(err)
		}
		f.Read(buf)
		f.Close()
		other += time.Since(start)

		start = time.Now()
		if _, err := d.db.RecordActivation(ctx, info.ID, fmt.Sprintf("bare-%d", i), time.Now()); err != nil {
			b.Fatal(err)
		}
		commit += time.Since(start)
		d.CloseSession(ctx, info.ID)
		d.CloseSession(ctx, info2.ID)
	}
	n := float64(b.N)
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
	b.ReportMetric(us(manifest), "first-SKILL.md-µs")
	b.ReportMetric(us(other), "first-read-µs")
	b.ReportMetric(us(commit), "commit-µs")
	b.ReportMetric(100*(us(manifest)-us(other)-us(commit))/(us(other)+us(commit)), "overhead-%")
}
