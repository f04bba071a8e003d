package daemon

import (
	"strings"
	"testing"
)

func TestParseMountDev(t *testing.T) {
	const info = `22 1 0:21 / / rw - ext4 /dev/sda1 rw
30 22 0:50 / /var/lib/skillfs/mnt ro - fuse.skillfs skillfs ro
31 22 0:51 /s1 /home/gem/my\040skills ro - fuse.skillfs skillfs ro
32 31 0:52 /s2 /home/gem/my\040skills ro - fuse.skillfs skillfs ro
short line
`
	for _, tc := range []struct {
		path, dev string
		found     bool
	}{
		{"/var/lib/skillfs/mnt", "0:50", true},
		{"/home/gem/my skills", "0:52", true}, // the top one of two
		{"/home/gem/my\\040skills", "", false},
		{"/nothing", "", false},
	} {
		dev, found, err := parseMountDev(strings.NewReader(info), tc.path)
		if err != nil || dev != tc.dev || found != tc.found {
			t.Errorf("%q: %q %t %v, want %q %t", tc.path, dev, found, err, tc.dev, tc.found)
		}
	}
	// This process's own root is mounted.
	if _, found, err := mountDevAt("self", "/"); err != nil || !found {
		t.Fatalf("mountDevAt(self, /): %t, %v", found, err)
	}
}

// FuzzParseMountDev: any mountinfo is read without a panic, and a device
// found is a field of a line of it.
func FuzzParseMountDev(f *testing.F) {
	f.Add("30 22 0:50 / /mnt ro - fuse.skillfs skillfs ro\n", "/mnt")
	f.Add("31 22 0:51 /s /a\\040b ro - x y z\n", "/a b")
	f.Add("1 2 3 4 \\0 6\n", "\x00")
	f.Fuzz(func(t *testing.T, info, path string) {
		dev, found, err := parseMountDev(strings.NewReader(info), path)
		if err != nil || !found {
			return
		}
		if !strings.Contains(info, " "+dev+" ") {
			t.Fatalf("device %q is not a field of %q", dev, info)
		}
	})
}
