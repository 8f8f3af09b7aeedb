package sysinfo

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/prometheus/procfs"
)

// ProcessStat is the footprint of one process.
type ProcessStat struct {
	RSSBytes   uint64  // resident set size
	CPUSeconds float64 // user+system CPU time since the process started
}

// ReadProcess reads the footprint of process pid under procRoot ("/proc"
// normally) from its stat file. pid <= 0 means the calling process
// ("self"), which lets the agent report itself and a benchmark measure
// another process by pid.
func ReadProcess(procRoot string, pid int) (ProcessStat, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return ProcessStat{}, fmt.Errorf("sysinfo: %w", err)
	}
	name := "self"
	var p procfs.Proc
	if pid > 0 {
		name = strconv.Itoa(pid)
		p, err = fs.Proc(pid)
	} else {
		p, err = fs.Self()
	}
	if err != nil {
		return ProcessStat{}, fmt.Errorf("sysinfo: process %s under %s: %w", name, procRoot, err)
	}
	st, err := guard(p.Stat)
	if err != nil {
		return ProcessStat{}, fmt.Errorf("sysinfo: read %s: %w", filepath.Join(procRoot, name, "stat"), err)
	}
	// procfs converts ticks with USER_HZ 100, the value on every Linux
	// architecture Go supports.
	return ProcessStat{RSSBytes: uint64(st.ResidentMemory()), CPUSeconds: st.CPUTime()}, nil
}

// ProcessRSS returns the resident set size of the calling process in bytes.
func ProcessRSS() (uint64, error) {
	ps, err := ReadProcess(procfs.DefaultMountPoint, 0)
	return ps.RSSBytes, err
}

// ProcessCPU returns the cumulative user+system CPU seconds of the calling
// process.
func ProcessCPU() (float64, error) {
	ps, err := ReadProcess(procfs.DefaultMountPoint, 0)
	return ps.CPUSeconds, err
}
