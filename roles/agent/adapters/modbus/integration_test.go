package modbus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Debian's python3-pymodbus is installed for the system interpreter, which
// need not be the python3 first on PATH.
const systemPython = "/usr/bin/python3"

// pymodbusServer is testdata/server.py running as a child process.
type pymodbusServer struct {
	*coretest.Process
	t     *testing.T
	port  int
	stats string
}

func requirePymodbus(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test; skipped with -short")
	}
	if out, err := exec.Command(systemPython, "-c", "import pymodbus.server").CombinedOutput(); err != nil {
		coretest.Unavailable(t, "pymodbus", systemPython, fmt.Errorf("%w: %s", err, out))
	}
}

// startServer runs server.py with the given flags, on a free TCP port
// unless the flags say --serial, and waits until it accepts connections.
func startServer(t *testing.T, flags ...string) *pymodbusServer {
	t.Helper()
	s := &pymodbusServer{t: t, stats: filepath.Join(t.TempDir(), "stats.json")}
	args := append([]string{"testdata/server.py", "--stats", s.stats}, flags...)
	if !slices.Contains(flags, "--serial") {
		s.port = coretest.FreePort(t)
		args = append(args, "--port", strconv.Itoa(s.port))
	}
	s.Process = coretest.NewProcess(t, systemPython, args...)
	if s.port != 0 {
		s.Ready = func() error { return coretest.Dialable(s.addr()) }
	}
	s.Start()
	return s
}

func (s *pymodbusServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// requests is how many requests the server has executed.
func (s *pymodbusServer) requests() (total int, byFunction map[string]int) {
	s.t.Helper()
	b, err := os.ReadFile(s.stats)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	var st struct {
		Requests   int            `json:"requests"`
		ByFunction map[string]int `json:"byFunction"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		s.t.Fatalf("stats %s: %v", b, err)
	}
	return st.Requests, st.ByFunction
}

// The registers of the integration layout, as raw words. They are written
// out by hand from the IEEE 754 and two's complement encodings rather than
// with the adapter's encoder, so a symmetric bug in encode and decode
// cannot pass.
var integrationLayout = map[string]any{
	"units": map[string]any{
		"1": map[string]any{
			"hr": words(0,
				0x1234,         // 0 u16 4660
				0xFFFE,         // 1 i16 -2
				0x1234, 0x5678, // 2 u32 0x12345678, big/big
				0x32EB, 0xF8A4, // 4 i32 -123456789, word order little
				0xC388, 0x9333, // 6 f32 -273.15, big/big
				0xC03F, 0x0000, // 8 f32 1.5, byte order little
				0x35FB, 0x048E, 0xE0FE, 0xFFFF, // 10 i64 -1234567890123, little/little
				0x0102, 0x0304, 0x0506, 0x0708, // 14 u64 0x0102030405060708
				0x2D18, 0x5444, 0x21FB, 0x4009, // 18 f64 pi, word order little
				250,    // 22 u16 scaled by 0.1
				0x0100, // 23 bool from a register
			),
			"ir": words(0, 0x7856, 0x3412, 0, 0, 0, 0xFED4), // 0 u32 little/little, 5 i16 -300
			"co": map[string]int{"0": 1, "5": 1},
			"di": map[string]int{"2": 1, "40": 1},
		},
		"2": map[string]any{"hr": words(0, 99)},
	},
	"busy": []map[string]any{{"unit": 1, "area": "hr", "start": 500, "count": 10}},
}

func words(start int, vals ...int) map[string]int {
	m := make(map[string]int, len(vals))
	for i, v := range vals {
		m[strconv.Itoa(start+i)] = v
	}
	return m
}

func integrationEndpoint(port int) adapters.Endpoint {
	type dp = adapters.DataPoint
	return adapters.Endpoint{
		UUID: "9b0c", Name: "plc-int", Protocol: "modbus",
		Connection: json.RawMessage(fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"timeoutMs":2000}`, port)),
		DataPoints: []dp{
			{Name: "u16", Register: "holding:0"},
			{Name: "i16", Register: "hr:1", Type: "int16"},
			{Name: "u32", Register: "hr:2", Type: "uint32"},
			{Name: "i32_wl", Register: "hr:4", Type: "int32", WordOrder: "little"},
			{Name: "f32", Register: "hr:6", Type: "float32", Unit: "C"},
			{Name: "f32_bl", Register: "hr:8", Type: "float32", ByteOrder: "little"},
			{Name: "i64_ll", Register: "hr:10", Type: "int64", ByteOrder: "little", WordOrder: "little"},
			{Name: "u64", Register: "hr:14", Type: "uint64"},
			{Name: "f64_wl", Register: "hr:18", Type: "float64", WordOrder: "little"},
			{Name: "scaled", Register: "hr:22", Scale: f64(0.1)},
			{Name: "hr_bool", Register: "hr:23", Type: "bool"},
			{Name: "far", Register: "hr:200"},
			{Name: "busy", Register: "hr:500"},
			{Name: "ir_u32_ll", Register: "input_register:0", Type: "uint32", ByteOrder: "little", WordOrder: "little"},
			{Name: "ir_scaled", Register: "IR:5", Type: "int16", Scale: f64(0.5)},
			{Name: "co0", Register: "coil:0"},
			{Name: "co1", Register: "co:1"},
			{Name: "co5", Register: "coils:5"},
			{Name: "di2", Register: "discrete:2"},
			{Name: "di40", Register: "di:40"},
			{Name: "u2", Register: "hr:0@2"},
		},
	}
}

