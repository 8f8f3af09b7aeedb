package sysinfo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseExecutablePages asks the kernel to drop the resident pages of this
// process's executable image (its read-only text and data mappings), and
// returns how many bytes of mappings it covered.
//
// Why: the kernel maps file pages 64 KiB at a time around each fault, so
// package initialisation, which runs code scattered over the whole binary
// once, leaves some 25 MiB of the executable resident that the agent never
// touches again. Those pages are clean copies of the file, which the
// kernel would reclaim under memory pressure anyway; dropping them once
// the agent runs makes its resident set show what it really uses, which is
// what a device's memory budget cares about. Pages the agent does use fault
// back in on their next access. MADV_PAGEOUT needs Linux 5.4; on an older
// kernel the call fails and nothing changes.
//
// Released mappings are then advised MADV_RANDOM: a page the agent uses
// again is read back alone, instead of with the 128 KiB of read-ahead
// around it that the kernel would also map, 64 KiB of it, into the
// agent. Without it the periodic work of the agent (garbage collection
// reading the function tables of the goroutines' frames, the store's
// SQL, the services' timers) brought 17 MB of the binary back within
// half a minute of each release; with it 9 MB (docs/benchmarks.md).
func ReleaseExecutablePages() (uint64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("find executable: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("read mappings: %w", err)
	}
	defer f.Close()
	return releaseMappings(f, exe, func(lo, hi uintptr) error {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_PAGEOUT); errno != 0 {
			return errno
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_RANDOM); errno != 0 {
			return fmt.Errorf("no read-ahead: %w", errno)
		}
		return nil
	})
}

// releaseMappings applies advise to every read-only mapping of path listed
// in a /proc/<pid>/maps stream.
func releaseMappings(maps io.Reader, path string, advise func(lo, hi uintptr) error) (uint64, error) {
	var total uint64
	var errs []error
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// address perms offset dev inode path
		if len(fs) < 6 || fs[5] != path || strings.Contains(fs[1], "w") {
			continue
		}
		var lo, hi uintptr
		if _, err := fmt.Sscanf(fs[0], "%x-%x", &lo, &hi); err != nil || hi <= lo {
			continue
		}
		if err := advise(lo, hi); err != nil {
			errs = append(errs, fmt.Errorf("madvise %s: %w", fs[0], err))
			continue
		}
		total += uint64(hi - lo)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("read mappings: %w", err))
	}
	return total, errors.Join(errs...)
}
