package coretest

import (
	"os/exec"
	"strconv"
	"testing"
)

// SystemPython is Debian's interpreter, the one python3-pymodbus is
// installed for.
const SystemPython = "/usr/bin/python3"

// Pymodbus runs the Modbus adapter's test server (script is the path of
// roles/agent/adapters/modbus/testdata/server.py from the test's
// package) on 127.0.0.1:port with flags, and waits until it accepts
// connections. With the generated units of --units and --registers,
// holding and input register i of unit u hold u*1000+i.
func Pymodbus(t testing.TB, script string, port int, flags ...string) *Process {
	t.Helper()
	if err := exec.Command(SystemPython, "-c", "import pymodbus").Run(); err != nil {
		Unavailable(t, "python3-pymodbus", SystemPython, err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p := NewProcess(t, SystemPython, append([]string{script, "--port", strconv.Itoa(port)}, flags...)...)
	p.Ready = func() error { return Dialable(addr) }
	p.Start()
	return p
}
