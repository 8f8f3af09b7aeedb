package export

import (
	"encoding/csv"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/licence"
	"github.com/edgeplat/edgeplat/roles/api/readings"
)

// raw sends a GET and returns the recorder, whatever the body.
func (h *harness) raw(path, who string) *httptest.ResponseRecorder {
	h.t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/api/v1"+path, nil)
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+who)
	}
	rec := httptest.NewRecorder()
	h.e.ServeHTTP(rec, req)
	return rec
}

// csvRows reads a CSV answer, header first.
func csvRows(t *testing.T, rec *httptest.ResponseRecorder) [][]string {
	t.Helper()
	if rec.Code != 200 {
		t.Fatalf("export: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != contentTypes[FormatCSV] {
		t.Errorf("Content-Type %q", ct)
	}
	rows, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v: %s", err, rec.Body)
	}
	return rows
}

// fixture writes readings of tenant A's agents A1 and A2 and tenant B's
// B1 over the hour before t0, with values missing, scores and units.
func (h *harness) fixture() {
	var rows []reading
	for i := range 90 {
		at := t0.Add(-time.Hour).Add(time.Duration(i) * 40 * time.Second).Add(123456 * time.Microsecond)
		r := reading{agent: apitest.AgentA1, metric: "boiler.temp", at: at, value: f(20 + float64(i)/7), quality: "GOOD", unit: "°C"}
		if i%10 == 3 {
			r.value, r.quality = nil, "BAD"
		}
		if i%4 == 0 {
			r.score = f(float64(i) / 100)
		}
		rows = append(rows, r,
			reading{agent: apitest.AgentA1, metric: "boiler.pressure", at: at, value: f(-1.5 * float64(i)), quality: "GOOD", unit: "bar"},
			reading{agent: apitest.AgentA2, metric: "pump,speed \"x\"", at: at, value: f(1e21 + float64(i)), quality: "GOOD"},
			reading{agent: apitest.AgentB1, metric: "boiler.temp", at: at, value: f(99), quality: "GOOD"})
	}
	h.insert(rows)
}

// TestStreamMatchesReadingsAPIIntegration: the CSV export of a series is
// row for row the raw time series the readings API answers, and with a
// step the buckets GET /readings/hourly answers.
func TestStreamMatchesReadingsAPIIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine, Settings{})
		h.fixture()
		start, end := t0.Add(-50*time.Minute).Format(time.RFC3339), t0.Format(time.RFC3339)

		// Raw: every series of the tenant, compared with each series'
		// /timeseries answer.
		rows := csvRows(t, h.raw("/export/readings?"+query("start", start, "end", end), "member-a"))
		if !slices.Equal(rows[0], rawColumns) {
			t.Fatalf("header %v", rows[0])
		}
		var want [][]string
		for _, s := range [][2]string{{apitest.AgentA1, "boiler.pressure"}, {apitest.AgentA1, "boiler.temp"}, {apitest.AgentA2, "pump,speed \"x\""}} {
			r := h.call("GET", "/readings/"+s[0]+"/timeseries?"+query("metric", s[1], "start", start, "end", end), "member-a").Expect(t, "timeseries", 200)
			for _, p := range r.List("points") {
				pt := p.(map[string]any)
				want = append(want, []string{pt["time"].(string), s[0], s[1], jsonNumber(pt["value"]), pt["quality"].(string),
					"", "", "", jsonNumber(pt["anomalyScore"])})
			}
		}
		if len(rows)-1 != len(want) || len(want) < 200 {
			t.Fatalf("export has %d rows, the readings API %d", len(rows)-1, len(want))
		}
		for i, w := range want {
			got := slices.Clone(rows[i+1])
			// The time series endpoint leaves out the attributes; they are
			// checked below.
			got[5], got[6], got[7] = "", "", ""
			if !slices.Equal(got, w) {
				t.Fatalf("row %d: export %q, readings API %q", i+1, rows[i+1], w)
			}
		}
		if r := rows[1]; r[5] != "boiler" || r[6] != "modbus" || r[7] != "bar" {
			t.Errorf("attributes of the first row: %q", r)
		}
		if r := rows[len(rows)-1]; r[5] != "pump,speed \"x\"" || r[7] != "" {
			t.Errorf("attributes of the last row: %q", r)
		}

		// Buckets: one agent, two metrics, 15-minute steps, against the
		// hourly statistics with 1h steps.
		rows = csvRows(t, h.raw("/export/readings?"+query("start", start, "end", end, "step", "1h", "agent_uuid", apitest.AgentA1,
			"metric", "boiler.temp", "metric", "boiler.pressure", "format", "csv"), "member-a"))
		if !slices.Equal(rows[0], bucketColumns) {
			t.Fatalf("header %v", rows[0])
		}
		r := h.call("GET", "/readings/hourly?"+query("start", start, "end", end, "agent_uuid", apitest.AgentA1), "member-a").Expect(t, "hourly", 200)
		want = nil
		for _, s := range r.List("series") {
			sm := s.(map[string]any)
			for _, b := range sm["buckets"].([]any) {
				bm := b.(map[string]any)
				want = append(want, []string{bm["time"].(string), sm["agentUuid"].(string), sm["metricName"].(string),
					jsonNumber(bm["min"]), jsonNumber(bm["max"]), jsonNumber(bm["avg"]), jsonNumber(bm["count"])})
			}
		}
		if len(want) < 2 || !slices.EqualFunc(rows[1:], want, slices.Equal) {
			t.Errorf("buckets:\nexport %q\nreadings API %q", rows[1:], want)
		}
		// 1-minute steps of one series against its 1m time series.
		rows = csvRows(t, h.raw("/export/readings?"+query("start", start, "end", end, "step", "1m", "agent_uuid", apitest.AgentA1,
			"metric", "boiler.temp"), "member-a"))
		r = h.call("GET", "/readings/"+apitest.AgentA1+"/timeseries?"+query("metric", "boiler.temp", "interval", "1m", "start", start, "end", end),
			"member-a").Expect(t, "timeseries 1m", 200)
		want = nil
		for _, b := range r.List("points") {
			bm := b.(map[string]any)
			want = append(want, []string{bm["time"].(string), apitest.AgentA1, "boiler.temp",
				jsonNumber(bm["min"]), jsonNumber(bm["max"]), jsonNumber(bm["avg"]), jsonNumber(bm["count"])})
		}
		if len(want) < 40 || !slices.EqualFunc(rows[1:], want, slices.Equal) {
			t.Errorf("1m buckets:\nexport %q\nreadings API %q", rows[1:], want)
		}
	})
}

