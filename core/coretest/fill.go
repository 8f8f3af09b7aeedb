package coretest

import (
	"os"
	"path/filepath"
	"testing"
)

// FillFS writes a file of zeros into dir until the file system is full and
// returns its path; removing it gives the space back.
func FillFS(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create filler: %v", err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	// The last write may have been short: fill the block it left.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			return path
		}
	}
}
