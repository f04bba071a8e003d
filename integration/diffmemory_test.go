package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// writeRandomText writes about size bytes of random text, lines of 1 to
// 2,000 characters, to path; with every set, every every-th line of it is
// replaced (the same text otherwise: r is seeded alike for both versions).
func writeRandomText(t testing.TB, path string, seed uint64, size, every int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	const letters = "abcdefghijklmnopqrstuvwxyz     "
	w := bufio.NewWriter(nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Reset(f)
	line := make([]byte, 0, 2001)
	for n, i := 0, 0; n < size-2001; i++ {
		line = line[:0]
		for range 1 + r.IntN(2000) {
			line = append(line, letters[r.IntN(len(letters))])
		}
		n += len(line) + 1 // the same lines in both versions
		if every > 0 && i%every == every/2 {
			line = append(line[:0], "changed line "+strconv.Itoa(i)...)
		}
		line = append(line, '\n')
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestConcurrentDiffsAreBounded: many clients asking at once for the diff
// of a skill whose two versions are 60 files of 1 MiB of text each: the
// comparisons together hold at most --diff-memory (256 MiB) as their
// files' sizes say, those that cannot be granted it within 3 s are answered
// 503 busy with Retry-After, and every answer given is the whole diff.
// With -v it prints the daemon's resident memory before and at its peak
// (VmHWM). SKILLFS_DIFF_CLIENTS sets how many ask (default 50).
func TestConcurrentDiffsAreBounded(t *testing.T) {
	clients := 50
	if v, err := strconv.Atoi(os.Getenv("SKILLFS_DIFF_CLIENTS")); err == nil && v > 0 {
		clients = v
	}
	const files, size = 60, 1 << 20
	e := newEnv(t)
	d := e.serve("--examples=false")
	src := filepath.Join(t.TempDir(), "big")
	writeSkill(t, src, "name: big\ndescription: sixty files of a mebibyte", nil)
	for _, every := range []int{0, 15} { // some 70 long lines changed a file: diffs of 500 KiB
		for i := range files {
			writeRandomText(t, filepath.Join(src, fmt.Sprintf("part%02d.txt", i)), uint64(i), size, every)
		}
		e.mustImport(src)
	}
	pid := d.cmd.Process.Pid
	baseRSS, baseHWM := vmKB(pid, "VmRSS"), vmKB(pid, "VmHWM")

	sock := filepath.Join(e.home, "skillfs.sock")
	hc := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", sock)
		},
	}}
	var ok, busy atomic.Int32
	var mu sync.Mutex
	var bodies []string
	var failures []string
	stopSampling := sampleRSS(pid, 20*time.Millisecond)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := hc.Get("http://skillfs/v1/skills/big/diff")
			if err != nil {
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failures = append(failures, err.Error())
			case resp.StatusCode == http.StatusOK:
				ok.Add(1)
				bodies = append(bodies, string(body))
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" && strings.Contains(string(body), `"busy"`):
				busy.Add(1)
			default:
				failures = append(failures, fmt.Sprintf("%s: %.200s", resp.Status, body))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	peak := stopSampling()
	hwm := vmKB(pid, "VmHWM")
	t.Logf("%d concurrent diffs of %d files of 1 MiB in %v: %d answered, %d busy (503 with Retry-After); daemon RSS %d MiB before, sampled peak %d MiB, VmHWM %d MiB (%d before)",
		clients, files, took.Round(time.Millisecond), ok.Load(), busy.Load(), baseRSS>>10, peak>>10, hwm>>10, baseHWM>>10)
	if len(failures) > 0 {
		t.Fatalf("%d diffs failed otherwise: %q", len(failures), failures[0])
	}
	if ok.Load() == 0 {
		t.Fatal("no diff was answered")
	}
	var diff struct {
		Files []struct {
			Path, Diff, Note string
			Added, Removed   int
		}
		DiffStat struct {
			FilesChanged int `json:"files_changed"`
		} `json:"diffstat"`
	}
	if err := json.Unmarshal([]byte(bodies[0]), &diff); err != nil {
		t.Fatalf("decode a diff: %v", err)
	}
	shown := 0
	for _, f := range diff.Files {
		if f.Diff != "" {
			shown++
		}
	}
	t.Logf("each answer: %d bytes, %d files changed, %d with their diff (first: %+v)", len(bodies[0]), diff.DiffStat.FilesChanged, shown, diff.Files[0].Note)
	if diff.DiffStat.FilesChanged == 0 || shown == 0 {
		t.Errorf("the diff shows nothing: %d files changed, %d diffs", diff.DiffStat.FilesChanged, shown)
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Fatal("two answers to the same diff differ")
		}
	}
	// The command line compares in its own process, as the daemon does one
	// request: its peak is printed for the text and the JSON, measured by
	// GNU time where it is installed (the rusage of a child of this test
	// counts the test's own memory, which the child shares until it execs).
	if gnuTime, err := exec.LookPath("/usr/bin/time"); err == nil {
		for _, args := range [][]string{{"skill", "diff", "big"}, {"skill", "diff", "big", "--json"}} {
			cmd := exec.Command(gnuTime, append([]string{"-f", "%M", binary, "--home", e.home}, args...)...)
			cmd.Env = e.environ(nil)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %v: %s", args, err, stderr.String())
			}
			kb, _ := strconv.Atoi(strings.TrimSpace(stderr.String()))
			t.Logf("%s: %d bytes out, peak RSS %d MiB", strings.Join(args, " "), len(out), kb>>10)
		}
	}
	// What the comparisons hold is bounded by --diff-memory; the rest is
	// the runtime's and the collector's slack.
	if grew := hwm - baseRSS; grew > 4*256<<10 {
		t.Errorf("the daemon's peak grew by %d MiB over %d MiB before, past four times --diff-memory", grew>>10, baseRSS>>10)
	}
}
