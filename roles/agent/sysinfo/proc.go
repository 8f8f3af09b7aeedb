package sysinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// cpuTimes holds the aggregate "cpu" line of /proc/stat in clock ticks.
type cpuTimes struct {
	busy  uint64
	total uint64
}

// parseCPUStat reads the aggregate "cpu" line of /proc/stat. Idle and
// iowait count as not busy: a device waiting on a slow SD card is not
// using its CPU. guest and guest_nice are left out of the total because
// the kernel already counts them inside user and nice.
func parseCPUStat(data []byte) (cpuTimes, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "cpu" {
			continue
		}
		// Kernels before 2.6.11 have fewer columns; user..idle are always there.
		if len(fields) < 5 {
			return cpuTimes{}, fmt.Errorf("cpu line has %d fields, want at least 5", len(fields))
		}
		var vals [8]uint64
		for i := 1; i < len(fields) && i <= len(vals); i++ {
			v, err := strconv.ParseUint(fields[i], 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("cpu field %d: %w", i, err)
			}
			vals[i-1] = v
		}
		var t cpuTimes
		for _, v := range vals {
			t.total += v
		}
		idle := vals[3] + vals[4]
		t.busy = t.total - idle
		return t, nil
	}
	if err := sc.Err(); err != nil {
		return cpuTimes{}, err
	}
	return cpuTimes{}, errors.New("no aggregate cpu line")
}

// meminfo holds the /proc/meminfo figures the dashboard needs, in bytes.
type meminfo struct {
	total     uint64
	available uint64
}

// parseMeminfo reads MemTotal and MemAvailable. Kernels before 3.14 lack
// MemAvailable; for them MemFree+Buffers+Cached is the usual estimate.
func parseMeminfo(data []byte) (meminfo, error) {
	vals := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch key {
		case "MemTotal", "MemAvailable", "MemFree", "Buffers", "Cached":
		default:
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return meminfo{}, fmt.Errorf("%s: no value", key)
		}
		v, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return meminfo{}, fmt.Errorf("%s: %w", key, err)
		}
		if len(fields) > 1 && fields[1] == "kB" {
			v *= 1024
		}
		vals[key] = v
	}
	if err := sc.Err(); err != nil {
		return meminfo{}, err
	}
	total, ok := vals["MemTotal"]
	if !ok {
		return meminfo{}, errors.New("no MemTotal")
	}
	avail, ok := vals["MemAvailable"]
	if !ok {
		avail = vals["MemFree"] + vals["Buffers"] + vals["Cached"]
	}
	// Guards the subtraction used = total - available against odd kernels.
	avail = min(avail, total)
	return meminfo{total: total, available: avail}, nil
}

// netCounters maps interface name to cumulative rx and tx bytes.
type netCounters map[string][2]uint64

// parseNetDev reads /proc/net/dev, skipping the loopback interface so
// local API traffic does not show up as network throughput.
func parseNetDev(data []byte) (netCounters, error) {
	out := netCounters{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// Header lines contain '|'; interface names cannot contain ':'.
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.Contains(name, "|") {
			continue
		}
		name = strings.TrimSpace(name)
		if name == "lo" {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) < 9 {
			return nil, fmt.Errorf("interface %s: %d fields, want at least 9", name, len(fields))
		}
		rx, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("interface %s rx bytes: %w", name, err)
		}
		tx, err := strconv.ParseUint(fields[8], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("interface %s tx bytes: %w", name, err)
		}
		out[name] = [2]uint64{rx, tx}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseUptime returns the first figure of /proc/uptime in whole seconds.
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

// parsePidStat returns utime and stime (clock ticks) from /proc/<pid>/stat.
// The command name sits in parentheses and may itself contain spaces and
// parentheses, so the fixed fields start after the LAST ')'.
func parsePidStat(data []byte) (utime, stime uint64, err error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, 0, errors.New("no ')' closing the command name")
	}
	// fields[0] is field 3 (state) in proc(5) numbering; utime is 14, stime 15.
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 13", len(fields))
	}
	utime, err = strconv.ParseUint(fields[11], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	stime, err = strconv.ParseUint(fields[12], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, nil
}

// parseStatm returns the resident set size in pages (second field).
func parseStatm(data []byte) (uint64, error) {
	fields := strings.Fields(string(data))
	if len(fields) < 2 {
		return 0, fmt.Errorf("%d fields, want at least 2", len(fields))
	}
	v, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resident: %w", err)
	}
	return v, nil
}
