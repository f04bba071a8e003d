package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// pluginFlags are skillfs-csi's flags, as the binary itself lists them.
var pluginFlags flagSet

var pluginOnce struct {
	sync.Once
	err error
}

// needPluginFlags builds skillfs-csi as the image does (CGO_ENABLED=0) and
// reads its flags from its --help, once per test binary.
func needPluginFlags(t testing.TB) {
	t.Helper()
	pluginOnce.Do(func() { pluginFlags, pluginOnce.err = buildPluginFlags() })
	if pluginOnce.err != nil {
		t.Fatal(pluginOnce.err)
	}
}

func buildPluginFlags() (flagSet, error) {
	dir, err := os.MkdirTemp("", "skillfs-csi-flags")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "skillfs-csi")
	build := exec.Command("go", "build", "-o", bin, "skillfs/cmd/skillfs-csi")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("CGO_ENABLED=0 go build ./cmd/skillfs-csi: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		return nil, err
	}
	flags := parseHelp(string(out))
	if _, ok := flags["endpoint"]; !ok {
		return nil, fmt.Errorf("skillfs-csi --help lists no --endpoint:\n%s", out)
	}
	return flags, nil
}

var helpLine = regexp.MustCompile(`^\s+(?:-[a-zA-Z], )?--?([a-z0-9][a-z0-9-]*)(?: (\S+))?(?:\s\s|\t|$)`)

// parseHelp reads the flags of a help text as Go's flag package or pflag
// print it: a line per flag, its name, then the kind of its value unless it
// is a switch.
func parseHelp(help string) flagSet {
	flags := flagSet{}
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		if m := helpLine.FindStringSubmatch(sc.Text()); m != nil {
			flags[m[1]] = flag{arg: m[2]}
		}
	}
	return flags
}
