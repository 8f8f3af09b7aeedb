package cmd

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// On one machine a bench phase shares the CPUs with PostgreSQL, Redis and
// the broker, so what explains a rate is the CPU each of them used per
// message, not only this process's. The services' CPU is read from /proc
// (Linux) for local processes by command name; where /proc is missing, or
// the services run elsewhere, nothing is reported for them.

// benchServices are the command names whose CPU the benches report.
var benchServices = []string{"postgres", "redis-server", "mosquitto"}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports, and not readable without cgo.
const clockTicks = 100

type procTick struct {
	name  string
	ticks uint64
}

// procSample is the CPU ticks so far of each process named in a sample.
type procSample map[int]procTick

// sampleProcs reads the user+system CPU ticks of every process whose
// command name is in names, this process excepted. It returns nil where
// /proc cannot be read.
func sampleProcs(names []string) procSample {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	s := procSample{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited since the listing
		}
		name, ticks, ok := parseProcStat(data)
		if ok && slices.Contains(names, name) {
			s[pid] = procTick{name: name, ticks: ticks}
		}
	}
	return s
}

// parseProcStat returns the command name and utime+stime of a
// /proc/PID/stat line. The name is found by the last ')', because it may
// itself hold spaces and parentheses.
func parseProcStat(data []byte) (name string, ticks uint64, ok bool) {
	open, closing := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || closing < open {
		return "", 0, false
	}
	// After the name: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime ...
	f := strings.Fields(string(data[closing+1:]))
	if len(f) < 13 {
		return "", 0, false
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return string(data[open+1 : closing]), utime + stime, true
}

// cpuSecondsSince returns the CPU seconds each command name used from
// before to s. A process that started meanwhile counts whole; one that
// exited meanwhile is missing (a PostgreSQL backend closed during the phase,
// which the benches' pooled connections do not do).
func (s procSample) cpuSecondsSince(before procSample) map[string]float64 {
	if s == nil || before == nil {
		return nil
	}
	out := map[string]float64{}
	for pid, now := range s {
		t := now.ticks
		if b, ok := before[pid]; ok && b.name == now.name && b.ticks <= t {
			t -= b.ticks
		}
		out[now.name] += float64(t) / clockTicks
	}
	return out
}

// formatCPUPerMessage renders this process's and the services' CPU per
// message, for example "edgeplat 150 µs, postgres 172 µs, redis-server 29 µs".
func formatCPUPerMessage(self float64, services map[string]float64, messages float64) string {
	if messages <= 0 {
		return ""
	}
	us := func(sec float64) string { return fmt.Sprintf("%.0f µs", sec/messages*1e6) }
	parts := []string{"edgeplat " + us(self)}
	total := self
	for _, name := range benchServices {
		if sec, ok := services[name]; ok {
			parts = append(parts, name+" "+us(sec))
			total += sec
		}
	}
	if len(parts) > 1 {
		parts = append(parts, "total "+us(total))
	}
	return strings.Join(parts, ", ")
}
