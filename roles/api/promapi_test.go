package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
)

// promSample is a [time, "value"] pair of Prometheus's JSON.
type promSample [2]json.RawMessage

func (s promSample) at(t *testing.T) (time.Time, float64) {
	t.Helper()
	sec, err := strconv.ParseFloat(string(s[0]), 64)
	if err != nil {
		t.Fatalf("sample time %s: %v", s[0], err)
	}
	var text string
	if err := json.Unmarshal(s[1], &text); err != nil {
		t.Fatalf("sample value %s: %v", s[1], err)
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		t.Fatalf("sample value %q: %v", text, err)
	}
	return time.UnixMilli(int64(math.Round(sec * 1000))).UTC(), v
}

type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  promSample        `json:"value"`
	Values []promSample      `json:"values"`
}

// promtool runs promtool with -o json and decodes what it prints into out.
func promtool(t *testing.T, bin string, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"query"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	raw, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("promtool %s: %v\n%s%s", strings.Join(args, " "), err, raw, stderr)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("promtool %s printed %q: %v", strings.Join(args, " "), raw, err)
	}
}

type rawReading struct {
	t time.Time
	v float64
}

// TestPrometheusAPIPromtoolIntegration: promtool, a real Prometheus client,
// reads readings through /api/v1/prom with an API key (as a basic-auth
// password and as a Bearer header) and gets the values the readings API
// gives: the raw series, an average and a rate over windows computed from
// it here, and POST /readings/query's answers. Another tenant's key sees
// none of the series, labels or values.
func TestPrometheusAPIPromtoolIntegration(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		coretest.Unavailable(t, "promtool", "PATH", err)
		return
	}
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _ := fullEngine(t, d, testLicence(t, 0))
		srv := httptest.NewServer(e)
		defer srv.Close()
		tokA, tokB, agentA := twoTenants(t, e)
		agentB := call(t, e, "POST", "/api/v1/agents", tokB, map[string]any{"name": "b-agent"}).str("uuid")
		keyA := call(t, e, "POST", "/api/v1/api-keys", tokA, map[string]string{"name": "grafana"}).str("key")
		keyB := call(t, e, "POST", "/api/v1/api-keys", tokB, map[string]string{"name": "grafana"}).str("key")
		if keyA == "" || keyB == "" || agentB == "" {
			t.Fatal("no API keys or no agent for tenant B")
		}

		// Samples every 10 s, 3 s past the step grid, for 30 minutes: a
		// gauge, and a counter that resets once.
		t0 := time.Date(2024, 3, 11, 10, 0, 0, 0, time.UTC)
		var body, bodyB []map[string]any
		counter := 0.0
		for i := range 180 {
			at := t0.Add(time.Duration(i)*10*time.Second + 3*time.Second)
			counter += float64(i%5 + 1)
			if i == 100 {
				counter = 2
			}
			gauge := 20 + float64(i%17)*0.5 + float64(i)*0.01
			body = append(body,
				map[string]any{"agentUuid": agentA, "metricName": "boiler.temp", "value": gauge, "time": at.Format(time.RFC3339),
					"unit": "°C", "deviceName": "boiler", "protocol": "modbus"},
				map[string]any{"agentUuid": agentA, "metricName": "pump.strokes", "value": counter, "time": at.Format(time.RFC3339),
					"deviceName": "pump", "protocol": "modbus"})
			if i%6 == 0 {
				bodyB = append(bodyB, map[string]any{"agentUuid": agentB, "metricName": "boiler.temp", "value": -gauge, "time": at.Format(time.RFC3339),
					"deviceName": "boiler", "protocol": "opcua"})
			}
		}
		for _, w := range []struct {
			tok  string
			body any
		}{{tokA, body}, {tokB, bodyB}} {
			if r := call(t, e, "POST", "/api/v1/readings", w.tok, w.body); r.status != http.StatusCreated && r.status != http.StatusOK {
				t.Fatalf("insert readings: %d %s", r.status, r.raw)
			}
		}

		// The raw series, as the readings API gives it.
		rawOf := func(metric string) []rawReading {
			r := call(t, e, "GET", "/api/v1/readings/"+agentA+"/timeseries?metric="+metric+"&start="+t0.Format(time.RFC3339)+
				"&end="+t0.Add(time.Hour).Format(time.RFC3339), tokA, nil)
			var got struct {
				Points []struct {
					Time  time.Time `json:"time"`
					Value float64   `json:"value"`
				} `json:"points"`
			}
			if err := json.Unmarshal([]byte(r.raw), &got); err != nil || r.status != http.StatusOK || len(got.Points) != 180 {
				t.Fatalf("timeseries of %s: %d %s", metric, r.status, shorten(r.raw))
			}
			out := make([]rawReading, len(got.Points))
			for i, p := range got.Points {
				out[i] = rawReading{p.Time, p.Value}
			}
			return out
		}
		temps := rawOf("boiler.temp")

		u, err := url.Parse(srv.URL + "/api/v1/prom")
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword("grafana", keyA)
		basicA := u.String()
		u.User = url.UserPassword("grafana", keyB)
		basicB := u.String()
		bare := srv.URL + "/api/v1/prom"
		rfc := func(t time.Time) string { return t.Format(time.RFC3339) }
		start, end := t0.Add(5*time.Minute), t0.Add(30*time.Minute)

		// Instant: the latest sample at or before the time.
		at := t0.Add(20 * time.Minute)
		var vec []promSeries
		promtool(t, bin, &vec, "instant", "-o", "json", "--time="+rfc(at), basicA, `boiler.temp{agent="`+agentA+`"}`)
		var want rawReading
		for _, p := range temps {
			if !p.t.After(at) {
				want = p
			}
		}
		if len(vec) != 1 {
			t.Fatalf("instant query: %d series, want 1: %+v", len(vec), vec)
		}
		gotT, gotV := vec[0].Value.at(t)
		if gotV != want.v || !gotT.Equal(at) || vec[0].Metric["__name__"] != "boiler.temp" || vec[0].Metric["agent"] != agentA ||
			vec[0].Metric["device"] != "boiler" || vec[0].Metric["unit"] != "°C" || vec[0].Metric["protocol"] != "modbus" {
			t.Errorf("instant query: %v %v at %s, want %v (the reading of %s)", vec[0].Metric, gotV, gotT, want.v, want.t)
		}

		// A constant, as Grafana's data source test sends.
		var scalar promSample
		promtool(t, bin, &scalar, "instant", "-o", "json", "--time="+rfc(at), basicA, "1+1")
		if ts, v := scalar.at(t); v != 2 || !ts.Equal(at) {
			t.Errorf("1+1: %v at %s", v, ts)
		}

		// Range queries, Bearer in a header this time.
		rangeOf := func(expr string) []promSeries {
			var m []promSeries
			promtool(t, bin, &m, "range", "-o", "json", "--header=Authorization=Bearer "+keyA, "--start="+rfc(start), "--end="+rfc(end),
				"--step=1m", bare, expr)
			return m
		}
		steps := int(end.Sub(start)/time.Minute) + 1
		checkAgainst := func(what string, got []promSeries, expect func(t time.Time) (float64, bool)) {
			t.Helper()
			if len(got) != 1 {
				t.Fatalf("%s: %d series, want 1", what, len(got))
			}
			if len(got[0].Values) != steps {
				t.Errorf("%s: %d points, want %d", what, len(got[0].Values), steps)
			}
			for _, s := range got[0].Values {
				ts, v := s.at(t)
				w, ok := expect(ts)
				if !ok || math.Abs(v-w) > 1e-9*math.Max(1, math.Abs(w)) {
					t.Errorf("%s at %s: %v, want %v (from the readings API)", what, ts, v, w)
				}
			}
		}
		window := func(ts time.Time, rng time.Duration) []rawReading {
			var in []rawReading
			for _, p := range temps {
				if !p.t.Before(ts.Add(-rng)) && p.t.Before(ts) {
					in = append(in, p)
				}
			}
			return in
		}
		checkAgainst("boiler.temp over a range", rangeOf(`boiler.temp{agent="`+agentA+`"}`), func(ts time.Time) (float64, bool) {
			in := window(ts, 5*time.Minute)
			if len(in) == 0 {
				return 0, false
			}
			return in[len(in)-1].v, true
		})
		checkAgainst("avg_over_time", rangeOf(`avg_over_time({"boiler.temp", agent="`+agentA+`"}[5m])`), func(ts time.Time) (float64, bool) {
			in := window(ts, 5*time.Minute)
			sum := 0.0
			for _, p := range in {
				sum += p.v
			}
			return sum / float64(len(in)), len(in) > 0
		})

		// Against POST /readings/query: the same language underneath.
		for _, tc := range []struct{ prom, lang string }{
			{`rate(pump.strokes{agent="` + agentA + `"}[5m])`, `rate(readings{agent_uuid="` + agentA + `", metric_name="pump.strokes"}[5m])`},
			{`max by (device) (max_over_time({__name__=~"boiler.*|pump.*"}[2m]))`, `max by (device_name) (max_over_time(readings{metric_name=~"boiler.*|pump.*"}[2m]))`},
		} {
			r := call(t, e, "POST", "/api/v1/readings/query", tokA, map[string]string{"query": tc.lang, "start": rfc(start), "end": rfc(end), "step": "1m"})
			var lang struct {
				Series []struct {
					Labels map[string]string `json:"labels"`
					Points []struct {
						T time.Time `json:"t"`
						V float64   `json:"v"`
					} `json:"points"`
				} `json:"series"`
			}
			if err := json.Unmarshal([]byte(r.raw), &lang); err != nil || r.status != http.StatusOK || len(lang.Series) == 0 {
				t.Fatalf("readings query %s: %d %s", tc.lang, r.status, shorten(r.raw))
			}
			got := rangeOf(tc.prom)
			if len(got) != len(lang.Series) {
				t.Fatalf("%s: %d series, the readings API %d", tc.prom, len(got), len(lang.Series))
			}
			for i, s := range lang.Series {
				if len(got[i].Values) != len(s.Points) || got[i].Metric["device"] != s.Labels["device_name"] {
					t.Fatalf("%s series %d: %v with %d points, the readings API %v with %d", tc.prom, i, got[i].Metric, len(got[i].Values), s.Labels, len(s.Points))
				}
				for j, p := range s.Points {
					ts, v := got[i].Values[j].at(t)
					if !ts.Equal(p.T) || v != p.V {
						t.Errorf("%s at %s: %v at %s, the readings API %v", tc.prom, p.T, v, ts, p.V)
					}
				}
			}
			t.Logf("%s: %d series of %d points equal to POST /readings/query", tc.prom, len(got), len(lang.Series[0].Points))
		}

		// Tenancy: B's key finds none of A's series, labels or values.
		var seriesA, seriesB []map[string]string
		promtool(t, bin, &seriesA, "series", "-o", "json", "--match=boiler.temp", "--start="+rfc(t0), "--end="+rfc(end), basicA)
		promtool(t, bin, &seriesB, "series", "-o", "json", "--match=boiler.temp", "--start="+rfc(t0), "--end="+rfc(end), basicB)
		if len(seriesA) != 1 || seriesA[0]["agent"] != agentA || len(seriesB) != 1 || seriesB[0]["agent"] != agentB {
			t.Errorf("series of boiler.temp: A sees %v, B sees %v", seriesA, seriesB)
		}
		var agentsB, namesB []string
		promtool(t, bin, &agentsB, "labels", "-o", "json", "--start="+rfc(t0), "--end="+rfc(end), basicB, "agent")
		promtool(t, bin, &namesB, "labels", "-o", "json", "--start="+rfc(t0), "--end="+rfc(end), basicB, "__name__")
		if fmt.Sprint(agentsB) != "["+agentB+"]" || fmt.Sprint(namesB) != "[boiler.temp]" {
			t.Errorf("B's label values: agents %v, names %v", agentsB, namesB)
		}
		var vecB []promSeries
		promtool(t, bin, &vecB, "instant", "-o", "json", "--time="+rfc(at), basicB, `{agent="`+agentA+`"}`)
		if len(vecB) != 0 {
			t.Errorf("B's instant query of A's agent: %+v", vecB)
		}
	})
}

func shorten(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
