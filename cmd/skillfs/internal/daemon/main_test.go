package daemon

import (
	"testing"

	skfs "skillfs/fs"
	"skillfs/internal/fusetest"
)

// testFsName is the source of the mounts the tests make, and of every bind
// of them, so TestMain can find what a test left mounted; its own, not
// package fs's, since packages' tests run at the same time.
const testFsName = "skillfs-daemon-test"

func TestMain(m *testing.M) {
	fusetest.Main(m, func() ([]string, error) { return skfs.MountsOf(testFsName) })
}
