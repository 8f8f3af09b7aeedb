package bacnet

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// npmPackage is the third-party BACnet stack testdata/device.js runs on.
const npmPackage = "@bacnet-js/client"

// nodeModules finds @bacnet-js/client where the build machines install it,
// $EDGEPLAT_NPM_CACHE (default ~/.cache/edgeplat-npm)/node_modules; the
// test skips without node or the package, and fails under CI.
func nodeModules(t *testing.T) (node, mods string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test; skipped with -short")
	}
	return coretest.NodePackage(t, npmPackage)
}

// device is testdata/device.js running as a child process.
type device struct {
	*coretest.Process
	port     int
	instance int
}

// startDevice runs device.js on a free UDP port of 127.0.0.1 with flags
// (--rpm reject, --bbmd, ...) and waits for its READY line.
func startDevice(t *testing.T, flags ...string) *device {
	t.Helper()
	node, mods := nodeModules(t)
	d := &device{port: coretest.FreeUDPPort(t), instance: 1234}
	args := append([]string{"testdata/device.js", "--port", strconv.Itoa(d.port), "--device", strconv.Itoa(d.instance)}, flags...)
	d.Process = coretest.NewProcess(t, node, args...)
	d.Env = []string{"NODE_PATH=" + mods}
	// Start truncates the log, so this also holds after a restart.
	d.Ready = func() error {
		if !strings.Contains(d.Output(), "READY ") {
			return fmt.Errorf("no READY line yet")
		}
		return nil
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("device.js output:\n%s", d.Output())
		}
	})
	d.Start()
	return d
}

// requests counts the "REQ <service>" lines the device printed.
func (d *device) requests(service string) int {
	n := 0
	for _, l := range strings.Split(d.Output(), "\n") {
		if strings.HasPrefix(l, "REQ "+service+" ") {
			n++
		}
	}
	return n
}

// lines returns the device's "REQ <service>" lines.
func (d *device) lines(service string) []string {
	var out []string
	for _, l := range strings.Split(d.Output(), "\n") {
		if strings.HasPrefix(l, "REQ "+service+" ") {
			out = append(out, l)
		}
	}
	return out
}

func (d *device) connection(extra string) []byte {
	return []byte(fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"deviceInstance":%d,"timeoutMs":1500%s}`, d.port, d.instance, extra))
}

func itoa(n int) string { return strconv.Itoa(n) }