// integrationWant is what every GOOD point of integrationEndpoint reads.
var integrationWant = map[string]any{
	"u16": uint64(4660), "i16": int64(-2), "u32": uint64(0x12345678), "i32_wl": int64(-123456789),
	"f32": float64(float32(-273.15)), "f32_bl": 1.5, "i64_ll": int64(-1234567890123),
	"u64": uint64(0x0102030405060708), "f64_wl": math.Pi, "scaled": mul(250, 0.1), "hr_bool": true,
	"far": uint64(0), "ir_u32_ll": uint64(0x12345678), "ir_scaled": -150.0,
	"co0": true, "co1": false, "co5": true, "di2": true, "di40": true, "u2": uint64(99),
}

// Blocks: holding 0..23, 200, 500 and unit 2's 0; input 0..5; coils 0..5;
// discrete 2 and 40 (37 apart, more than maxGap 16).
const integrationBlocks = 8

func checkReadings(t *testing.T, rs []adapters.Reading) {
	t.Helper()
	got := byMetric(rs)
	if len(got) != len(integrationWant)+1 {
		t.Fatalf("%d readings, want %d", len(got), len(integrationWant)+1)
	}
	for name, want := range integrationWant {
		r := got[name]
		if r.Quality != adapters.Good || r.Value != want {
			t.Errorf("%s = %#v (%s %s), want %#v", name, r.Value, r.Quality, r.QualityCode, want)
		}
	}
	if r := got["busy"]; r.Quality != adapters.Bad || r.QualityCode != adapters.CodeDeviceBusy || r.Value != nil {
		t.Errorf("busy = %+v, want BAD DEVICE_BUSY", r)
	}
	if r := got["f32"]; r.Unit != "C" || r.DeviceName != "plc-int" || r.DeviceID != "9b0c" {
		t.Errorf("reading fields: %+v", r)
	}
}

