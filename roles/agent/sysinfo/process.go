package sysinfo

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"unsafe"
)

// ProcessStat is the footprint of one process.
type ProcessStat struct {
	RSSBytes   uint64  // resident set size
	CPUSeconds float64 // user+system CPU time since the process started
}

// ReadProcess reads the footprint of process pid under procRoot ("/proc"
// normally). pid <= 0 means the calling process ("self"), which lets the
// agent report itself and a benchmark measure another process by pid.
func ReadProcess(procRoot string, pid int) (ProcessStat, error) {
	dir := filepath.Join(procRoot, "self")
	if pid > 0 {
		dir = filepath.Join(procRoot, strconv.Itoa(pid))
	}
	rss, err := readRSS(filepath.Join(dir, "statm"))
	if err != nil {
		return ProcessStat{}, err
	}
	cpu, err := readCPUSeconds(filepath.Join(dir, "stat"))
	if err != nil {
		return ProcessStat{}, err
	}
	return ProcessStat{RSSBytes: rss, CPUSeconds: cpu}, nil
}

// ProcessRSS returns the resident set size of the calling process in bytes.
func ProcessRSS() (uint64, error) {
	return readRSS("/proc/self/statm")
}

// ProcessCPU returns the cumulative user+system CPU seconds of the calling
// process.
func ProcessCPU() (float64, error) {
	return readCPUSeconds("/proc/self/stat")
}

// readRSS uses statm rather than status because it is one short line of
// numbers; pages convert with this machine's page size, which is right for
// any process on the same kernel.
func readRSS(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("sysinfo: %w", err)
	}
	pages, err := parseStatm(data)
	if err != nil {
		return 0, fmt.Errorf("sysinfo: parse %s: %w", path, err)
	}
	return pages * uint64(os.Getpagesize()), nil
}

func readCPUSeconds(path string) (float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("sysinfo: %w", err)
	}
	utime, stime, err := parsePidStat(data)
	if err != nil {
		return 0, fmt.Errorf("sysinfo: parse %s: %w", path, err)
	}
	return float64(utime+stime) / float64(clockTicks()), nil
}

// atClkTck is the auxiliary-vector key carrying sysconf(_SC_CLK_TCK).
const atClkTck = 17

// defaultClockTicks is USER_HZ on every mainstream Linux architecture; it
// is used when the auxiliary vector cannot be read (e.g. a locked-down
// /proc).
const defaultClockTicks = 100

var clockTicks = sync.OnceValue(func() uint64 {
	data, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return defaultClockTicks
	}
	if hz := auxvValue(data, atClkTck); hz > 0 {
		return hz
	}
	return defaultClockTicks
})

// auxvValue finds key in a native-endian, native-word-size auxiliary
// vector, the layout the kernel hands to every process. It returns 0 when
// the key is absent.
func auxvValue(data []byte, key uint64) uint64 {
	word := int(unsafe.Sizeof(uintptr(0)))
	read := func(b []byte) uint64 {
		if word == 8 {
			return binary.NativeEndian.Uint64(b)
		}
		return uint64(binary.NativeEndian.Uint32(b))
	}
	for i := 0; i+2*word <= len(data); i += 2 * word {
		k := read(data[i:])
		if k == 0 { // AT_NULL ends the vector
			break
		}
		if k == key {
			return read(data[i+word:])
		}
	}
	return 0
}
