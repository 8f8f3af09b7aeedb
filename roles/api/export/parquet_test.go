package export

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

// The million-row fixture: 2 agents x 5 metrics x 100,000 readings, half
// a second apart. Row i of a series has value i/4 + series, except every
// 1000th, which has none (quality BAD); every 7th has an anomaly score.
const (
	bigPerSeries = 100_000
	bigStep      = 500 * time.Millisecond
)

var (
	bigAgents  = []string{apitest.AgentA1, apitest.AgentA2}
	bigMetrics = []string{"line.a", "line.b", "line.c", "line.d", "line.e"}
	bigStart   = t0.Add(-24 * time.Hour)
)

// bigRow is the fixture's row s*bigPerSeries+i, in export order (agent,
// metric, time).
func bigRow(s, i int) reading {
	r := reading{agent: bigAgents[s/len(bigMetrics)], metric: bigMetrics[s%len(bigMetrics)],
		at: bigStart.Add(time.Duration(i) * bigStep), value: f(float64(i)/4 + float64(s)), quality: "GOOD", unit: "u"}
	if i%1000 == 999 {
		r.value, r.quality = nil, "BAD"
	}
	if i%7 == 0 {
		r.score = f(float64(i%100) / 100)
	}
	return r
}

// insertBig writes the fixture with statements that generate the rows in
// the database, as bigRow computes them: a million rows sent from here
// take minutes on a loaded machine.
func insertBig(t *testing.T, h *harness) {
	t.Helper()
	key, err := tenantKey(apitest.TenantA)
	if err != nil {
		t.Fatal(err)
	}
	var q string
	if h.d.Dialect().Engine == db.Postgres {
		q = `INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, unit, quality, device_name, tenant_id, anomaly_score)
SELECT $1::timestamptz + i * interval '500 milliseconds', $2::uuid, $3,
  CASE WHEN i % 1000 = 999 THEN NULL ELSE i::float8 / 4 + $4::float8 END, 'modbus', 'u',
  CASE WHEN i % 1000 = 999 THEN 'BAD' ELSE 'GOOD' END, 'line', $5,
  CASE WHEN i % 7 = 0 THEN (i % 100)::float8 / 100 END
FROM generate_series(0, $6::int - 1) AS g(i)`
	} else {
		q = `WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < $6 - 1)
INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, unit, quality, device_name, tenant_id, anomaly_score)
SELECT $1 + i * 500000, $2, $3,
  CASE WHEN i % 1000 = 999 THEN NULL ELSE CAST(i AS REAL) / 4 + $4 END, 'modbus', 'u',
  CASE WHEN i % 1000 = 999 THEN 'BAD' ELSE 'GOOD' END, 'line', $5,
  CASE WHEN i % 7 = 0 THEN CAST(i % 100 AS REAL) / 100 END
FROM g`
	}
	if bigStep != 500*time.Millisecond || !strings.HasPrefix(bigMetrics[0], "line.") {
		panic("BUG: insertBig's SQL no longer matches bigRow")
	}
	for s := range len(bigAgents) * len(bigMetrics) {
		r := bigRow(s, 0)
		apitest.Exec(t, h.d, q, h.d.Dialect().TimeArg(bigStart), r.agent, r.metric, float64(s), key, bigPerSeries)
	}
}

// vmKB reads a Vm* line of /proc/self/status, in KiB.
func vmKB(t *testing.T, name string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", name)
	return 0
}

