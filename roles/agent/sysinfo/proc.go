package sysinfo

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// procfs parses the files; what is left here is what the dashboard makes
// of them.

// guard runs one procfs read and turns a panic into an error. procfs
// indexes fields without checking how many a line has: a malformed line
// in /proc/meminfo (v0.16.1 up to v0.22) or /proc/net/dev (still in
// v0.23.0) panics, as FuzzParsers found. A kernel writes no such line, but
// a truncated read or an odd /proc must cost the dashboard a figure, not
// the agent its process.
func guard[T any](read func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed content (procfs: %v)", r)
		}
	}()
	return read()
}

// cpuTimes holds the aggregate CPU times of /proc/stat, in seconds.
type cpuTimes struct {
	busy  float64
	total float64
}

// cpuTimesOf: idle and iowait count as not busy (a device waiting on a
// slow SD card is not using its CPU); guest and guest_nice are left out of
// the total because the kernel already counts them inside user and nice.
func cpuTimesOf(c procfs.CPUStat) cpuTimes {
	total := c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
	return cpuTimes{total: total, busy: total - c.Idle - c.Iowait}
}

// meminfo holds the /proc/meminfo figures the dashboard needs, in bytes.
type meminfo struct {
	total     uint64
	available uint64
}

// meminfoOf takes MemTotal and MemAvailable. Kernels before 3.14 lack
// MemAvailable; for them MemFree+Buffers+Cached is the usual estimate.
func meminfoOf(m procfs.Meminfo) (meminfo, error) {
	if m.MemTotalBytes == nil {
		return meminfo{}, errors.New("no MemTotal")
	}
	total := *m.MemTotalBytes
	var avail uint64
	if m.MemAvailableBytes != nil {
		avail = *m.MemAvailableBytes
	} else {
		for _, v := range []*uint64{m.MemFreeBytes, m.BuffersBytes, m.CachedBytes} {
			if v != nil {
				avail += *v
			}
		}
	}
	// Guards the subtraction used = total - available against odd kernels.
	avail = min(avail, total)
	return meminfo{total: total, available: avail}, nil
}

// netCounters maps interface name to cumulative rx and tx bytes.
type netCounters map[string][2]uint64

// netCountersOf skips the loopback interface so local API traffic does not
// show up as network throughput.
func netCountersOf(nd procfs.NetDev) netCounters {
	out := netCounters{}
	for name, l := range nd {
		if name == "lo" {
			continue
		}
		out[name] = [2]uint64{l.RxBytes, l.TxBytes}
	}
	return out
}

// parseUptime returns the first figure of /proc/uptime in whole seconds
// (procfs has no reader for this file).
func parseUptime(data []byte) (int64, error) {
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0, errors.New("empty")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, fmt.Errorf("uptime: %w", err)
	}
	if v < 0 {
		return 0, fmt.Errorf("negative uptime %q", fields[0])
	}
	return int64(v), nil
}
