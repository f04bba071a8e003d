package daemon

import (
	"testing"
	"time"

	skfs "skillfs/fs"
	"skillfs/fs/fusetest"
)

// testFsName is the source of the mounts the tests make, and of every bind
// of them, so TestMain can find what a test left mounted; this process's
// own, since packages' tests (and other runs) go on at the same time.
var testFsName = fusetest.FsName("skillfs-daemon-test")

func TestMain(m *testing.M) {
	fusetest.Main(m, func() ([]string, error) { return skfs.MountsOf(testFsName) })
}

// hang bounds every wait for something that must happen: far above the
// limits under test, so only a hang reaches it.
const hang = 10 * time.Second
