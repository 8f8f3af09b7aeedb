package query

import (
	"fmt"
	"testing"
	"time"
)

// TestFindSeriesIntegration: the lookup returns the distinct series of
// the tenant that the matchers select with a sample in the range, sorted,
// capped with more reported; other tenants' series and valueless samples
// never count.
func TestFindSeriesIntegration(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			temp := labels{agentA, "boiler.temp", "boiler", "modbus", "°C"}
			temp2 := labels{agentB, "boiler.temp", "boiler", "", ""}
			pump := labels{agentA, "pump.speed", "pump", "modbus", ""}
			insertSamples(t, d, []sample{
				{Tenant: "t1", L: temp, T: testStart, V: fv(1)},
				{Tenant: "t1", L: temp, T: testStart.Add(time.Minute), V: fv(2)},
				{Tenant: "t1", L: temp2, T: testStart.Add(time.Minute), V: fv(3)},
				{Tenant: "t1", L: pump, T: testStart.Add(2 * time.Hour), V: fv(4)},
				{Tenant: "t1", L: labels{agentA, "valve.pos", "valve", "", ""}, T: testStart, V: nil},
				{Tenant: "t2", L: labels{agentA, "other.m", "other", "", ""}, T: testStart},
			})
			hour := testStart.Add(time.Hour)
			for _, tt := range []struct {
				src        string
				end        time.Time
				limit      int
				want       string
				more       bool
				tenantSeen string
			}{
				{`readings`, hour, 10, fmt.Sprint([]map[string]string{temp.toMap(), temp2.toMap()}), false, "t1"},
				{`readings`, hour, 1, fmt.Sprint([]map[string]string{temp.toMap()}), true, "t1"},
				{`readings{metric_name=~"pump.*|boiler.*", protocol="modbus"}`, testStart.Add(3 * time.Hour), 10,
					fmt.Sprint([]map[string]string{temp.toMap(), pump.toMap()}), false, "t1"},
				{`readings{metric_name="valve.pos"}`, hour, 10, "[]", false, "t1"},
				{`readings{metric_name="boiler.temp"}`, hour, 10, "[]", false, "t3"},
			} {
				e, err := Parse(tt.src)
				if err != nil {
					t.Fatal(err)
				}
				got, more, err := FindSeries(t.Context(), d.ReadSQL(), d.Dialect(), tt.tenantSeen, e.(*Selector), testStart, tt.end, Limits{}, tt.limit)
				if err != nil {
					t.Fatalf("%s: %v", tt.src, err)
				}
				if fmt.Sprint(got) != tt.want || more != tt.more {
					t.Errorf("%s as %s (limit %d): %v, more %v; want %s, more %v", tt.src, tt.tenantSeen, tt.limit, got, more, tt.want, tt.more)
				}
			}
			if _, _, err := FindSeries(t.Context(), d.ReadSQL(), d.Dialect(), "t1", &Selector{}, testStart, testStart.Add(100*24*time.Hour), Limits{}, 10); err == nil {
				t.Error("a 100-day lookup passed max_range")
			}
		})
	}
}