func writeLayout(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(integrationLayout)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "layout.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPollWriteOutageIntegration runs the adapter against pymodbus: exact
// values of every type and order, one request per block counted on both
// sides, DEVICE_BUSY from a real exception 6, writes checked with mbpoll,
// and a server that dies and comes back.
func TestPollWriteOutageIntegration(t *testing.T) {
	requirePymodbus(t)
	mbpoll, err := exec.LookPath("mbpoll")
	if err != nil {
		coretest.Unavailable(t, "mbpoll", "PATH", err)
	}
	srv := startServer(t, "--layout", writeLayout(t))
	a, err := NewAdapter(integrationEndpoint(srv.port), adapters.Env{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}

	const polls = 3
	for range polls {
		rs, err := a.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		checkReadings(t, rs)
	}
	d := a.Diagnostics().(Diagnostics)
	if d.RequestsPerPoll != integrationBlocks || d.LastPollRequests != integrationBlocks {
		t.Fatalf("requests per poll: plan %d, last poll %d, want %d\nblocks %+v", d.RequestsPerPoll, d.LastPollRequests, integrationBlocks, d.Blocks)
	}
	if d.TotalRequests != polls*integrationBlocks {
		t.Fatalf("TotalRequests = %d, want %d", d.TotalRequests, polls*integrationBlocks)
	}
	if served, _ := srv.requests(); served != polls*integrationBlocks {
		t.Fatalf("server saw %d requests, want %d", served, polls*integrationBlocks)
	}
	if d.TotalErrors != polls || d.LastErrorAt == nil || !regexp.MustCompile(`exception '6'`).MatchString(d.LastError) {
		t.Fatalf("errors %d, last %q", d.TotalErrors, d.LastError)
	}

	// Writes, verified by mbpoll rather than by reading back ourselves.
	for _, w := range []struct {
		register string
		value    any
		want     any
	}{
		{"u16", json.Number("4321"), uint64(4321)},
		{"f32", 12.5, 12.5},
		{"i32_wl", -2.0, int64(-2)},
		{"scaled", 31.26, mul(313, 0.1)},
		{"co1", true, true},
		{"hr:300", 77.0, uint64(77)},
	} {
		got, err := a.Write(ctx, w.register, w.value)
		if err != nil || got != w.want {
			t.Fatalf("Write(%s, %v) = %#v, %v; want %#v", w.register, w.value, got, err, w.want)
		}
	}
	mb := func(args ...string) map[int]string {
		t.Helper()
		args = append([]string{"-1", "-0", "-p", strconv.Itoa(srv.port)}, append(args, "127.0.0.1")...)
		out, err := exec.Command(mbpoll, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("mbpoll %v: %v\n%s", args, err, out)
		}
		vals := map[int]string{}
		for _, m := range regexp.MustCompile(`(?m)^\[(\d+)\]:\s+(\S+)`).FindAllStringSubmatch(string(out), -1) {
			i, _ := strconv.Atoi(m[1])
			vals[i] = m[2]
		}
		return vals
	}
	want := map[int]string{0: "4321", 4: "65534", 5: "65535", 6: "16712", 7: "0", 22: "313", 300: "77"}
	got := mb("-t", "4", "-r", "0", "-c", "23")
	for k, v := range mb("-t", "4", "-r", "300", "-c", "1") {
		got[k] = v
	}
	for addr, v := range want {
		if got[addr] != v {
			t.Errorf("mbpoll holding %d = %q, want %q (f32 12.5 = 0x4148 0x0000, i32 -2 word-swapped = 0xFFFE 0xFFFF)", addr, got[addr], v)
		}
	}
	if c := mb("-t", "0", "-r", "1", "-c", "1"); c[1] != "1" {
		t.Errorf("mbpoll coil 1 = %q, want 1", c[1])
	}
	_, byFn := srv.requests()
	if byFn["6"] != 3 || byFn["16"] != 2 || byFn["5"] != 1 {
		t.Errorf("server write requests by function %v, want 6:3 16:2 5:1", byFn)
	}

	// The server dies: the poll fails as a whole and tells the runner.
	srv.Stop()
	rs, err := a.Poll(ctx)
	if err == nil {
		t.Fatal("Poll after the server died returned no error")
	}
	t.Logf("first poll after the server died: %v (%s)", err, rs[0].QualityCode)
	for _, r := range rs {
		if r.Quality != adapters.Bad || r.Value != nil || r.QualityCode != rs[0].QualityCode {
			t.Fatalf("reading after the server died: %+v", r)
		}
	}
	// The runner closes and reconnects; the port now refuses.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	err = a.Connect(ctx)
	if got := adapters.Classify(err); got != adapters.CodeConnectionRefused {
		t.Fatalf("Connect to the dead server: %v classified %s", err, got)
	}
	rs, err = a.Poll(ctx)
	if err == nil || len(rs) != len(integrationWant)+1 {
		t.Fatalf("Poll while refused: %v, %d readings", err, len(rs))
	}
	for _, r := range rs {
		if r.Quality != adapters.Bad || r.QualityCode != adapters.CodeConnectionRefused {
			t.Fatalf("reading while refused: %+v", r)
		}
	}

	// The server comes back on the same port with its original registers.
	srv.Start()
	if err := a.Connect(ctx); err != nil {
		t.Fatalf("Connect after restart: %v", err)
	}
	rs, err = a.Poll(ctx)
	if err != nil {
		t.Fatalf("Poll after restart: %v", err)
	}
	checkReadings(t, rs)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGeneratedLayoutIntegration checks the --units/--registers layout
// benchmarks use: 3 units x 100 registers read in one request per unit.
func TestGeneratedLayoutIntegration(t *testing.T) {
	requirePymodbus(t)
	srv := startServer(t, "--units", "3", "--registers", "100")
	ep := adapters.Endpoint{
		Name: "gen", Protocol: "modbus",
		Connection: json.RawMessage(fmt.Sprintf(`{"host":"127.0.0.1","port":%d}`, srv.port)),
	}
	for u := 1; u <= 3; u++ {
		for i := 0; i < 100; i++ {
			ep.DataPoints = append(ep.DataPoints, adapters.DataPoint{Name: fmt.Sprintf("u%d_r%d", u, i), Register: fmt.Sprintf("hr:%d@%d", i, u)})
		}
	}
	a, err := NewAdapter(ep, adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs, err := a.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		var u, i int
		if _, err := fmt.Sscanf(r.Metric, "u%d_r%d", &u, &i); err != nil {
			t.Fatal(err)
		}
		if r.Quality != adapters.Good || r.Value != uint64(u*1000+i) {
			t.Fatalf("%s = %+v, want %d", r.Metric, r, u*1000+i)
		}
	}
	if served, _ := srv.requests(); served != 3 {
		t.Fatalf("server saw %d requests, want 3", served)
	}
}
