package modbus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// TestRTUIntegration runs Modbus RTU over a pseudo-terminal pair made by
// socat, with pymodbus's serial server on one end and the adapter on the
// other. Parity is N: Linux ptys refuse even parity.
func TestRTUIntegration(t *testing.T) {
	requirePymodbus(t)
	socatPath, err := exec.LookPath("socat")
	if err != nil {
		coretest.Unavailable(t, "socat", "PATH", err)
	}
	// Looked up before anything starts, so that a machine without mbpoll
	// skips (fails under CI) instead of failing at the final check.
	mbpoll, err := exec.LookPath("mbpoll")
	if err != nil {
		coretest.Unavailable(t, "mbpoll", "PATH", err)
	}
	dir := t.TempDir()
	master, slave := filepath.Join(dir, "master"), filepath.Join(dir, "slave")
	socat := coretest.NewProcess(t, socatPath, "pty,raw,echo=0,link="+master, "pty,raw,echo=0,link="+slave)
	socat.Ready = func() error {
		for _, l := range []string{master, slave} {
			if _, err := os.Stat(l); err != nil {
				return err
			}
		}
		return nil
	}
	socat.Start()
	srv := startServer(t, "--serial", slave, "--parity", "N", "--baudrate", "19200", "--layout", writeLayout(t))

	ep := adapters.Endpoint{
		Name: "rtu-1", Protocol: "modbus",
		Connection: json.RawMessage(fmt.Sprintf(`{"transport":"rtu","serialPort":%q,"baudRate":19200,"parity":"N","timeoutMs":500}`, master)),
		DataPoints: []adapters.DataPoint{
			{Name: "u16", Register: "hr:0"},
			{Name: "f32", Register: "hr:6", Type: "float32"},
			{Name: "i32_wl", Register: "hr:4", Type: "int32", WordOrder: "little"},
			{Name: "busy", Register: "hr:500"},
			{Name: "co5", Register: "coil:5"},
			{Name: "u2", Register: "hr:0@2"},
		},
	}
	a, err := NewAdapter(ep, adapters.Env{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	// The serial server gives no sign of being ready; poll until it answers.
	var rs []adapters.Reading
	coretest.Eventually(t, 20*time.Second, "the RTU server to answer", func() bool {
		rs, err = a.Poll(ctx)
		if err != nil {
			// The runner would reconnect after a transport error.
			_ = a.Close()
			_ = a.Connect(ctx)
			return false
		}
		return byMetric(rs)["u16"].Quality == adapters.Good
	})
	before, _ := srv.requests()
	rs, err = a.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := byMetric(rs)
	for name, want := range map[string]any{"u16": uint64(4660), "f32": integrationWant["f32"], "i32_wl": int64(-123456789), "co5": true, "u2": uint64(99)} {
		if r := got[name]; r.Quality != adapters.Good || r.Value != want {
			t.Errorf("%s = %+v, want %#v", name, r, want)
		}
	}
	if r := got["busy"]; r.QualityCode != adapters.CodeDeviceBusy {
		t.Errorf("busy = %+v, want DEVICE_BUSY", r)
	}
	d := a.Diagnostics().(Diagnostics)
	after, _ := srv.requests()
	// hr 0..7, hr 500, coil 5, unit 2's hr 0.
	if d.RequestsPerPoll != 4 || after-before != 4 {
		t.Errorf("requests per poll: plan %d, server saw %d, want 4", d.RequestsPerPoll, after-before)
	}

	if w, err := a.Write(ctx, "i32_wl", json.Number("-70000")); err != nil || w != int64(-70000) {
		t.Fatalf("Write: %v, %v", w, err)
	}
	// Release the port so that mbpoll can check the write independently.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(mbpoll, "-m", "rtu", "-b", "19200", "-P", "none", "-1", "-0", "-r", "4", "-c", "2", "-t", "4:hex", master).CombinedOutput()
	if err != nil {
		t.Fatalf("mbpoll: %v\n%s", err, out)
	}
	// -70000 = 0xFFFEEE90, word order little: 0xEE90 then 0xFFFE.
	if !regexp.MustCompile(`\[4\]:\s+0xEE90\s+\[5\]:\s+0xFFFE`).Match(out) {
		t.Fatalf("mbpoll after the write:\n%s", out)
	}
}