// jsonNumber writes a JSON value of the readings API as the CSV does.
func jsonNumber(v any) string {
	switch n := v.(type) {
	case nil:
		return ""
	case float64:
		return formatFloat(n)
	case string:
		return n
	}
	return "?"
}

// TestExportTenancyAndAccessIntegration: tenant B exports nothing of
// A's agents and cannot see A's jobs; the licence gates every route;
// every user streams, only admins create jobs.
func TestExportTenancyAndAccessIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine, Settings{})
		h.fixture()
		q := query("start", t0.Add(-2*time.Hour).Format(time.RFC3339), "end", t0.Format(time.RFC3339))

		// B names A's agent, and asks for everything: only B's rows.
		rows := csvRows(t, h.raw("/export/readings?"+q+"&agent_uuid="+apitest.AgentA1, "admin-b"))
		if len(rows) != 1 {
			t.Errorf("tenant B got %d rows of A's agent", len(rows)-1)
		}
		rows = csvRows(t, h.raw("/export/readings?"+q, "admin-b"))
		for _, r := range rows[1:] {
			if r[1] != apitest.AgentB1 {
				t.Fatalf("tenant B got row %q", r)
			}
		}
		if len(rows) != 91 {
			t.Errorf("tenant B: %d rows, want 90", len(rows)-1)
		}
		rows = csvRows(t, h.raw("/export/readings?"+q, "viewer-a"))
		if len(rows) != 1+3*90 {
			t.Errorf("tenant A: %d rows, want 270", len(rows)-1)
		}

		// Jobs: an admin creates one (a member or a viewer may not); B
		// cannot see it or download it.
		h.call("POST", "/export/jobs?"+q, "viewer-a").ExpectError(t, 403, "forbidden")
		h.call("POST", "/export/jobs?"+q, "member-a").ExpectError(t, 403, "forbidden")
		j := h.call("POST", "/export/jobs?format=parquet&"+q, "admin-a").Expect(t, "create job", 202)
		id := j.Str("id")
		if j.Str("status") != StatusQueued || j.Str("downloadUrl") != "" {
			t.Errorf("new job: %s", j.Raw)
		}
		if kinds := h.audit.Kinds(); !slices.Equal(kinds, []string{AuditJobCreated}) {
			t.Errorf("audit %v", kinds)
		}
		h.call("GET", "/export/jobs/"+id, "admin-b").ExpectError(t, 404, "not_found")
		h.call("GET", "/export/jobs/not-a-uuid", "admin-a").ExpectError(t, 404, "not_found")
		if !h.x.runner.runOne(t.Context()) {
			t.Fatal("the runner found no job")
		}
		done := h.call("GET", "/export/jobs/"+id, "admin-a").Expect(t, "job", 200)
		if done.Str("status") != StatusDone || done.Body["rows"] != float64(270) || done.Str("downloadUrl") == "" {
			t.Fatalf("job: %s", done.Raw)
		}
		link := strings.TrimPrefix(done.Str("downloadUrl"), "/api/v1")
		// B's own job's link does not open A's file.
		jb := h.call("POST", "/export/jobs?"+q, "admin-b").Expect(t, "create B's job", 202)
		h.x.runner.runOne(t.Context())
		linkB := strings.TrimPrefix(h.call("GET", "/export/jobs/"+jb.Str("id"), "admin-b").Str("downloadUrl"), "/api/v1")
		tokB := linkB[strings.Index(linkB, "token="):]
		h.call("GET", "/export/jobs/"+id+"/download?"+tokB, "").ExpectError(t, 404, "not_found")
		h.call("GET", "/export/jobs/"+id+"/download", "").ExpectError(t, 404, "not_found")
		h.call("GET", "/export/jobs/"+id+"/download?token=1.AAAA", "").ExpectError(t, 404, "not_found")
		if rec := h.raw(link, ""); rec.Code != 200 || rec.Header().Get("Content-Type") != contentTypes[FormatParquet] ||
			!strings.HasPrefix(rec.Body.String(), "PAR1") {
			t.Fatalf("download: %d %q", rec.Code, rec.Header())
		}

		// Without the licence feature every route is refused.
		h.useLicence(licence.FeatureAI)
		for _, p := range []string{"/export/readings?" + q, "/export/jobs/" + id, link} {
			h.call("GET", p, "admin-a").ExpectError(t, 403, licence.CodeFeatureMissing)
		}
		h.call("POST", "/export/jobs?"+q, "admin-a").ExpectError(t, 403, licence.CodeFeatureMissing)
		h.call("GET", "/export/readings?"+q, "").ExpectError(t, 403, licence.CodeFeatureMissing)
		h.useLicence(licence.FeatureExport)
		h.call("GET", "/export/readings?"+q, "").ExpectError(t, 401, "unauthorized")
	})
}

