package bench

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/procfs"
)

// On one machine a bench phase shares the CPUs with PostgreSQL, Redis and
// the broker, so what explains a rate is the CPU each of them used per
// message, not only this process's. The services' CPU is read from /proc
// (Linux, with github.com/prometheus/procfs) for local processes by
// command name; where /proc is missing, or
// the services run elsewhere, nothing is reported for them.

// benchServices are the command names whose CPU the benches report.
var benchServices = []string{"postgres", "redis-server", "mosquitto"}

type procTick struct {
	name    string
	seconds float64
}

// procSample is the CPU seconds so far of each process named in a sample.
type procSample map[int]procTick

// sampleProcs reads the user+system CPU seconds of every process whose
// command name is in names, this process excepted, through procfs. It
// returns nil where /proc cannot be read.
func sampleProcs(names []string) procSample {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	s := procSample{}
	for _, p := range procs {
		if p.PID == self {
			continue
		}
		st, err := p.Stat()
		if err != nil {
			continue // exited since the listing
		}
		if slices.Contains(names, st.Comm) {
			s[p.PID] = procTick{name: st.Comm, seconds: st.CPUTime()}
		}
	}
	return s
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
		t := now.seconds
		if b, ok := before[pid]; ok && b.name == now.name && b.seconds <= t {
			t -= b.seconds
		}
		out[now.name] += t
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
