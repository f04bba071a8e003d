package bind

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"skillfs/skills"
)

// TestParseStatus: the filesystem ids (the fourth of each line), the groups
// and the effective capabilities are read; a status without them, or with
// a field that is no id, is refused.
func TestParseStatus(t *testing.T) {
	status := "Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1000\t1000\t1002\nGid:\t1000\t1000\t1000\t1003\n" +
		"FDSize:\t64\nGroups:\t4 24 27 \nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n"
	c, err := parseStatus([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	want := &creds{uid: 1002, gid: 1003, groups: []int{4, 24, 27}, capEff: 0x1ffffffffff}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("parsed %+v, want %+v", c, want)
	}
	if c, err := parseStatus([]byte("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\nCapEff:\t0000000000000000\n")); err != nil ||
		len(c.groups) != 0 || c.capEff != 0 {
		t.Fatalf("no groups: %+v, %v", c, err)
	}
	for name, bad := range map[string]string{
		"no uid":          "Gid:\t1 1 1 1\nCapEff:\t0\n",
		"no gid":          "Uid:\t1 1 1 1\nCapEff:\t0\n",
		"no caps":         "Uid:\t1 1 1 1\nGid:\t1 1 1 1\n",
		"three ids":       "Uid:\t1 1 1\nGid:\t1 1 1 1\nCapEff:\t0\n",
		"a negative id":   "Uid:\t1 1 1 -1\nGid:\t1 1 1 1\nCapEff:\t0\n",
		"no id":           "Uid:\t1 1 1 4294967295\nGid:\t1 1 1 1\nCapEff:\t0\n",
		"an id too large": "Uid:\t1 1 1 4294967296\nGid:\t1 1 1 1\nCapEff:\t0\n",
		"a bad group":     "Uid:\t1 1 1 1\nGid:\t1 1 1 1\nGroups:\t1 x\nCapEff:\t0\n",
		"a bad mask":      "Uid:\t1 1 1 1\nGid:\t1 1 1 1\nCapEff:\tzz\n",
		"empty":           "",
	} {
		if c, err := parseStatus([]byte(bad)); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("%s: %+v, %v; want ErrInvalid", name, c, err)
		}
	}
	self, err := credsOf(os.Getpid())
	if err != nil || self.uid != os.Geteuid() || self.gid != os.Getegid() {
		t.Fatalf("own credentials %+v, %v", self, err)
	}
}

// FuzzParseStatus: any status file is parsed or refused, never a panic,
// and what is parsed holds only real ids.
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t1000 \nCapEff:\t0000000000000000\n"))
	f.Add([]byte("Uid: 0 0 0 0\nGid: 0 0 0 0\nCapEff: ffffffffffffffff\nGroups:\n"))
	f.Add([]byte("Uid:\n:\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseStatus(data)
		if err != nil {
			if !errors.Is(err, skills.ErrInvalid) {
				t.Fatalf("refused without ErrInvalid: %v", err)
			}
			return
		}
		for _, id := range append([]int{c.uid, c.gid}, c.groups...) {
			if id < 0 || id >= 1<<32-1 {
				t.Fatalf("parsed id %d", id)
			}
		}
	})
}
