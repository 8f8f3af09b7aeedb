package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// TestDeviceHealthAndHistoryIntegration: device-health shows the latest
// state report's endpoints, stale once the report is older than the
// silence; history counts one device's readings per bucket and quality,
// with the report's poll counters, and nothing of other devices or tenants.
func TestDeviceHealthAndHistoryIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		h, _, _ := fullRole(t, d, testLicence(t, 0))
		tok := admin(t, h)
		fresh := call(t, h, "POST", "/api/v1/agents", tok, map[string]string{"name": "fresh"})
		old := call(t, h, "POST", "/api/v1/agents", tok, map[string]string{"name": "old"})
		agent, oldAgent := fresh.str("uuid"), old.str("uuid")
		tu, _ := codec.ParseUUID(fresh.str("tenantId"))
		tenant := codec.EncodeID(tu)
		ctx := t.Context()

		if r := call(t, h, "GET", "/api/v1/agents/"+agent+"/device-health", tok, nil); r.status != http.StatusNotFound {
			t.Fatalf("device-health without a report: %d %s", r.status, r.raw)
		}
		now := time.Now().UTC().Truncate(time.Second)
		report := `{"timestamp":%d,"endpoints":[{"name":"plc1","protocol":"modbus","enabled":true,"status":"connected","connected":true,` +
			`"communicationQuality":0.9,"polls":120,"pollFailures":3,"readsGood":230,"readsBad":10,"lastError":"timeout"},` +
			`{"name":"meter","protocol":"opcua","enabled":false,"status":"stopped","connected":false,"communicationQuality":0,"polls":0,"pollFailures":0,"readsGood":0,"readsBad":0}]}`
		for _, r := range []struct {
			agent string
			at    time.Time
		}{{agent, now}, {oldAgent, now.Add(-time.Hour)}} {
			doc := fmt.Sprintf(report, r.at.UnixMilli())
			if _, err := upsertReport(ctx, d, tenant, r.agent, "state", []byte(doc), r.at, r.at); err != nil {
				t.Fatal(err)
			}
		}
		r := call(t, h, "GET", "/api/v1/agents/"+agent+"/device-health", tok, nil)
		devs, _ := r.body["devices"].([]any)
		if r.status != http.StatusOK || len(devs) != 2 || r.body["stale"] != false {
			t.Fatalf("device-health: %d %s", r.status, r.raw)
		}
		if p := devs[0].(map[string]any); p["name"] != "plc1" || p["status"] != "connected" || p["stale"] != false || p["pollFailures"] != 3.0 {
			t.Errorf("plc1: %v", p)
		}
		r = call(t, h, "GET", "/api/v1/agents/"+oldAgent+"/device-health", tok, nil)
		devs, _ = r.body["devices"].([]any)
		if r.status != http.StatusOK || len(devs) != 2 || r.body["stale"] != true {
			t.Fatalf("device-health of an hour-old report: %d %s", r.status, r.raw)
		}
		if p := devs[0].(map[string]any); p["status"] != "stale" || p["reportedStatus"] != "connected" || p["stale"] != true {
			t.Errorf("plc1 of an hour-old report: %v", p)
		}

		// Readings: plc1 in two one-minute buckets, plus rows that must
		// not count (another device, protocol, tenant, or out of range).
		base := now.Truncate(time.Minute).Add(-10 * time.Minute)
		dl := d.Dialect()
		insert := func(at time.Time, metric, device, protocol, quality, tenantID string) {
			t.Helper()
			if _, err := d.SQL().ExecContext(ctx, `INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, quality, device_name, tenant_id)
VALUES ($1, $2, $3, 1, $4, $5, $6, $7)`, dl.TimeArg(at), agent, metric, protocol, quality, device, tenantID); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 5 {
			insert(base.Add(time.Duration(i)*time.Second), "temp", "plc1", "modbus", "GOOD", tenant)
		}
		insert(base.Add(10*time.Second), "rpm", "plc1", "modbus", "BAD", tenant)
		insert(base.Add(90*time.Second), "temp", "plc1", "modbus", "GOOD", tenant)
		insert(base.Add(2*time.Second), "temp2", "plc2", "modbus", "GOOD", tenant)
		insert(base.Add(3*time.Second), "other", "plc1", "opcua", "GOOD", tenant)
		insert(base.Add(4*time.Second), "leak", "plc1", "modbus", "GOOD", "someoneelse000000000000")
		insert(base.Add(-time.Hour), "temp", "plc1", "modbus", "GOOD", tenant)

		path := "/api/v1/agents/" + agent + "/protocol-adapters/modbus/plc1/history?from=" + base.Format(time.RFC3339) +
			"&to=" + base.Add(3*time.Minute).Format(time.RFC3339) + "&bucket=1m"
		r = call(t, h, "GET", path, tok, nil)
		if r.status != http.StatusOK || r.body["total"] != 7.0 {
			t.Fatalf("history: %d %s", r.status, r.raw)
		}
		bs := r.body["buckets"].([]any)
		if len(bs) != 3 {
			t.Fatalf("%d buckets, want 3: %s", len(bs), r.raw)
		}
		b0, b1, b2 := bs[0].(map[string]any), bs[1].(map[string]any), bs[2].(map[string]any)
		q0 := b0["byQuality"].(map[string]any)
		if b0["count"] != 6.0 || q0["GOOD"] != 5.0 || q0["BAD"] != 1.0 || b1["count"] != 1.0 || b2["count"] != 0.0 ||
			b0["time"] != base.Format(time.RFC3339) {
			t.Errorf("buckets: %v", bs)
		}
		rep := r.body["report"].(map[string]any)
		if rep["polls"] != 120.0 || rep["pollFailures"] != 3.0 || rep["lastError"] != "timeout" || rep["stale"] != false {
			t.Errorf("report counters: %v", rep)
		}
		// Unknown device: empty buckets and no report.
		r = call(t, h, "GET", strings.Replace(path, "/plc1/", "/nope/", 1), tok, nil)
		if r.status != http.StatusOK || r.body["total"] != 0.0 || r.body["report"] != nil {
			t.Errorf("unknown device: %d %s", r.status, r.raw)
		}
		for _, q := range []string{"bucket=0", "bucket=1.5s", "from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
			"from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z&bucket=24h", "from=2026-01-01T00:00:00Z&to=2026-01-03T00:00:00Z&bucket=1m", "from=yesterday"} {
			r := call(t, h, "GET", "/api/v1/agents/"+agent+"/protocol-adapters/modbus/plc1/history?"+q, tok, nil)
			if r.status != http.StatusBadRequest || r.str("error", "code") != "invalid_parameter" {
				t.Errorf("history?%s: %d %s, want 400", q, r.status, r.raw)
			}
		}
	})
}

