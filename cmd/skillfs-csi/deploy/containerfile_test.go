package deploy

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// instruction is one instruction of a Containerfile: its keyword, its
// arguments (continuation lines joined) and its line.
type instruction struct {
	line int
	op   string
	args string
}

// parseContainerfile splits a Containerfile into its instructions: comment
// lines dropped, lines ending in a backslash joined to the next.
func parseContainerfile(text string) ([]instruction, error) {
	var out []instruction
	var cur *instruction
	for i, l := range strings.Split(text, "\n") {
		s := strings.TrimSpace(l)
		if cur == nil && (s == "" || strings.HasPrefix(s, "#")) {
			continue
		}
		if cur != nil && strings.HasPrefix(s, "#") {
			continue // a comment inside a continued instruction
		}
		cont := strings.HasSuffix(s, "\\")
		s = strings.TrimSpace(strings.TrimSuffix(s, "\\"))
		if cur == nil {
			op, args, _ := strings.Cut(s, " ")
			if !regexp.MustCompile(`^[A-Za-z]+$`).MatchString(op) {
				return nil, fmt.Errorf("line %d: %q is not an instruction", i+1, op)
			}
			cur = &instruction{line: i + 1, op: strings.ToUpper(op), args: strings.TrimSpace(args)}
		} else {
			cur.args += " " + s
		}
		if !cont {
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: the file ends in a continued line", cur.line)
	}
	return out, nil
}

// stage is one FROM of a Containerfile and what is built or copied in it.
type stage struct {
	line   int
	image  string
	name   string
	builds map[string]string   // binary → "CGO_ENABLED=N go build ... ./cmd/X" built to it
	copies map[string][]string // destination → sources, COPY --from=stage
	from   string              // the stage the COPY --from names
	apt    []string            // packages installed
	// stopSignal is the signal a container stop sends ("" for SIGTERM).
	stopSignal string
}

var (
	goBuild = regexp.MustCompile(`(?:^|&&\s*|;\s*)((?:[A-Z_]+=\S+\s+)*)go build\s+(.*?)(?:&&|;|$)`)
	goOut   = regexp.MustCompile(`-o\s+(\S+)`)
	goPkg   = regexp.MustCompile(`(\./cmd/[a-z0-9-]+)\s*$`)
	aptGet  = regexp.MustCompile(`apt-get install\s+((?:-\S+\s+)*)([^&;]+)`)
	goLine  = regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`)
	golang  = regexp.MustCompile(`^golang:(\d+)\.(\d+)(?:\.\d+)?-([a-z]+)$`)
	debian  = regexp.MustCompile(`^debian:([a-z]+)-slim$`)
)

func stages(ins []instruction) ([]*stage, error) {
	var out []*stage
	for _, in := range ins {
		if in.op == "FROM" {
			f := strings.Fields(in.args)
			if len(f) == 0 {
				return nil, fmt.Errorf("line %d: FROM with no image", in.line)
			}
			s := &stage{line: in.line, image: f[0], builds: map[string]string{}, copies: map[string][]string{}}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			} else if len(f) != 1 {
				return nil, fmt.Errorf("line %d: FROM %s", in.line, in.args)
			}
			out = append(out, s)
			continue
		}
		if len(out) == 0 {
			if in.op == "ARG" {
				continue
			}
			return nil, fmt.Errorf("line %d: %s before FROM", in.line, in.op)
		}
		s := out[len(out)-1]
		switch in.op {
		case "RUN":
			for _, m := range goBuild.FindAllStringSubmatch(in.args, -1) {
				o, p := goOut.FindStringSubmatch(m[2]), goPkg.FindStringSubmatch(m[2])
				if o == nil || p == nil {
					return nil, fmt.Errorf("line %d: a go build without -o FILE ./cmd/NAME", in.line)
				}
				s.builds[o[1]] = strings.TrimSpace(m[1]) + " " + p[1]
			}
			for _, m := range aptGet.FindAllStringSubmatch(in.args, -1) {
				s.apt = append(s.apt, strings.Fields(m[2])...)
			}
		case "STOPSIGNAL":
			s.stopSignal = strings.ToUpper(in.args)
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) < 3 || !strings.HasPrefix(f[0], "--from=") {
				continue // the build context
			}
			s.from = strings.TrimPrefix(f[0], "--from=")
			dst := f[len(f)-1]
			s.copies[dst] = append(s.copies[dst], f[1:len(f)-1]...)
		}
	}
	return out, nil
}

// checkContainerfile: bare base images of one Debian release, the Go
// release go.mod asks for; skillfs built with cgo, skillfs-csi without;
// both copied where the manifests run them, beside what the daemon calls.
func checkContainerfile(b *bundle, p *problems) {
	where := at("Containerfile")
	ins, err := parseContainerfile(string(b.files["Containerfile"]))
	if err != nil {
		p.add(where, "%v", err)
		return
	}
	ss, err := stages(ins)
	if err != nil || len(ss) < 2 {
		p.add(where, "want a build stage and a runtime stage: %v", err)
		return
	}
	for _, s := range ss {
		if strings.Contains(s.image, "/") || !strings.Contains(s.image, ":") || strings.HasSuffix(s.image, ":latest") {
			p.add(at(fmt.Sprintf("Containerfile line %d", s.line)), "base image %q: want a bare name with a released tag", s.image)
		}
	}
	run := ss[len(ss)-1]
	build := slices.IndexFunc(ss, func(s *stage) bool { return s.name != "" && s.name == run.from })
	if build < 0 {
		p.add(where, "the runtime stage copies from no build stage (%q)", run.from)
		return
	}
	bs := ss[build]
	g, d := golang.FindStringSubmatch(bs.image), debian.FindStringSubmatch(run.image)
	if g == nil || d == nil {
		p.add(where, "want golang:MAJOR.MINOR-RELEASE to build and debian:RELEASE-slim to run, got %s and %s", bs.image, run.image)
	} else {
		if g[3] != d[1] {
			p.add(where, "built on Debian %s, run on %s: skillfs is linked against the build's C library", g[3], d[1])
		}
		if m := goLine.FindStringSubmatch(string(b.refs["go.mod"])); m != nil && goOlder(g[1], g[2], m[1], m[2]) {
			p.add(where, "%s is older than go.mod's go %s.%s", bs.image, m[1], m[2])
		}
	}
	want := map[string]string{skillfsBin: "CGO_ENABLED=1 ./cmd/skillfs", pluginBin: "CGO_ENABLED=0 ./cmd/skillfs-csi"}
	for bin, how := range want {
		var got []string
		for out, h := range bs.builds {
			dir := slices.IndexFunc(run.copies[path.Dir(bin)+"/"], func(src string) bool { return src == out })
			if path.Base(out) == path.Base(bin) && (slices.Contains(run.copies[bin], out) || dir >= 0) {
				got = append(got, h)
			}
		}
		if len(got) != 1 || got[0] != how {
			p.add(where, "%s: want it built with %q and copied there, got %q", bin, how, got)
		}
	}
	if run.stopSignal != "" && run.stopSignal != "SIGTERM" {
		p.add(where, "STOPSIGNAL %s: serve --keeper hands over on SIGTERM alone (SIGINT ends every view)", run.stopSignal)
	}
	for _, pkg := range []string{"fuse3", "git", "ca-certificates"} {
		if !slices.Contains(run.apt, pkg) {
			p.add(where, "the runtime image lacks %s", pkg)
		}
	}
	for _, po := range b.pods() {
		for _, c := range po.spec.Containers {
			if a := argv(&c); strings.HasPrefix(c.Image, "skillfs:") && (len(a) == 0 || want[a[0]] == "") {
				p.add(po.where, "container %s runs %q, which the image does not hold", c.Name, a)
			}
		}
	}
}

func goOlder(maj, min, wantMaj, wantMin string) bool {
	a, _ := strconv.Atoi(maj)
	b, _ := strconv.Atoi(min)
	c, _ := strconv.Atoi(wantMaj)
	d, _ := strconv.Atoi(wantMin)
	return a < c || (a == c && b < d)
}
