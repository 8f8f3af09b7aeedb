package dest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

// victoriaMetrics runs a private VictoriaMetrics, the InfluxDB v2 write
// compatible peer. Its influx line limit is small so that an oversized
// line earns a 400: VictoriaMetrics skips malformed lines with a 204. It
// checks the limit per read block (64 KiB), so the test line is larger.
func victoriaMetrics(t *testing.T) (*coretest.Process, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs VictoriaMetrics, skipped in -short mode")
	}
	bin, err := exec.LookPath("victoria-metrics")
	if err != nil {
		coretest.Unavailable(t, "victoria-metrics binary", "PATH", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", coretest.FreePort(t))
	p := coretest.NewProcess(t, bin, "-httpListenAddr="+addr, "-storageDataPath="+t.TempDir(),
		"-search.latencyOffset=0s", "-retentionPeriod=100y", "-influx.maxLineSize=4KB", "-loggerLevel=ERROR")
	base := "http://" + addr
	p.Ready = func() error {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	p.Start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("victoria-metrics output:\n%s", p.Output())
		}
	})
	return p, base
}

type exported struct {
	Metric     map[string]string `json:"metric"`
	Values     []float64         `json:"values"`
	Timestamps []int64           `json:"timestamps"`
}

// export reads back every series, one line per series and sample.
func export(t *testing.T, base string) []string {
	t.Helper()
	if resp, err := http.Get(base + "/internal/force_flush"); err == nil {
		resp.Body.Close()
	}
	resp, err := http.PostForm(base+"/api/v1/export", url.Values{"match[]": {`{__name__!=""}`}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e exported
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		var labels []string
		for k, v := range e.Metric {
			if k != "__name__" {
				labels = append(labels, k+"="+v)
			}
		}
		sort.Strings(labels)
		for i := range e.Values {
			out = append(out, fmt.Sprintf("%s{%s} %v @%d", e.Metric["__name__"], strings.Join(labels, ","), e.Values[i], e.Timestamps[i]))
		}
	}
	sort.Strings(out)
	return out
}

// TestTSDBIntegration writes a batch's line protocol through the tsdb
// transport (gzip) and reads exact values and millisecond timestamps
// back; then a refused line, an outage and the recovery.
func TestTSDBIntegration(t *testing.T) {
	vm, base := victoriaMetrics(t)
	cfg := fmt.Sprintf(`{"url":%q,"org":"plant","bucket":"telemetry","token":"secret-token"}`, base)
	tr := startTransport(t, TypeTSDB, cfg, Env{})
	waitConnected(t, tr, true)

	at := time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.UTC)
	b := batch.Batch{Endpoint: "line1", Messages: []batch.Message{{Readings: []adapters.Reading{
		{DeviceName: "plc-1", DeviceID: "7", Metric: "temp", Value: 21.5, Quality: adapters.Good, Timestamp: at},
		{DeviceName: "plc-1", DeviceID: "7", Metric: "count", Value: int64(42), Quality: adapters.Good, Timestamp: at},
		{DeviceName: "plc-1", DeviceID: "7", Metric: "running", Value: true, Quality: adapters.Good, Timestamp: at},
		{DeviceName: "plc-1", DeviceID: "7", Metric: "pressure", Value: nil, Quality: adapters.Bad, QualityCode: "TIMEOUT", Timestamp: at},
		{DeviceName: "plc 2", Metric: "temp", Value: float32(-3.25), Quality: adapters.Good, Timestamp: at.Add(time.Millisecond)},
	}}}}
	sendOK(t, tr, []Message{{Payload: LineProtocol(b)}})
	want := []string{
		"line1_count{device=plc-1,device_id=7} 42 @1772366400123",
		"line1_running{device=plc-1,device_id=7} 1 @1772366400123",
		"line1_temp{device=plc 2} -3.25 @1772366400124",
		"line1_temp{device=plc-1,device_id=7} 21.5 @1772366400123",
	}
	var got []string
	coretest.Eventually(t, waitFor, "the written samples", func() bool {
		got = export(t, base)
		return len(got) >= len(want)
	})
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("exported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	t.Run("refused line", func(t *testing.T) {
		long := []byte("m s=\"" + strings.Repeat("x", 256<<10) + "\" 1772366400123\n")
		errs := tr.Send(t.Context(), []Message{{Payload: long}, {Payload: []byte("m f=1 1772366400123\n")}})
		if !IsRejected(errs[0]) || errors.Is(errs[0], ErrNotConnected) {
			t.Fatalf("oversized line: %v, want a rejection", errs[0])
		}
		if errs[1] != nil {
			t.Fatalf("the message after a refused one: %v", errs[1])
		}
		if !tr.Connected() {
			t.Fatal("a refusal made the destination not connected")
		}
	})

	t.Run("outage", func(t *testing.T) {
		drain(tr.Changes())
		vm.Stop()
		msgs := []Message{{Payload: []byte("m f=2 1772366400125\n")}, {Payload: []byte("m f=3 1772366400126\n")}}
		for i, err := range tr.Send(t.Context(), msgs) {
			if !errors.Is(err, ErrNotConnected) {
				t.Fatalf("send %d while down: %v, want ErrNotConnected", i, err)
			}
		}
		if tr.Connected() {
			t.Fatal("still connected after a failed write")
		}
		if s := tr.Status(); s.LastError == "" || s.State != tsdbUnreachable {
			t.Fatalf("status %+v", s)
		}
		drain(tr.Changes())
		vm.Start()
		select {
		case <-tr.Changes():
		case <-time.After(waitFor):
			t.Fatal("no change signalled after the server came back")
		}
		waitConnected(t, tr, true)
		sendOK(t, tr, msgs)
	})
}

