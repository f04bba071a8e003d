package git

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"skillfs/skills"
	"skillfs/skills/gittest"
)

func TestParseHosts(t *testing.T) {
	got, err := ParseHosts(" git.Example.com, http://127.0.0.1:8080 ,https://[fd00::1]:8443, 10.0.0.2,gitlab.corp. ")
	want := []Host{{Name: "git.example.com"}, {Name: "127.0.0.1", Port: 8080, HTTP: true}, {Name: "fd00::1", Port: 8443},
		{Name: "10.0.0.2"}, {Name: "gitlab.corp"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseHosts = %+v, %v; want %+v", got, err, want)
	}
	if got, err := ParseHosts(""); err != nil || got != nil {
		t.Fatalf("ParseHosts(\"\") = %v, %v", got, err)
	}
	for _, bad := range []string{",", "a,,b", "ssh://host", "host/path", "user@host", "host:0", "host:65536", "host:x",
		"host:", "::1", "[::1", "[nothost]", "[::1]x", "-host", "ho st", "http://", "a..b"} {
		if _, err := ParseHosts(bad); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("ParseHosts(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func FuzzParseHosts(f *testing.F) {
	for _, s := range []string{"git.example.com", "http://127.0.0.1:8080", "https://[fd00::1]:8443,a.b", "a,,b", "[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := ParseHosts(s)
		if err != nil {
			if !errors.Is(err, skills.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		// What it read, written again, reads the same.
		var parts []string
		for _, h := range hosts {
			if h.Name == "" || h.Port < 0 || h.Port > 65535 {
				t.Fatalf("ParseHosts(%q) = %+v", s, hosts)
			}
			parts = append(parts, h.String())
		}
		again, err := ParseHosts(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, hosts) {
			t.Fatalf("ParseHosts(%q) = %+v; written again %q: %+v, %v", s, hosts, parts, again, err)
		}
	})
}

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"93.184.216.34": true, "140.82.112.3": true, "2606:4700::6810:85e5": true,
		"127.0.0.1": false, "127.1.2.3": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.0.1": false,
		"169.254.169.254": false, "fe80::1": false, "fd00::1": false, "fc00::1": false, "0.0.0.0": false, "::": false,
		"224.0.0.1": false, "ff02::1": false, "100.64.0.1": false, "255.255.255.255": false, "::ffff:127.0.0.1": false,
		"::ffff:10.0.0.1": false, "64:ff9b::a00:1": false, "2002:a00:1::": false, "0.1.2.3": false, "198.18.0.1": false,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// TestRemotePolicyCheck: a name is judged by every address it resolves to,
// and git is pinned to those checked; a name that does not resolve is
// refused as one that resolves to a private address is.
func TestRemotePolicyCheck(t *testing.T) {
	resolved := map[string][]netip.Addr{
		"pub.example":   {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:4700::1")},
		"mixed.example": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.1")},
		"meta.example":  {netip.MustParseAddr("169.254.169.254")},
	}
	p := &RemotePolicy{lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := resolved[host]; ok {
			return a, nil
		}
		return nil, errors.New("no such host")
	}}
	rc, err := p.check(context.Background(), Source{}, "https://pub.example/team/repo.git")
	if err != nil || !slices.Contains(rc.config, "http.curloptResolve=pub.example:443:93.184.216.34,[2606:4700::1]") ||
		!slices.Contains(rc.config, "http.followRedirects=false") || !slices.Contains(rc.config, "protocol.http.allow=never") {
		t.Fatalf("check of a public name = %+v, %v", rc, err)
	}
	for _, u := range []string{"https://mixed.example/r.git", "https://meta.example/r.git", "https://nope.example/r.git"} {
		_, err := p.check(context.Background(), Source{URL: u}, u)
		if !errors.Is(err, skills.ErrPermission) || !strings.Contains(err.Error(), "no public address") {
			t.Errorf("check of %s: %v, want refused for no public address", u, err)
		}
	}
}

// TestCloneRemotePolicy: under a policy, git follows no redirect (without
// one it does, as git does by default), and a host listed with http:// is
// read over http.
func TestCloneRemotePolicy(t *testing.T) {
	gittest.Require(t)
	root := t.TempDir()
	work := filepath.Join(t.TempDir(), "work")
	os.MkdirAll(work, 0o755)
	os.WriteFile(filepath.Join(work, "SKILL.md"), []byte("---\nname: r\ndescription: d\n---\n"), 0o644)
	gittest.Git(t, work, gittest.FixtureEnv, "init", "-q", "-b", "main")
	gittest.Git(t, work, gittest.FixtureEnv, "add", ".")
	gittest.Git(t, work, gittest.FixtureEnv, "commit", "-q", "-m", "one")
	if out, err := exec.Command("git", "clone", "-q", "--bare", work, filepath.Join(root, "r.git")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	base := gittest.Serve(t, root)
	var redirected atomic.Int32
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		http.Redirect(w, r, base+strings.TrimPrefix(r.URL.RequestURI(), "/"), http.StatusFound)
	}))
	t.Cleanup(redirector.Close)

	if _, err := Clone(context.Background(), Source{URL: redirector.URL + "/r.git"}, filepath.Join(t.TempDir(), "c"), CloneOptions{}); err != nil {
		t.Fatalf("control: git follows the redirect without a policy: %v", err)
	}
	hosts, err := ParseHosts(strings.TrimSuffix(base, "/") + "," + redirector.URL)
	if err != nil {
		t.Fatal(err)
	}
	policy := &RemotePolicy{Hosts: hosts, Plain: true}
	redirected.Store(0)
	_, err = Clone(context.Background(), Source{URL: redirector.URL + "/r.git"}, filepath.Join(t.TempDir(), "c"), CloneOptions{Remote: policy})
	if err == nil || redirected.Load() == 0 || strings.Contains(err.Error(), "(git:") {
		t.Fatalf("clone through a redirect under a policy: %v (asked %d times); want refused, without git's words", err, redirected.Load())
	}
	var ge *Error
	if !errors.As(err, &ge) || ge.Detail == "" {
		t.Fatalf("the refusal keeps git's words for the log: %#v", err)
	}
	if _, err := Clone(context.Background(), Source{URL: base + "r.git"}, filepath.Join(t.TempDir(), "c"), CloneOptions{Remote: policy}); err != nil {
		t.Fatalf("clone from a host listed with http://: %v", err)
	}
	policy.Hosts = []Host{{Name: "127.0.0.1"}} // https only
	if _, err := Clone(context.Background(), Source{URL: base + "r.git"}, filepath.Join(t.TempDir(), "c"), CloneOptions{Remote: policy}); !errors.Is(err, skills.ErrPermission) {
		t.Fatalf("clone over http from a host listed for https: %v, want ErrPermission", err)
	}
}