// TestParquetMillionRowsIntegration streams a 1,000,000-row Parquet
// export over HTTP into a file and measures the process's peak resident
// memory growth meanwhile (VmHWM, reset before the export through
// /proc/self/clear_refs): the rows go from the database cursor to the
// response, so it must stay under 64 MiB. hyparquet then reads the file
// back, and every row and column type must be what was stored. The
// engines run one after the other: the measure is of the whole process.
// Under the race detector SQLite is left out: its instrumented driver
// takes minutes for the million rows and the detector's shadow memory,
// not the export, doubles the growth (47.6 MiB against 22.5 MiB without
// it); PostgreSQL still runs there.
func TestParquetMillionRowsIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("a million rows")
	}
	node, modules := coretest.NodePackage(t, "hyparquet")
	for _, engine := range apitest.Engines {
		t.Run(engine, func(t *testing.T) {
			if raceEnabled && engine == "sqlite" {
				t.Skip("SQLite's million rows under the race detector measure the detector (see the doc comment); run without -race")
			}
			h := newHarness(t, engine, Settings{})
			t1 := time.Now()
			insertBig(t, h)
			t.Logf("%s: inserted 1,000,000 rows in %s", engine, time.Since(t1).Round(time.Millisecond))

			srv := httptest.NewServer(h.e)
			defer srv.Close()
			file := filepath.Join(t.TempDir(), "big.parquet")
			out, err := os.Create(file)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/api/v1/export/readings?"+query("format", "parquet",
				"start", bigStart.Format(time.RFC3339), "end", t0.Format(time.RFC3339)), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer member-a")

			runtime.GC()
			debug.FreeOSMemory()
			if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
				t.Skipf("cannot reset the peak RSS: %v", err)
			}
			base := vmKB(t, "VmRSS")
			t1 = time.Now()
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(out, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("export: %d, %v", resp.StatusCode, err)
			}
			took := time.Since(t1)
			peak := vmKB(t, "VmHWM")
			growth := float64(peak-base) / 1024
			t.Logf("%s: 1,000,000 rows, %.1f MiB of Parquet in %s (%.0f rows/s); RSS %.1f MiB before, peak %.1f MiB: growth %.1f MiB (race detector: %v)",
				engine, float64(n)/(1<<20), took.Round(time.Millisecond), 1e6/took.Seconds(), float64(base)/1024, float64(peak)/1024, growth, raceEnabled)
			if growth >= 64 {
				t.Errorf("peak RSS grew by %.1f MiB during the export, want under 64 MiB", growth)
			}
			checkParquet(t, node, modules, file)
		})
	}
}

// checkParquet reads file with hyparquet and compares schema and rows
// with the fixture.
func checkParquet(t *testing.T, node, modules, file string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), node, filepath.Join("testdata", "readparquet.mjs"), modules, file)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cmd.Wait(); err != nil {
			t.Errorf("hyparquet reader: %v", err)
		}
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() {
		t.Fatalf("no schema line: %v", sc.Err())
	}
	var meta struct {
		Rows, RowGroups int
		Schema          []struct{ Name, Type, Logical, Repetition string }
	}
	if err := json.Unmarshal(sc.Bytes(), &meta); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range meta.Schema {
		got = append(got, c.Name+" "+c.Type+" "+c.Repetition+" "+c.Logical)
	}
	want := []string{
		`time INT64 REQUIRED {"type":"TIMESTAMP","isAdjustedToUTC":true,"unit":"MICROS"}`,
		`agent_uuid BYTE_ARRAY REQUIRED {"type":"STRING"}`,
		`metric_name BYTE_ARRAY REQUIRED {"type":"STRING"}`,
		`value DOUBLE OPTIONAL `,
		`quality BYTE_ARRAY REQUIRED {"type":"STRING"}`,
		`device_name BYTE_ARRAY REQUIRED {"type":"STRING"}`,
		`protocol BYTE_ARRAY REQUIRED {"type":"STRING"}`,
		`unit BYTE_ARRAY REQUIRED {"type":"STRING"}`,
		`anomaly_score DOUBLE OPTIONAL `,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("schema:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	total := len(bigAgents) * len(bigMetrics) * bigPerSeries
	if meta.Rows != total {
		t.Fatalf("file has %d rows, want %d", meta.Rows, total)
	}
	t.Logf("hyparquet: %d rows in %d row groups", meta.Rows, meta.RowGroups)
	num := func(p *float64) string {
		if p == nil {
			return `\N`
		}
		return strconv.FormatFloat(*p, 'g', -1, 64)
	}
	bad := 0
	for k := 0; k < total; k++ {
		if !sc.Scan() {
			t.Fatalf("hyparquet gave %d rows, want %d: %v", k, total, sc.Err())
		}
		r := bigRow(k/bigPerSeries, k%bigPerSeries)
		dev, _, _ := strings.Cut(r.metric, ".")
		want := []string{strconv.FormatInt(r.at.UnixMicro(), 10), r.agent, r.metric, num(r.value), r.quality, dev, "modbus", r.unit, num(r.score)}
		got := strings.Split(sc.Text(), "\t")
		if len(got) == len(want) {
			// JavaScript writes numbers its own way; compare their values.
			for _, c := range []int{3, 8} {
				if v, err := strconv.ParseFloat(got[c], 64); err == nil && !math.IsNaN(v) {
					got[c] = strconv.FormatFloat(v, 'g', -1, 64)
				}
			}
		}
		if strings.Join(got, "\t") != strings.Join(want, "\t") {
			if bad++; bad <= 5 {
				t.Errorf("row %d: hyparquet %q, want %q", k, got, want)
			}
		}
	}
	if sc.Scan() {
		t.Errorf("hyparquet gave more rows than %d: %q", total, sc.Text())
	}
	if bad > 0 {
		t.Errorf("%d rows differ", bad)
	}
}
