package readings

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/query"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// rollUp runs one rollup round at now and checks it covers something.
func rollUp(t *testing.T, d *db.DB, now time.Time) rollup.Coverage {
	t.Helper()
	w := rollup.New(d, rollup.Options{Now: func() time.Time { return now }})
	if ran, err := w.Round(t.Context()); err != nil || !ran {
		t.Fatalf("rollup round = %v, %v", ran, err)
	}
	c, err := rollup.Load(t.Context(), d.SQL())
	if err != nil {
		t.Fatal(err)
	}
	if c.Hourly.From.IsZero() || !c.Hourly.From.Before(c.Hourly.To) {
		t.Fatalf("rollups cover nothing: %+v", c)
	}
	return c
}

// deleteRawBefore does what raw retention does.
func deleteRawBefore(t *testing.T, d *db.DB, cut time.Time) {
	t.Helper()
	if _, err := d.SQL().ExecContext(t.Context(), `DELETE FROM readings WHERE time < $1`, d.Dialect().TimeArg(cut)); err != nil {
		t.Fatal(err)
	}
}

// bucketed reports whether a case reads statistics the rollups serve.
func bucketed(tc apiCase) bool {
	for _, s := range []string{"/hourly", "/daily", "/aggregate", "interval=1h", "interval=1d", "/query"} {
		if strings.Contains(tc.path, s) {
			return true
		}
	}
	return false
}

// TestReadingsOverRollupsIntegration: once the rollups hold the
// fixture's hours and days (the hour before testNow and later are not
// rolled up yet), every read answers as before, partial buckets and
// buckets straddling the rollups' end included; and the statistics still
// do once raw retention deleted every reading the rollups hold, agents
// left with rollups alone included.
func TestReadingsOverRollupsIntegration(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			insertFixture(t, d)
			h := newRouter(t, d, query.Limits{}, testNow)
			for _, tc := range setupCases {
				tc.run(t, h)
			}
			c := rollUp(t, d, testNow)
			if want := mustTime("2024-03-11T00:00:00Z"); !c.Hourly.To.Equal(want) {
				t.Fatalf("hourly rollup ends %v, want %v", c.Hourly.To, want)
			}
			for _, phase := range []struct {
				name  string
				h     http.Handler
				cases []apiCase
			}{
				{"read", h, readCases},
				{"tight", newRouter(t, d, query.Limits{MaxSeries: 1, MaxPointsPerSeries: 4, MaxRange: 2 * day}, testNow), tightCases},
				{"rows", newRouter(t, d, query.Limits{MaxRows: 2}, testNow), rowCases},
			} {
				t.Run(phase.name, func(t *testing.T) {
					for _, tc := range phase.cases {
						t.Run(tc.name, func(t *testing.T) { tc.run(t, phase.h) })
					}
				})
			}
			deleteRawBefore(t, d, c.Hourly.To)
			// These end inside an hour, whose part only raw readings have.
			partialEnd := map[string]bool{"hourly": true, "hourly with partial buckets": true, "hourly time series": true}
			t.Run("raw deleted", func(t *testing.T) {
				for _, tc := range readCases {
					if bucketed(tc) && !strings.Contains(tc.path, "/query") && !partialEnd[tc.name] {
						t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
					}
				}
			})
		})
	}
}

// TestLongRangesFromRollupsIntegration: 70 days of readings; statistics
// over 60 days answer the same from raw readings alone, from rollups and
// raw readings, and from rollups once raw retention (30 days here) has
// deleted the older readings.
func TestLongRangesFromRollupsIntegration(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			now := mustTime("2024-06-01T10:20:00Z")
			start := now.Add(-70 * day).Truncate(day)
			tx, err := d.SQL().BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for at := start; at.Before(now); at = at.Add(47 * time.Minute) {
				for i, a := range []string{agentA1, agentA2, agentB1} {
					tenant := tenantA
					if a == agentB1 {
						tenant = tenantB
					}
					v := float64((n*7+i*3)%40) * 0.25
					if _, err := tx.ExecContext(t.Context(), insertSQL, d.Dialect().TimeArg(at), a, fmt.Sprintf("m%d", n%3), v,
						nil, nil, "good", "dev", tenant); err != nil {
						t.Fatal(err)
					}
				}
				n++
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			h := newRouter(t, d, query.Limits{}, now)
			// A partial first bucket needs the raw readings of its part:
			// ranges starting on a boundary answer from rollups alone.
			partial := now.Add(-60 * day).Add(-17 * time.Minute).Format(time.RFC3339)
			whole := now.Add(-60 * day).Truncate(day).Format(time.RFC3339)
			var paths []string
			for _, from := range []string{whole, partial} {
				paths = append(paths,
					"/api/v1/readings/hourly?start="+from,
					"/api/v1/readings/daily?start="+from,
					"/api/v1/readings/daily?start="+from+"&agent_uuid="+agentA2+"&metric=m1",
					"/api/v1/readings/"+agentA1+"/aggregate?granularity=hourly&start="+from,
					"/api/v1/readings/"+agentA1+"/timeseries?metric=m2&interval=1d&start="+from)
			}
			get := func(path string) any {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Header.Set(tenantHeader, tenantA)
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					t.Fatalf("%s = %d %s", path, rec.Code, rec.Body)
				}
				var v any
				if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
					t.Fatal(err)
				}
				return v
			}
			raw := map[string]any{}
			for _, p := range paths {
				raw[p] = get(p)
			}
			c := rollUp(t, d, now)
			check := func(what string, paths []string) {
				for _, p := range paths {
					if got := get(p); !reflect.DeepEqual(got, raw[p]) {
						g, _ := json.Marshal(got)
						w, _ := json.Marshal(raw[p])
						t.Errorf("%s %s (%+v):\ngot  %.600s\nwant %.600s", what, p, c, g, w)
					}
				}
			}
			check("over rollups", paths)
			deleteRawBefore(t, d, now.Add(-30*day))
			check("raw deleted", paths[:5])
		})
	}
}
