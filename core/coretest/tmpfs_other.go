//go:build !linux

package coretest

import "testing"

// SmallFS is Linux-only (tmpfs); elsewhere it reports false so the caller
// injects the failure another way or skips.
func SmallFS(t testing.TB, size int64) (string, bool) { return "", false }
