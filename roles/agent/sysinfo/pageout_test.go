package sysinfo

import (
	"strings"
	"testing"
)

func TestReleaseMappingsPicksReadOnlyImage(t *testing.T) {
	maps := `00400000-0184a000 r-xp 00000000 103:02 123 /usr/bin/edgeplat
0184a000-02ddf000 r--p 0144a000 103:02 123 /usr/bin/edgeplat
02ddf000-02ed3000 rw-p 029df000 103:02 123 /usr/bin/edgeplat
02ed3000-03000000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--p 00000000 103:02 9 /usr/lib/other.so
7ffd000-7ffe000 rw-p 00000000 00:00 0 [stack]
`
	var got []uintptr
	total, err := releaseMappings(strings.NewReader(maps), "/usr/bin/edgeplat", func(lo, hi uintptr) error {
		got = append(got, lo, hi)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []uintptr{0x400000, 0x184a000, 0x184a000, 0x2ddf000}
	if len(got) != len(want) {
		t.Fatalf("advised %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("advised %x, want %x", got, want)
		}
	}
	if total != 0x2ddf000-0x400000 {
		t.Fatalf("total %d", total)
	}
}

func TestReleaseExecutablePagesLive(t *testing.T) {
	before, err := ReadProcess("/proc", 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ReleaseExecutablePages()
	if err != nil {
		t.Skipf("MADV_PAGEOUT unavailable on this kernel (Linux 5.4+): %v", err)
	}
	after, err := ReadProcess("/proc", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no executable mapping found in /proc/self/maps")
	}
	t.Logf("released %d MiB of mappings; RSS %d -> %d KiB", n>>20, before.RSSBytes>>10, after.RSSBytes>>10)
}