// TestExportBadParametersIntegration: a bad parameter is 400 with a
// message that starts with its name.
func TestExportBadParametersIntegration(t *testing.T) {
	h := newHarness(t, "sqlite", Settings{})
	for _, tc := range []struct{ q, name string }{
		{"format=xlsx", "format"},
		{"format=csv&format=csv", "format"},
		{"agent_uuid=nope", "agent_uuid"},
		{"metric=" + strings.Repeat("m", 513), "metric"},
		{"start=yesterday", "start"},
		{"end=2026-13-01T00:00:00Z", "end"},
		{"start=2026-12-02T00:00:00Z&end=2026-12-01T00:00:00Z", "start"},
		{"step=2x", "step"},
		{"step=500ms", "step"},
		{"step=400d", "step"},
		{"step=1h&step=1d", "step"},
		{"agentUuid=" + apitest.AgentA1, `"agentUuid"`},
	} {
		for _, method := range []string{"GET /export/readings", "POST /export/jobs"} {
			m, p, _ := strings.Cut(method, " ")
			r := h.call(m, p+"?"+tc.q, "admin-a")
			r.ExpectError(t, 400, "invalid_parameter")
			if msg := r.Body["error"].(map[string]any)["message"].(string); !strings.HasPrefix(msg, tc.name+" ") {
				t.Errorf("%s?%s: message %q does not start with %s", method, tc.q, msg, tc.name)
			}
		}
	}
	var many []string
	for i := range readings.MaxExportAgents + 1 {
		many = append(many, "agent_uuid="+strings.Replace(apitest.AgentA1, "0001", strconv.Itoa(1000+i), 1))
	}
	h.call("GET", "/export/readings?"+strings.Join(many, "&"), "admin-a").ExpectError(t, 400, "invalid_parameter")
	h.call("GET", "/export/jobs/"+apitest.AgentA1+"/download?token=x&other=1", "").ExpectError(t, 400, "invalid_parameter")
}

