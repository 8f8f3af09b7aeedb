package coretest

import "syscall"

// serverProcAttr makes a private server die with the test binary, so a
// test killed by its timeout or a closed pipe leaves no broker behind.
// Pdeathsig fires when the thread that started the child exits; Go keeps
// the threads of unlocked goroutines, so in practice that is the process.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
