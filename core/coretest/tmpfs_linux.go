package coretest

import (
	"os"
	"strconv"
	"syscall"
	"testing"
)

// SmallFS mounts a tmpfs of size bytes on a temporary directory and
// unmounts it when the test ends, for tests that must fill a file system
// without touching the machine's disks. It needs root (CAP_SYS_ADMIN); the
// second result is false when the mount is refused, and the caller then
// injects the failure another way or skips.
func SmallFS(t testing.TB, size int64) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		return "", false
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)+",mode=0700"); err != nil {
		t.Logf("mount a %d-byte tmpfs on %s: %v", size, dir, err)
		return "", false
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
	return dir, true
}