// TestExportSettingsIntegration: api.export_dir holds the files,
// api.export_link_ttl bounds a link, api.export_retention deletes the
// job and its file.
func TestExportSettingsIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		c := config.API{ExportDir: filepath.Join(t.TempDir(), "exports"), ExportLinkTTL: 10 * time.Minute, ExportRetention: 3 * time.Hour}
		s := SettingsFrom(c)
		h := newHarness(t, engine, s)
		if err := h.x.runner.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.fixture()
		id := h.call("POST", "/export/jobs?"+query("start", t0.Add(-2*time.Hour).Format(time.RFC3339), "end", t0.Format(time.RFC3339)), "admin-a").
			Expect(t, "create", 202).Str("id")
		h.x.runner.runOne(t.Context())
		file := filepath.Join(c.ExportDir, apitest.TenantA, id+".csv")
		st, err := os.Stat(file)
		if err != nil {
			t.Fatalf("export file: %v", err)
		}
		j := h.call("GET", "/export/jobs/"+id, "admin-a").Expect(t, "job", 200)
		if j.Body["sizeBytes"] != float64(st.Size()) {
			t.Errorf("sizeBytes %v, file %d", j.Body["sizeBytes"], st.Size())
		}
		if exp, _ := time.Parse(time.RFC3339, j.Str("linkExpiresAt")); !exp.Equal(t0.Add(10 * time.Minute)) {
			t.Errorf("link expires at %s, want now + 10m", j.Str("linkExpiresAt"))
		}
		if exp, _ := time.Parse(time.RFC3339, j.Str("expiresAt")); !exp.Equal(t0.Add(3 * time.Hour)) {
			t.Errorf("job expires at %s, want now + 3h", j.Str("expiresAt"))
		}
		link := strings.TrimPrefix(j.Str("downloadUrl"), "/api/v1")
		rec := h.raw(link, "")
		if want, _ := os.ReadFile(file); rec.Code != 200 || rec.Body.String() != string(want) {
			t.Fatalf("download: %d, %d bytes of %d", rec.Code, rec.Body.Len(), len(want))
		}
		h.clock.Add(10 * time.Minute)
		h.call("GET", link, "").ExpectError(t, 410, "link_expired")
		// A fresh link works, but never past the file's retention.
		j = h.call("GET", "/export/jobs/"+id, "admin-a")
		if exp, _ := time.Parse(time.RFC3339, j.Str("linkExpiresAt")); !exp.Equal(t0.Add(20 * time.Minute)) {
			t.Errorf("fresh link expires at %s", j.Str("linkExpiresAt"))
		}
		h.clock.Add(2*time.Hour + 55*time.Minute)
		j = h.call("GET", "/export/jobs/"+id, "admin-a")
		if exp, _ := time.Parse(time.RFC3339, j.Str("linkExpiresAt")); !exp.Equal(t0.Add(3 * time.Hour)) {
			t.Errorf("link near retention expires at %s", j.Str("linkExpiresAt"))
		}
		h.clock.Add(5 * time.Minute)
		h.x.runner.sweep(t.Context())
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("file kept past retention: %v", err)
		}
		h.call("GET", "/export/jobs/"+id, "admin-a").ExpectError(t, 404, "not_found")
	})
}

// TestStreamedExportEmptyAndParquetIntegration: an export without rows
// is a valid file with its header; Parquet begins and ends with PAR1.
func TestStreamedExportEmptyAndParquetIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine, Settings{})
		rows := csvRows(t, h.raw("/export/readings", "admin-a"))
		if len(rows) != 1 {
			t.Errorf("empty export: %q", rows)
		}
		rec := h.raw("/export/readings?format=parquet&step=1d", "admin-a")
		b := rec.Body.String()
		if rec.Code != 200 || !strings.HasPrefix(b, "PAR1") || !strings.HasSuffix(b, "PAR1") {
			t.Errorf("empty parquet: %d %q", rec.Code, b)
		}
		if cd := rec.Header().Get("Content-Disposition"); !strings.Contains(cd, ".parquet") {
			t.Errorf("Content-Disposition %q", cd)
		}
	})
}
