package modbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/goburrow/modbus"
	"github.com/goburrow/serial"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// testEndpoint has two holding blocks, an input, a coil and a discrete
// block: five requests per poll.
func testEndpoint() adapters.Endpoint {
	return adapters.Endpoint{
		UUID: "uuid-1", Name: "press-1", Protocol: "modbus",
		Connection: json.RawMessage(`{"host":"127.0.0.1","maxGap":2}`),
		DataPoints: []adapters.DataPoint{
			{Name: "speed", Register: "hr:0", Unit: "rpm"},
			{Name: "temp", Register: "hr:1", Type: "int16", Scale: f64(0.5), Unit: "C"},
			{Name: "energy", Register: "hr:100", Type: "uint32", WordOrder: "little"},
			{Name: "level", Register: "ir:5", Type: "float32"},
			{Name: "run", Register: "coil:3"},
			{Name: "door", Register: "di:9"},
		},
	}
}

func newTestAdapter(t *testing.T, ep adapters.Endpoint, f *fakeTransport) *Adapter {
	t.Helper()
	a, err := NewAdapter(ep, adapters.Env{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a.dial = func(Config) transport { return f }
	if err := a.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

func fillFake() *fakeTransport {
	f := newFake()
	f.set(1, Holding, 0, 1500, 0xFFEC)     // 1500, -20*0.5
	f.set(1, Holding, 100, 0x5678, 0x1234) // word-swapped 0x12345678
	f.set(1, Input, 5, 0x4049, 0x0FDB)     // float32 3.1415927
	f.set(1, Coil, 3, 1)
	return f
}

func byMetric(rs []adapters.Reading) map[string]adapters.Reading {
	m := make(map[string]adapters.Reading, len(rs))
	for _, r := range rs {
		m[r.Metric] = r
	}
	return m
}

func TestPollDecodesEveryBlockWithOneRequest(t *testing.T) {
	f := fillFake()
	a := newTestAdapter(t, testEndpoint(), f)
	rs, err := a.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"speed": uint64(1500), "temp": -10.0, "energy": uint64(0x12345678),
		"level": float64(float32(3.1415927)), "run": true, "door": false,
	}
	got := byMetric(rs)
	for name, v := range want {
		r := got[name]
		if r.Quality != adapters.Good || r.Value != v {
			t.Errorf("%s = %#v (%s %s), want %#v", name, r.Value, r.Quality, r.QualityCode, v)
		}
		if r.DeviceName != "press-1" || r.DeviceID != "uuid-1" || r.Timestamp.IsZero() {
			t.Errorf("%s: reading header %+v", name, r)
		}
	}
	if got["speed"].Unit != "rpm" {
		t.Errorf("unit = %q", got["speed"].Unit)
	}
	d := a.Diagnostics().(Diagnostics)
	if d.RequestsPerPoll != 5 || f.reads != 5 || d.TotalRequests != 5 || d.LastPollRequests != 5 || d.Polls != 1 {
		t.Fatalf("requests: plan %d, sent %d, diagnostics %+v", d.RequestsPerPoll, f.reads, d)
	}
	if !d.Connected || d.TotalErrors != 0 || d.LastError != "" {
		t.Fatalf("diagnostics %+v", d)
	}
	if _, err := json.Marshal(d); err != nil {
		t.Fatal(err)
	}
}

func TestPollBlockErrors(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		short     bool
		wantCode  string
		transport bool
	}{
		{name: "exception 6 is DEVICE_BUSY", err: &modbus.ModbusError{FunctionCode: 0x83, ExceptionCode: 6}, wantCode: adapters.CodeDeviceBusy},
		{name: "exception 2 is READ_ERROR", err: &modbus.ModbusError{FunctionCode: 0x83, ExceptionCode: 2}, wantCode: adapters.CodeReadError},
		{name: "mismatched reply is BAD_DATA", err: errors.New("modbus: response transaction id '7' does not match request '8'"), wantCode: adapters.CodeBadData},
		{name: "short reply is BAD_DATA", short: true, wantCode: adapters.CodeBadData},
		{name: "reset is DEVICE_OFFLINE", err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, wantCode: adapters.CodeDeviceOffline, transport: true},
		{name: "EOF is DEVICE_OFFLINE", err: io.EOF, wantCode: adapters.CodeDeviceOffline, transport: true},
		{name: "deadline is TIMEOUT", err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, wantCode: adapters.CodeTimeout, transport: true},
		{name: "serial timeout is TIMEOUT", err: serial.ErrTimeout, wantCode: adapters.CodeTimeout, transport: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fillFake()
			// Only the holding block at 100 fails.
			f.readErr = func(area Area, _ uint8, start, _ uint16) error {
				if area == Holding && start == 100 {
					if tt.short {
						f.short = true
						return nil
					}
					return tt.err
				}
				f.short = false
				return nil
			}
			a := newTestAdapter(t, testEndpoint(), f)
			rs, err := a.Poll(context.Background())
			got := byMetric(rs)
			if len(rs) != 6 {
				t.Fatalf("%d readings", len(rs))
			}
			d := a.Diagnostics().(Diagnostics)
			if d.TotalErrors != 1 || d.LastError == "" || d.LastErrorAt == nil {
				t.Errorf("diagnostics %+v", d)
			}
			if tt.transport {
				if err == nil || adapters.Classify(err) != tt.wantCode {
					t.Fatalf("Poll error %v (%s), want %s", err, adapters.Classify(err), tt.wantCode)
				}
				for _, r := range rs {
					if r.Quality != adapters.Bad || r.QualityCode != tt.wantCode || r.Value != nil {
						t.Errorf("%s: %+v", r.Metric, r)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Poll returned %v for a block error", err)
			}
			if r := got["energy"]; r.Quality != adapters.Bad || r.QualityCode != tt.wantCode || r.Value != nil {
				t.Errorf("energy: %+v, want BAD %s", r, tt.wantCode)
			}
			for _, m := range []string{"speed", "temp", "level", "run", "door"} {
				if got[m].Quality != adapters.Good {
					t.Errorf("%s: %+v, want GOOD", m, got[m])
				}
			}
			if d.LastPollRequests != 5 {
				t.Errorf("requests %d, want 5", d.LastPollRequests)
			}
			// A reply that did not match its request means the stream may be
			// off by one; the connection is dropped so goburrow dials afresh.
			wantCloses := 0
			if tt.wantCode == adapters.CodeBadData {
				wantCloses = 1
			}
			if f.closes != wantCloses {
				t.Errorf("closes = %d, want %d", f.closes, wantCloses)
			}
		})
	}
}

func TestPollNotConnected(t *testing.T) {
	a, err := NewAdapter(testEndpoint(), adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := a.Poll(context.Background())
	if err == nil || len(rs) != 6 || rs[0].QualityCode != adapters.CodeDeviceOffline {
		t.Fatalf("Poll before Connect: %v %+v", err, rs)
	}
}

func TestPollCancelled(t *testing.T) {
	a := newTestAdapter(t, testEndpoint(), fillFake())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rs, err := a.Poll(ctx)
	if !errors.Is(err, context.Canceled) || len(rs) != 6 || rs[0].Quality != adapters.Bad {
		t.Fatalf("Poll with a cancelled context: %v %+v", err, rs)
	}
}

func TestConnectFailureAndClose(t *testing.T) {
	f := newFake()
	f.connectErr = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	a, err := NewAdapter(testEndpoint(), adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	a.dial = func(Config) transport { return f }
	err = a.Connect(context.Background())
	if adapters.Classify(err) != adapters.CodeConnectionRefused {
		t.Fatalf("Connect: %v (%s)", err, adapters.Classify(err))
	}
	if f.closes != 1 {
		t.Fatalf("a failed Connect did not release the handler: %d closes", f.closes)
	}
	for range 2 {
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	f.connectErr = nil
	if err := a.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if f.closes != 2 {
		t.Fatalf("closes = %d, want 2", f.closes)
	}
	if d := a.Diagnostics().(Diagnostics); d.Connected {
		t.Fatal("still connected after Close")
	}
}

// TestConnectRefusedByRealSocket runs goburrow's own dialer against a port
// nobody listens on: Connect must report the refusal at once.
func TestConnectRefusedByRealSocket(t *testing.T) {
	port := coretest.FreePort(t)
	ep := testEndpoint()
	ep.Connection = json.RawMessage(fmt.Sprintf(`{"host":"127.0.0.1","port":%d}`, port))
	a, err := NewAdapter(ep, adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = a.Connect(context.Background())
	if got := adapters.Classify(err); got != adapters.CodeConnectionRefused {
		t.Fatalf("Connect to a closed port: %v classified %s", err, got)
	}
}

func TestRTUOpenMissingDevice(t *testing.T) {
	ep := testEndpoint()
	ep.Connection = json.RawMessage(`{"transport":"rtu","serialPort":"/dev/does-not-exist-modbus","baudRate":19200,"parity":"N","stopBits":2}`)
	a, err := NewAdapter(ep, adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = a.Connect(context.Background())
	if got := adapters.Classify(err); got != adapters.CodeDeviceOffline {
		t.Fatalf("Connect to a missing serial port: %v classified %s", err, got)
	}
}

// TestConcurrentPollWriteDiagnostics runs the API's writes next to the
// runner's polls under the race detector.
func TestConcurrentPollWriteDiagnostics(t *testing.T) {
	f := fillFake()
	a := newTestAdapter(t, testEndpoint(), f)
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				switch g {
				case 0:
					if _, err := a.Poll(context.Background()); err != nil {
						t.Error(err)
					}
				case 1:
					if _, err := a.Write(context.Background(), "speed", float64(i)); err != nil {
						t.Error(err)
					}
				case 2:
					_ = a.Diagnostics()
				}
			}
		}()
	}
	wg.Wait()
	d := a.Diagnostics().(Diagnostics)
	if d.Polls != 50 || d.Writes != 50 || d.TotalRequests != 50*5+50 {
		t.Fatalf("diagnostics %+v", d)
	}
}