// TestTSDBRequest checks the request itself against a recording server:
// headers, query and a gzip body that decodes to the payload; and the
// status mapping.
func TestTSDBRequest(t *testing.T) {
	tests := []struct {
		status             int
		rejected, notConnd bool
	}{
		{204, false, false},
		{400, true, false},
		{401, false, true},
		{403, false, true},
		{404, false, true},
		{408, false, true},
		{429, false, true},
		{500, false, true},
		{503, false, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			var got *http.Request
			var body []byte
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/health") {
					return
				}
				got = r
				body = gunzip(t, r.Body)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, `{"code":"invalid","message":"the reason"}`)
			})
			tr := startTransport(t, TypeTSDB, fmt.Sprintf(`{"url":%q,"org":"my org","bucket":"b&1","token":"tok"}`, srv+"/prefix/"), Env{})
			waitConnected(t, tr, true)
			err := tr.Send(t.Context(), []Message{{Payload: []byte("m f=1 1\n")}})[0]
			if got == nil {
				t.Fatal("no request")
			}
			if got.URL.Path != "/prefix/api/v2/write" || got.URL.Query().Get("org") != "my org" || got.URL.Query().Get("bucket") != "b&1" ||
				got.URL.Query().Get("precision") != "ms" || got.Header.Get("Authorization") != "Token tok" ||
				got.Header.Get("Content-Encoding") != "gzip" || got.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
				string(body) != "m f=1 1\n" {
				t.Fatalf("request %s %v body %q", got.URL, got.Header, body)
			}
			if IsRejected(err) != tt.rejected || errors.Is(err, ErrNotConnected) != tt.notConnd || (err == nil) != (tt.status == 204) {
				t.Fatalf("status %d: %v", tt.status, err)
			}
			if tt.rejected && !strings.Contains(err.Error(), "the reason") {
				t.Fatalf("rejection without the server's message: %v", err)
			}
		})
	}
}

// TestTSDBRefusedWritesBackOff: a server that is up (its health answers)
// but refuses writes (a wrong token) is not called reachable again before
// a growing wait, so the worker does not retry in a tight loop; a write
// that succeeds resets the wait.
func TestTSDBRefusedWritesBackOff(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	var writes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/write") {
			writes.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			if refuse.Load() {
				http.Error(w, `{"message":"unauthorized access"}`, http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	cfg := fmt.Sprintf(`{"url":%q,"org":"o","bucket":"b","token":"wrong"}`, srv.URL)
	tr := startTransport(t, TypeTSDB, cfg, Env{}) // probe backoff 50 ms .. 400 ms
	x := tr.(*tsdbTransport)
	msg := []Message{{Payload: []byte("m,device=d v=1 1700000000000")}}
	for i, wantHold := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond} {
		waitConnected(t, tr, true)
		failedAt := time.Now()
		if errs := tr.Send(t.Context(), msg); !errors.Is(errs[0], ErrNotConnected) || IsRejected(errs[0]) {
			t.Fatalf("write %d refused with 401: %v, want not connected", i, errs[0])
		}
		waitConnected(t, tr, true)
		if waited := time.Since(failedAt); waited < wantHold {
			t.Fatalf("refusal %d: reachable again after %s, want at least %s", i+1, waited, wantHold)
		}
	}
	refuse.Store(false)
	waitConnected(t, tr, true)
	if errs := tr.Send(t.Context(), msg); errs[0] != nil {
		t.Fatalf("write with the server accepting: %v", errs[0])
	}
	x.mu.Lock()
	n := x.answered
	x.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d refusals counted after a successful write", n)
	}
	if w := writes.Load(); w != 6 {
		t.Fatalf("%d writes reached the server, want 6", w)
	}
}
