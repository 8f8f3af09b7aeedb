// Package memlimit reads and sets the Go runtime's soft memory limit, the
// one the GOMEMLIMIT environment variable sets at start
// (runtime/debug.SetMemoryLimit). Near the limit the garbage collector runs
// more often instead of letting the heap grow to twice what is live, which
// bounds a process whose live data comes in bursts (the ingest workers'
// batches) without a smaller GOGC slowing it all the time. The variable,
// when set, always wins over a configured limit: it is the runtime's own
// setting, and an operator who sets it means it (docs/configuration.md).
package memlimit

import (
	"math"
	"os"
	"runtime/debug"
)

// EnvVar is the runtime's variable for the limit.
const EnvVar = "GOMEMLIMIT"

// Current returns the soft memory limit in bytes, and false when there is
// none (the runtime's default, math.MaxInt64).
func Current() (int64, bool) {
	l := debug.SetMemoryLimit(-1) // a negative value reads without changing it
	return l, l != math.MaxInt64
}

// Source tells where the limit in force came from.
type Source string

// Sources of the limit.
const (
	FromEnv     Source = "env " + EnvVar
	FromSetting Source = "setting"
	None        Source = "none"
)

// Apply sets the soft memory limit to limit bytes, unless GOMEMLIMIT is set
// (the runtime has applied it already), or limit is 0 or less (the limit
// stays as it is). It returns the limit in force afterwards and where it
// came from. The limit is the whole process's: in a process running
// several roles, the last one applied holds.
func Apply(limit int64) (int64, Source) {
	if os.Getenv(EnvVar) != "" {
		l, _ := Current()
		return l, FromEnv
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
		return limit, FromSetting
	}
	if l, ok := Current(); ok {
		return l, FromSetting
	}
	return math.MaxInt64, None
}
