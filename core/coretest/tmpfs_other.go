//go:build !linux

package coretest

import (
	"errors"
	"testing"
)

// SmallFS is Linux-only (tmpfs): elsewhere the test is skipped, or failed
// under CI.
func SmallFS(t testing.TB, size int64) string {
	t.Helper()
	Unavailable(t, "tmpfs mount", "", errors.New("tmpfs is Linux's"))
	return ""
}

// ResizeFS is Linux-only, as SmallFS.
func ResizeFS(t testing.TB, dir string, size int64) {
	t.Helper()
	t.Fatal("ResizeFS: tmpfs is Linux's")
}
