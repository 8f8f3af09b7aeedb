package coretest

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// SmallFS mounts a tmpfs of size bytes on a temporary directory and
// unmounts it when the test ends, for tests that must fill a file system
// without touching the machine's disks. It needs root (CAP_SYS_ADMIN);
// without it the test is skipped, or failed under CI like a missing
// service.
func SmallFS(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		Unavailable(t, "tmpfs mount", dir, errors.New("mounting needs root"))
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, tmpfsOptions(size)); err != nil {
		Unavailable(t, "tmpfs mount", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// ResizeFS gives the tmpfs SmallFS mounted on dir a new size, as space
// returning to (or leaving) a full disk.
func ResizeFS(t testing.TB, dir string, size int64) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, tmpfsOptions(size)); err != nil {
		t.Fatalf("resize tmpfs %s to %d bytes: %v", dir, size, err)
	}
}

func tmpfsOptions(size int64) string {
	return "size=" + strconv.FormatInt(size, 10) + ",mode=0700"
}