func TestParseHistoryQuery(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	q, err := parseHistoryQuery("", "", "", now)
	if err != nil || !q.to.Equal(now) || !q.from.Equal(now.Add(-time.Hour)) || q.bucket != time.Minute {
		t.Errorf("defaults: %+v %v", q, err)
	}
	q, err = parseHistoryQuery("2026-11-22T09:00:00Z", "2026-11-22T11:00:00+01:00", "300", now)
	if err != nil || q.bucket != 5*time.Minute || !q.to.Equal(now.Add(-2*time.Hour)) || q.to.Location() != time.UTC {
		t.Errorf("explicit: %+v %v", q, err)
	}
}

func FuzzParseHistoryQuery(f *testing.F) {
	f.Add("2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z", "1m")
	f.Add("", "", "86400")
	f.Add("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "9223372036s")
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, from, to, bucket string) {
		q, err := parseHistoryQuery(from, to, bucket, now)
		if err != nil {
			return
		}
		// An accepted query is bounded: what readHistory allocates and the
		// database scans follow from these.
		if q.bucket < time.Second || !q.from.Before(q.to) || q.to.Sub(q.from) > maxHistoryRange || q.to.Sub(q.from)/q.bucket >= maxHistoryBuckets {
			t.Fatalf("accepted an unbounded query %+v", q)
		}
	})
}
