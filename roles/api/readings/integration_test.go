package readings

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/query"
)

const (
	tenantA = "tenant-a"
	tenantB = "tenant-b"
	// Agent ids sort A1 < A2 < B1 < A3, on both engines. A2 has letters
	// so a request can spell it in upper case.
	agentA1 = "11111111-1111-4111-8111-111111111111"
	agentA2 = "2b2b2b2b-2222-4222-8222-222222222222"
	agentB1 = "3c3c3c3c-3333-4333-8333-333333333333"
	agentA3 = "44444444-4444-4444-8444-444444444444"
)

// testNow is the clock of every request: default ranges end here.
var testNow = mustTime("2024-03-11T01:00:00Z")

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

type fixtureRow struct {
	tenant, agent, metric, device, protocol, unit, quality string
	time                                                   string
	value                                                  any // float64 or nil
}

// fixture is the data every expectation below is computed from by hand.
// Times sit on and next to hour and day boundaries; A2's pump.speed is
// written through POST /readings instead (see insertPump).
var fixture = []fixtureRow{
	{tenantA, agentA1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-10T09:00:00Z", 10.0},
	{tenantA, agentA1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-10T09:30:00Z", 20.0},
	{tenantA, agentA1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-10T10:00:00Z", 30.0},
	{tenantA, agentA1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-10T10:59:59.999999Z", 40.0},
	{tenantA, agentA1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-10T11:00:00Z", 50.0},
	{tenantA, agentA1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-10T23:30:00Z", 60.0},
	{tenantA, agentA1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-11T00:00:00Z", 70.0},
	{tenantA, agentA1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-11T00:30:00Z", 80.0},
	{tenantA, agentA1, "boiler.pressure", "boiler", "modbus", "bar", "good", "2024-03-10T09:15:00Z", 1.5},
	{tenantA, agentA1, "boiler.pressure", "boiler", "modbus", "bar", "good", "2024-03-10T10:15:00Z", 2.5},
	{tenantA, agentA1, "boiler.pressure", "boiler", "modbus", "bar", "bad", "2024-03-10T10:45:00Z", nil},
	// An older reading of the same metric in another unit: the catalog
	// takes the newest metadata, the profiles list both units.
	{tenantA, agentA2, "boiler.temp", "boiler", "modbus", "K", "good", "2024-03-09T12:00:00Z", 278.5},
	// Tenant B: the same metric name, and a reading newer than any of A's.
	{tenantB, agentB1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-10T09:10:00Z", 999.0},
	{tenantB, agentB1, "boiler.temp", "boiler", "modbus", "°C", "good", "2024-03-11T00:45:00Z", 1000.0},
	{tenantB, agentB1, "secret.x", "secret", "mqtt", "", "", "2024-03-10T10:00:00Z", 7.0},
}

func insertFixture(t *testing.T, d *db.DB) {
	t.Helper()
	ctx := t.Context()
	tx, err := d.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	dialect := d.Dialect()
	for _, r := range fixture {
		if _, err := tx.ExecContext(ctx, insertSQL, dialect.TimeArg(mustTime(r.time)), r.agent, r.metric, r.value,
			nullable(r.protocol), nullable(r.unit), nullable(r.quality), nullable(r.device), r.tenant); err != nil {
			t.Fatalf("insert %+v: %v", r, err)
		}
	}
	// Two of A1's temperatures carry the agent's anomaly score, as the
	// ingest writes it; the others have none.
	for _, sc := range []struct {
		at    string
		score float64
	}{{"2024-03-10T10:00:00Z", 0.5}, {"2024-03-11T00:30:00Z", 0.875}} {
		if _, err := tx.ExecContext(ctx, `UPDATE readings SET anomaly_score = $1 WHERE agent_uuid = $2 AND metric_name = 'boiler.temp' AND time = $3`,
			sc.score, agentA1, dialect.TimeArg(mustTime(sc.at))); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// pumpBody writes A2's pump.speed: four readings in the minutes from
// 09:00, the last on the edge of a minute bucket. deviceName is left out
// and comes from the metric name.
const pumpBody = `[
	{"agentUuid": "$A2", "metricName": "pump.speed", "value": 100, "time": "2024-03-10T09:00:00Z", "unit": "rpm", "quality": "good", "protocol": "opcua"},
	{"agentUuid": "$A2", "metricName": "pump.speed", "value": 150, "time": 1710061230000, "unit": "rpm", "quality": "good", "protocol": "opcua"},
	{"agentUuid": "$A2", "metricName": "pump.speed", "value": 200, "time": "2024-03-10T10:01:00+01:00", "unit": "rpm", "quality": "good", "protocol": "opcua"},
	{"agentUuid": "$A2", "metricName": "pump.speed", "value": 300, "time": "2024-03-10T09:02:59.999999Z", "unit": "rpm", "quality": "good", "protocol": "opcua"}
]`

// setupCases write the data that readCases read.
var setupCases = []apiCase{
	{name: "insert an array", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: pumpBody,
		status: 201, want: `{"inserted": 4, "ignored": 0}`},
	{name: "insert the same again", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: pumpBody,
		status: 201, want: `{"inserted": 0, "ignored": 4}`},
}

// The expected answers, by hand from fixture and pumpBody.
const (
	latestA = `{"truncated": false, "readings": [
		{"agentUuid": "$A1", "metricName": "boiler.pressure", "deviceName": "boiler", "protocol": "modbus", "unit": "bar", "quality": "bad", "time": "2024-03-10T10:45:00Z", "value": null},
		{"agentUuid": "$A1", "metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "°C", "quality": "good", "time": "2024-03-11T00:30:00Z", "value": 80, "anomalyScore": 0.875},
		{"agentUuid": "$A2", "metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "K", "quality": "good", "time": "2024-03-09T12:00:00Z", "value": 278.5},
		{"agentUuid": "$A2", "metricName": "pump.speed", "deviceName": "pump", "protocol": "opcua", "unit": "rpm", "quality": "good", "time": "2024-03-10T09:02:59.999999Z", "value": 300}]}`
	latestA2 = `{"truncated": false, "readings": [
		{"agentUuid": "$A2", "metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "K", "quality": "good", "time": "2024-03-09T12:00:00Z", "value": 278.5},
		{"agentUuid": "$A2", "metricName": "pump.speed", "deviceName": "pump", "protocol": "opcua", "unit": "rpm", "quality": "good", "time": "2024-03-10T09:02:59.999999Z", "value": 300}]}`
	latestB = `{"truncated": false, "readings": [
		{"agentUuid": "$B1", "metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "°C", "quality": "good", "time": "2024-03-11T00:45:00Z", "value": 1000},
		{"agentUuid": "$B1", "metricName": "secret.x", "deviceName": "secret", "protocol": "mqtt", "unit": "", "quality": "", "time": "2024-03-10T10:00:00Z", "value": 7}]}`
	noReadings = `{"truncated": false, "readings": []}`

	pumpCatalog = `{"metricName": "pump.speed", "deviceName": "pump", "protocol": "opcua", "unit": "rpm", "agentCount": 1,
		"firstSeen": "2024-03-10T09:00:00Z", "lastSeen": "2024-03-10T09:02:59.999999Z", "sampleCount": 4}`

	tempA1 = `"$A1", "metricName": "boiler.temp"`
	hourA1 = `{"agentUuid": ` + tempA1 + `, "buckets": [
		{"time": "2024-03-10T09:00:00Z", "min": 10, "max": 20, "avg": 15, "count": 2},
		{"time": "2024-03-10T10:00:00Z", "min": 30, "max": 40, "avg": 35, "count": 2},
		{"time": "2024-03-10T11:00:00Z", "min": 50, "max": 50, "avg": 50, "count": 1}]}`
	pressureHours = `{"agentUuid": "$A1", "metricName": "boiler.pressure", "buckets": [
		{"time": "2024-03-10T09:00:00Z", "min": 1.5, "max": 1.5, "avg": 1.5, "count": 1},
		{"time": "2024-03-10T10:00:00Z", "min": 2.5, "max": 2.5, "avg": 2.5, "count": 1}]}`
	pumpHour = `{"agentUuid": "$A2", "metricName": "pump.speed", "buckets": [
		{"time": "2024-03-10T09:00:00Z", "min": 100, "max": 300, "avg": 187.5, "count": 4}]}`
	pressureDay = `{"agentUuid": "$A1", "metricName": "boiler.pressure", "buckets": [
		{"time": "2024-03-10T00:00:00Z", "min": 1.5, "max": 2.5, "avg": 2, "count": 2}]}`
	tempDaysA1 = `{"agentUuid": ` + tempA1 + `, "buckets": [
		{"time": "2024-03-10T00:00:00Z", "min": 10, "max": 60, "avg": 35, "count": 6},
		{"time": "2024-03-11T00:00:00Z", "min": 70, "max": 80, "avg": 75, "count": 2}]}`

	labelsA1 = `{"agent_uuid": "$A1", "metric_name": "boiler.temp", "device_name": "boiler", "protocol": "modbus", "unit": "°C"}`
)

// readCases check every endpoint's answer on the fixture.
var readCases = []apiCase{
	// GET /readings/latest
	{name: "latest", path: "/api/v1/readings/latest", tenant: tenantA, status: 200, want: latestA},
	{name: "latest of tenant B", path: "/api/v1/readings/latest", tenant: tenantB, status: 200, want: latestB},
	{name: "latest of an unknown tenant", path: "/api/v1/readings/latest", tenant: "tenant-c", status: 200, want: noReadings},
	{name: "latest by agent", path: "/api/v1/readings/latest?agent_uuid=$A2", tenant: tenantA, status: 200, want: latestA2},
	{name: "latest by another tenant's agent", path: "/api/v1/readings/latest?agent_uuid=$B1", tenant: tenantA, status: 200, want: noReadings},
	{name: "latest by metric", path: "/api/v1/readings/latest?metric=boiler.temp", tenant: tenantA, status: 200, want: `{"truncated": false, "readings": [
		{"agentUuid": "$A1", "metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "°C", "quality": "good", "time": "2024-03-11T00:30:00Z", "value": 80, "anomalyScore": 0.875},
		{"agentUuid": "$A2", "metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "K", "quality": "good", "time": "2024-03-09T12:00:00Z", "value": 278.5}]}`},
	{name: "latest by agent and metric", path: "/api/v1/readings/latest?agent_uuid=$A1&metric=boiler.pressure", tenant: tenantA, status: 200, want: `{"truncated": false, "readings": [
		{"agentUuid": "$A1", "metricName": "boiler.pressure", "deviceName": "boiler", "protocol": "modbus", "unit": "bar", "quality": "bad", "time": "2024-03-10T10:45:00Z", "value": null}]}`},
	{name: "latest by unknown metric", path: "/api/v1/readings/latest?metric=boiler", tenant: tenantA, status: 200, want: noReadings},
	{name: "latest truncated", path: "/api/v1/readings/latest?limit=1", tenant: tenantA, status: 200, want: `{"truncated": true, "readings": [
		{"agentUuid": "$A1", "metricName": "boiler.pressure", "deviceName": "boiler", "protocol": "modbus", "unit": "bar", "quality": "bad", "time": "2024-03-10T10:45:00Z", "value": null}]}`},
	{name: "latest at the limit", path: "/api/v1/readings/latest?limit=4", tenant: tenantA, status: 200, want: latestA},

	// GET /readings/:agent_uuid/latest
	{name: "agent latest", path: "/api/v1/readings/$A2/latest", tenant: tenantA, status: 200, want: latestA2},
	{name: "agent latest in upper case", path: "/api/v1/readings/2B2B2B2B-2222-4222-8222-222222222222/latest", tenant: tenantA, status: 200, want: latestA2},
	{name: "agent latest of another tenant's agent", path: "/api/v1/readings/$B1/latest", tenant: tenantA, status: 200, want: noReadings},
	{name: "agent latest of an unknown agent", path: "/api/v1/readings/$A3/latest", tenant: tenantA, status: 200, want: noReadings},

	// GET /readings/catalog
	{name: "catalog", path: "/api/v1/readings/catalog", tenant: tenantA, status: 200, want: `{"metrics": [
		{"metricName": "boiler.pressure", "deviceName": "boiler", "protocol": "modbus", "unit": "bar", "agentCount": 1,
		 "firstSeen": "2024-03-10T09:15:00Z", "lastSeen": "2024-03-10T10:45:00Z", "sampleCount": 3},
		{"metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "°C", "agentCount": 2,
		 "firstSeen": "2024-03-09T12:00:00Z", "lastSeen": "2024-03-11T00:30:00Z", "sampleCount": 9},
		` + pumpCatalog + `]}`},
	{name: "catalog of one agent", path: "/api/v1/readings/catalog?agent_uuid=$A2", tenant: tenantA, status: 200, want: `{"metrics": [
		{"metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "K", "agentCount": 1,
		 "firstSeen": "2024-03-09T12:00:00Z", "lastSeen": "2024-03-09T12:00:00Z", "sampleCount": 1},
		` + pumpCatalog + `]}`},
	{name: "catalog of tenant B", path: "/api/v1/readings/catalog", tenant: tenantB, status: 200, want: `{"metrics": [
		{"metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "°C", "agentCount": 1,
		 "firstSeen": "2024-03-10T09:10:00Z", "lastSeen": "2024-03-11T00:45:00Z", "sampleCount": 2},
		{"metricName": "secret.x", "deviceName": "secret", "protocol": "mqtt", "unit": "", "agentCount": 1,
		 "firstSeen": "2024-03-10T10:00:00Z", "lastSeen": "2024-03-10T10:00:00Z", "sampleCount": 1}]}`},
	{name: "catalog of another tenant's agent", path: "/api/v1/readings/catalog?agent_uuid=$B1", tenant: tenantA, status: 200, want: `{"metrics": []}`},

	// GET /metrics and /profiles
	{name: "metric names", path: "/api/v1/metrics", tenant: tenantA, status: 200, want: `{"metrics": ["boiler.pressure", "boiler.temp", "pump.speed"]}`},
	{name: "metric names of tenant B", path: "/api/v1/metrics", tenant: tenantB, status: 200, want: `{"metrics": ["boiler.temp", "secret.x"]}`},
	{name: "metric names of an unknown tenant", path: "/api/v1/metrics", tenant: "tenant-c", status: 200, want: `{"metrics": []}`},
	{name: "profiles", path: "/api/v1/profiles", tenant: tenantA, status: 200, want: `{"profiles": [
		{"name": "boiler/modbus", "deviceName": "boiler", "protocol": "modbus", "agentCount": 2, "metrics": [
			{"name": "boiler.pressure", "unit": "bar", "agentCount": 1},
			{"name": "boiler.temp", "unit": "K", "agentCount": 1},
			{"name": "boiler.temp", "unit": "°C", "agentCount": 1}]},
		{"name": "pump/opcua", "deviceName": "pump", "protocol": "opcua", "agentCount": 1, "metrics": [
			{"name": "pump.speed", "unit": "rpm", "agentCount": 1}]}]}`},
	{name: "profiles of tenant B", path: "/api/v1/profiles", tenant: tenantB, status: 200, want: `{"profiles": [
		{"name": "boiler/modbus", "deviceName": "boiler", "protocol": "modbus", "agentCount": 1, "metrics": [
			{"name": "boiler.temp", "unit": "°C", "agentCount": 1}]},
		{"name": "secret/mqtt", "deviceName": "secret", "protocol": "mqtt", "agentCount": 1, "metrics": [
			{"name": "secret.x", "unit": "", "agentCount": 1}]}]}`},
	{name: "profiles of an unknown tenant", path: "/api/v1/profiles", tenant: "tenant-c", status: 200, want: `{"profiles": []}`},

	// GET /readings/hourly and /readings/daily
	{name: "hourly", path: "/api/v1/readings/hourly?start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z", tenant: tenantA, status: 200,
		want: `{"granularity": "hourly", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T11:00:00Z", "series": [` +
			pressureHours + `, ` + hourA1 + `, ` + pumpHour + `]}`},
	{name: "hourly with partial buckets", path: "/api/v1/readings/hourly?start=2024-03-10T09:30:00Z&end=2024-03-10T10:59:59.999998Z&metric=boiler.temp", tenant: tenantA, status: 200,
		want: `{"granularity": "hourly", "start": "2024-03-10T09:30:00Z", "end": "2024-03-10T10:59:59.999998Z", "series": [
			{"agentUuid": ` + tempA1 + `, "buckets": [
				{"time": "2024-03-10T09:00:00Z", "min": 20, "max": 20, "avg": 20, "count": 1},
				{"time": "2024-03-10T10:00:00Z", "min": 30, "max": 30, "avg": 30, "count": 1}]}]}`},
	{name: "hourly by default: 24 whole hours", path: "/api/v1/readings/hourly?agent_uuid=$A1&metric=boiler.temp", tenant: tenantA, status: 200,
		want: `{"granularity": "hourly", "start": "2024-03-10T02:00:00Z", "end": "2024-03-11T01:00:00Z", "series": [
			{"agentUuid": ` + tempA1 + `, "buckets": [
				{"time": "2024-03-10T09:00:00Z", "min": 10, "max": 20, "avg": 15, "count": 2},
				{"time": "2024-03-10T10:00:00Z", "min": 30, "max": 40, "avg": 35, "count": 2},
				{"time": "2024-03-10T11:00:00Z", "min": 50, "max": 50, "avg": 50, "count": 1},
				{"time": "2024-03-10T23:00:00Z", "min": 60, "max": 60, "avg": 60, "count": 1},
				{"time": "2024-03-11T00:00:00Z", "min": 70, "max": 80, "avg": 75, "count": 2}]}]}`},
	{name: "hourly of tenant B", path: "/api/v1/readings/hourly?start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z", tenant: tenantB, status: 200,
		want: `{"granularity": "hourly", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T11:00:00Z", "series": [
			{"agentUuid": "$B1", "metricName": "boiler.temp", "buckets": [{"time": "2024-03-10T09:00:00Z", "min": 999, "max": 999, "avg": 999, "count": 1}]},
			{"agentUuid": "$B1", "metricName": "secret.x", "buckets": [{"time": "2024-03-10T10:00:00Z", "min": 7, "max": 7, "avg": 7, "count": 1}]}]}`},
	{name: "hourly of another tenant's agent", path: "/api/v1/readings/hourly?agent_uuid=$B1&start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z", tenant: tenantA, status: 200,
		want: `{"granularity": "hourly", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T11:00:00Z", "series": []}`},
	{name: "daily", path: "/api/v1/readings/daily?start=2024-03-09T00:00:00Z&end=2024-03-11T23:59:59Z", tenant: tenantA, status: 200,
		want: `{"granularity": "daily", "start": "2024-03-09T00:00:00Z", "end": "2024-03-11T23:59:59Z", "series": [` +
			pressureDay + `, ` + tempDaysA1 + `,
			{"agentUuid": "$A2", "metricName": "boiler.temp", "buckets": [{"time": "2024-03-09T00:00:00Z", "min": 278.5, "max": 278.5, "avg": 278.5, "count": 1}]},
			{"agentUuid": "$A2", "metricName": "pump.speed", "buckets": [{"time": "2024-03-10T00:00:00Z", "min": 100, "max": 300, "avg": 187.5, "count": 4}]}]}`},
	{name: "daily by default: 30 whole days", path: "/api/v1/readings/daily?metric=boiler.pressure", tenant: tenantA, status: 200,
		want: `{"granularity": "daily", "start": "2024-02-11T00:00:00Z", "end": "2024-03-11T01:00:00Z", "series": [` + pressureDay + `]}`},

	// GET /readings/:agent_uuid/timeseries
	{name: "raw time series", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z", tenant: tenantA, status: 200,
		want: `{"agentUuid": ` + tempA1 + `, "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T11:00:00Z", "points": [
			{"time": "2024-03-10T09:00:00Z", "value": 10, "quality": "good"},
			{"time": "2024-03-10T09:30:00Z", "value": 20, "quality": "good"},
			{"time": "2024-03-10T10:00:00Z", "value": 30, "quality": "good", "anomalyScore": 0.5},
			{"time": "2024-03-10T10:59:59.999999Z", "value": 40, "quality": "good"},
			{"time": "2024-03-10T11:00:00Z", "value": 50, "quality": "good"}]}`},
	{name: "raw time series in Unix milliseconds", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&start=1710061200000&end=1710064800000", tenant: tenantA, status: 200,
		want: `{"agentUuid": ` + tempA1 + `, "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T10:00:00Z", "points": [
			{"time": "2024-03-10T09:00:00Z", "value": 10, "quality": "good"},
			{"time": "2024-03-10T09:30:00Z", "value": 20, "quality": "good"},
			{"time": "2024-03-10T10:00:00Z", "value": 30, "quality": "good", "anomalyScore": 0.5}]}`},
	{name: "raw time series with a failed read", path: "/api/v1/readings/$A1/timeseries?metric=boiler.pressure&start=2024-03-10T10:00:00%2B00:00&end=2024-03-10T12:00:00%2B01:00", tenant: tenantA, status: 200,
		want: `{"agentUuid": "$A1", "metricName": "boiler.pressure", "start": "2024-03-10T10:00:00Z", "end": "2024-03-10T11:00:00Z", "points": [
			{"time": "2024-03-10T10:15:00Z", "value": 2.5, "quality": "good"},
			{"time": "2024-03-10T10:45:00Z", "value": null, "quality": "bad"}]}`},
	{name: "raw time series by default: the last 24 hours", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&end=2024-03-10T23:00:00Z", tenant: tenantA, status: 200,
		want: `{"agentUuid": ` + tempA1 + `, "start": "2024-03-09T23:00:00Z", "end": "2024-03-10T23:00:00Z", "points": [
			{"time": "2024-03-10T09:00:00Z", "value": 10, "quality": "good"},
			{"time": "2024-03-10T09:30:00Z", "value": 20, "quality": "good"},
			{"time": "2024-03-10T10:00:00Z", "value": 30, "quality": "good", "anomalyScore": 0.5},
			{"time": "2024-03-10T10:59:59.999999Z", "value": 40, "quality": "good"},
			{"time": "2024-03-10T11:00:00Z", "value": 50, "quality": "good"}]}`},
	{name: "hourly time series", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&interval=1h&start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z", tenant: tenantA, status: 200,
		want: `{"agentUuid": ` + tempA1 + `, "interval": "1h", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T11:00:00Z", "points": [
			{"time": "2024-03-10T09:00:00Z", "min": 10, "max": 20, "avg": 15, "count": 2},
			{"time": "2024-03-10T10:00:00Z", "min": 30, "max": 40, "avg": 35, "count": 2},
			{"time": "2024-03-10T11:00:00Z", "min": 50, "max": 50, "avg": 50, "count": 1}]}`},
	{name: "minute time series", path: "/api/v1/readings/$A2/timeseries?metric=pump.speed&interval=1m&start=2024-03-10T09:00:00Z&end=2024-03-10T09:05:00Z", tenant: tenantA, status: 200,
		want: `{"agentUuid": "$A2", "metricName": "pump.speed", "interval": "1m", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T09:05:00Z", "points": [
			{"time": "2024-03-10T09:00:00Z", "min": 100, "max": 150, "avg": 125, "count": 2},
			{"time": "2024-03-10T09:01:00Z", "min": 200, "max": 200, "avg": 200, "count": 1},
			{"time": "2024-03-10T09:02:00Z", "min": 300, "max": 300, "avg": 300, "count": 1}]}`},
	{name: "daily time series", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&interval=1d&start=2024-03-10T00:00:00Z&end=2024-03-11T23:00:00Z", tenant: tenantA, status: 200,
		want: `{"agentUuid": ` + tempA1 + `, "interval": "1d", "start": "2024-03-10T00:00:00Z", "end": "2024-03-11T23:00:00Z", "points": [
			{"time": "2024-03-10T00:00:00Z", "min": 10, "max": 60, "avg": 35, "count": 6},
			{"time": "2024-03-11T00:00:00Z", "min": 70, "max": 80, "avg": 75, "count": 2}]}`},
	{name: "time series of another tenant's agent", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&start=2024-03-10T00:00:00Z", tenant: tenantB, status: 200,
		want: `{"agentUuid": ` + tempA1 + `, "start": "2024-03-10T00:00:00Z", "end": "2024-03-11T01:00:00Z", "points": []}`},
	{name: "bucketed time series of another tenant's agent", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&interval=1h&start=2024-03-10T00:00:00Z", tenant: tenantB, status: 200,
		want: `{"agentUuid": ` + tempA1 + `, "interval": "1h", "start": "2024-03-10T00:00:00Z", "end": "2024-03-11T01:00:00Z", "points": []}`},

	// GET /readings/:agent_uuid/aggregate
	{name: "daily aggregate", path: "/api/v1/readings/$A1/aggregate?granularity=daily&start=2024-03-10T00:00:00Z&end=2024-03-11T23:59:59Z", tenant: tenantA, status: 200,
		want: `{"agentUuid": "$A1", "granularity": "daily", "start": "2024-03-10T00:00:00Z", "end": "2024-03-11T23:59:59Z", "series": [` + pressureDay + `, ` + tempDaysA1 + `]}`},
	{name: "hourly aggregate of one metric", path: "/api/v1/readings/$A1/aggregate?metric=boiler.pressure&start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z", tenant: tenantA, status: 200,
		want: `{"agentUuid": "$A1", "granularity": "hourly", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T11:00:00Z", "series": [` + pressureHours + `]}`},
	{name: "aggregate of another tenant's agent", path: "/api/v1/readings/$B1/aggregate?granularity=daily", tenant: tenantA, status: 200,
		want: `{"agentUuid": "$B1", "granularity": "daily", "start": "2024-02-11T00:00:00Z", "end": "2024-03-11T01:00:00Z", "series": []}`},

	// POST /readings/query
	{name: "query raw samples", method: "POST", path: "/api/v1/readings/query", tenant: tenantA,
		body:   `{"query": "readings{metric_name=\"boiler.temp\"}", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T10:00:00Z"}`,
		status: 200, want: `{"resultType": "raw", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T10:00:00Z", "step": "1m", "series": [
			{"labels": ` + labelsA1 + `, "points": [
				{"t": "2024-03-10T09:00:00Z", "v": 10}, {"t": "2024-03-10T09:30:00Z", "v": 20}, {"t": "2024-03-10T10:00:00Z", "v": 30}]}]}`},
	{name: "query a range function", method: "POST", path: "/api/v1/readings/query", tenant: tenantA,
		body:   `{"query": "max_over_time(readings{metric_name=\"boiler.temp\"}[1h])", "start": 1710064800000, "end": "2024-03-10T11:00:00Z", "step": "1h"}`,
		status: 200, want: `{"resultType": "matrix", "start": "2024-03-10T10:00:00Z", "end": "2024-03-10T11:00:00Z", "step": "1h", "series": [
			{"labels": ` + labelsA1 + `, "points": [{"t": "2024-03-10T10:00:00Z", "v": 20}, {"t": "2024-03-10T11:00:00Z", "v": 40}]}]}`},
	{name: "query of tenant B", method: "POST", path: "/api/v1/readings/query", tenant: tenantB,
		body:   `{"query": "readings{metric_name=\"boiler.temp\"}", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T10:00:00Z"}`,
		status: 200, want: `{"resultType": "raw", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T10:00:00Z", "step": "1m", "series": [
			{"labels": {"agent_uuid": "$B1", "metric_name": "boiler.temp", "device_name": "boiler", "protocol": "modbus", "unit": "°C"},
			 "points": [{"t": "2024-03-10T09:10:00Z", "v": 999}]}]}`},
	{name: "query by default: the last hour", method: "POST", path: "/api/v1/readings/query", tenant: tenantA,
		body:   `{"query": "readings{agent_uuid=\"$A1\"}"}`,
		status: 200, want: `{"resultType": "raw", "start": "2024-03-11T00:00:00Z", "end": "2024-03-11T01:00:00Z", "step": "1m", "series": [
			{"labels": ` + labelsA1 + `, "points": [{"t": "2024-03-11T00:00:00Z", "v": 70}, {"t": "2024-03-11T00:30:00Z", "v": 80}]}]}`},
}

// errorCases are refused before, or instead of, touching data.
var errorCases = []apiCase{
	{name: "no tenant", path: "/api/v1/readings/latest", status: 401, code: "unauthorized", msg: "tenant"},
	{name: "no tenant before a bad agent", path: "/api/v1/readings/nope/latest", status: 401, code: "unauthorized", msg: "tenant"},
	{name: "no tenant for an insert", method: "POST", path: "/api/v1/readings", body: `{}`, status: 401, code: "unauthorized", msg: "tenant"},

	// Query parameters.
	{name: "agent_uuid not a UUID", path: "/api/v1/readings/latest?agent_uuid=nope", tenant: tenantA, status: 400, code: "invalid_parameter", msg: `agent_uuid must be a UUID (8-4-4-4-12 hex digits), got "nope"`},
	{name: "agent_uuid without hyphens", path: "/api/v1/readings/latest?agent_uuid=11111111111141118111111111111111", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "agent_uuid must be a UUID"},
	{name: "limit zero", path: "/api/v1/readings/latest?limit=0", tenant: tenantA, status: 400, code: "invalid_parameter", msg: `limit must be a whole number from 1 to 10000, got "0"`},
	{name: "limit over the cap", path: "/api/v1/readings/latest?limit=10001", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "limit must be a whole number from 1 to 10000"},
	{name: "limit not a number", path: "/api/v1/readings/latest?limit=ten", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "limit must be"},
	{name: "unknown parameter", path: "/api/v1/readings/latest?agentUuid=$A1", tenant: tenantA, status: 400, code: "invalid_parameter", msg: `"agentUuid" is not a parameter of this endpoint; it takes agent_uuid, metric, limit`},
	{name: "parameter given twice", path: "/api/v1/readings/latest?metric=a.b&metric=c.d", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "metric is given 2 times"},
	{name: "metric with NUL", path: "/api/v1/readings/latest?metric=a%00b", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "metric must not contain NUL"},
	{name: "metric not UTF-8", path: "/api/v1/readings/latest?metric=%ff", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "metric must be valid UTF-8"},
	{name: "path agent not a UUID", path: "/api/v1/readings/nope/latest", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "agent_uuid must be a UUID"},
	{name: "path agent and agent_uuid", path: "/api/v1/readings/$A1/latest?agent_uuid=$A2", tenant: tenantA, status: 400, code: "invalid_parameter", msg: `"agent_uuid" is not a parameter of this endpoint; it takes metric, limit`},
	{name: "catalog agent not a UUID", path: "/api/v1/readings/catalog?agent_uuid=x", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "agent_uuid must be a UUID"},
	{name: "start not a time", path: "/api/v1/readings/hourly?start=yesterday", tenant: tenantA, status: 400, code: "invalid_parameter", msg: `start must be an RFC 3339 time such as 2024-03-10T10:00:00Z, or Unix milliseconds, got "yesterday"`},
	{name: "start without a time of day", path: "/api/v1/readings/daily?start=2024-03-10", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "start must be an RFC 3339 time"},
	{name: "start without a zone", path: "/api/v1/readings/daily?start=2024-03-10T00:00:00", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "start must be an RFC 3339 time"},
	{name: "end not a date", path: "/api/v1/readings/hourly?end=2024-13-01T00:00:00Z", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "end must be an RFC 3339 time"},
	{name: "start out of range", path: "/api/v1/readings/daily?start=99999999999999999", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "start is out of range for Unix milliseconds"},
	{name: "start after end", path: "/api/v1/readings/hourly?start=2024-03-11T00:00:00Z&end=2024-03-10T00:00:00Z", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "start must not be after end"},
	{name: "start after the default end", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&start=2030-01-01T00:00:00Z", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "start must not be after end"},
	{name: "interval unknown", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&interval=2m", tenant: tenantA, status: 400, code: "invalid_parameter", msg: `interval must be one of 1m, 1h, 1d, got "2m"`},
	{name: "metric missing", path: "/api/v1/readings/$A1/timeseries?interval=1h", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "metric is required"},
	{name: "granularity unknown", path: "/api/v1/readings/$A1/aggregate?granularity=weekly", tenant: tenantA, status: 400, code: "invalid_parameter", msg: `granularity must be one of hourly, daily, got "weekly"`},
	{name: "aggregate agent not a UUID", path: "/api/v1/readings/x/aggregate", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "agent_uuid must be a UUID"},
	{name: "timeseries agent not a UUID", path: "/api/v1/readings/x/timeseries?metric=a.b", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "agent_uuid must be a UUID"},
	{name: "metric names take no parameters", path: "/api/v1/metrics?agent_uuid=$A1", tenant: tenantA, status: 400, code: "invalid_parameter", msg: "which takes none"},
	{name: "profiles take no parameters", path: "/api/v1/profiles?x=1", tenant: tenantA, status: 400, code: "invalid_parameter", msg: `"x" is not a parameter`},

	// Limits.
	{name: "range over max_range", path: "/api/v1/readings/hourly?start=2023-01-01T00:00:00Z&end=2024-03-10T00:00:00Z", tenant: tenantA, status: 422, code: "limit_exceeded", msg: "time range (end - start) 434d exceeds the limit of 90d (max_range)"},
	{name: "minute buckets over max_points_per_series", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&interval=1m&start=2024-02-10T00:00:00Z&end=2024-03-10T00:00:00Z", tenant: tenantA, status: 422, code: "limit_exceeded", msg: "buckets per series 41761 exceeds the limit of 11000 (max_points_per_series)"},
	{name: "raw range over max_range", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&start=0", tenant: tenantA, status: 422, code: "limit_exceeded", msg: "(max_range)"},

	// POST /readings/query
	{name: "query parse error", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings{"}`, status: 400, code: "invalid_query", msg: "parse error at line 1, column"},
	{name: "query missing", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"start": "2024-03-10T09:00:00Z"}`, status: 400, code: "invalid_parameter", msg: "query is required"},
	{name: "query step not a duration", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "step": "5x"}`, status: 400, code: "invalid_parameter", msg: `step must be a duration such as 30s, 1m or 1h30m (units ms, s, m, h, d, w, y), got "5x"`},
	{name: "query step a number", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "step": 60}`, status: 400, code: "invalid_parameter", msg: "step must be a duration string"},
	{name: "query step zero", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "step": "0s"}`, status: 400, code: "invalid_parameter", msg: "step must be positive"},
	{name: "query step below min_step", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "step": "500ms"}`, status: 422, code: "limit_exceeded", msg: "(min_step)"},
	{name: "query end before start", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "start": "2024-03-10T10:00:00Z", "end": "2024-03-10T09:00:00Z"}`, status: 400, code: "invalid_parameter", msg: "end must not be before start"},
	{name: "query start not a time", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "start": "yesterday"}`, status: 400, code: "invalid_parameter", msg: "start must be an RFC 3339 time"},
	{name: "query end fractional milliseconds", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "end": 1710064800000.5}`, status: 400, code: "invalid_parameter", msg: "end must be whole Unix milliseconds"},
	{name: "query end an object", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "end": {}}`, status: 400, code: "invalid_parameter", msg: "end must be an RFC 3339 string or Unix milliseconds"},
	{name: "query over max_range", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "start": "2023-01-01T00:00:00Z"}`, status: 422, code: "limit_exceeded", msg: "(max_range)"},
	{name: "query unknown field", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings", "colour": "red"}`, status: 400, code: "invalid_body", msg: `unknown field "colour"`},
	{name: "query field of the wrong type", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": 5}`, status: 400, code: "invalid_body", msg: "query must be a string"},
	{name: "query body empty", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, status: 400, code: "invalid_body", msg: "empty"},
	{name: "query body not JSON", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `query=readings`, status: 400, code: "invalid_body", msg: "invalid JSON"},
	{name: "query body with trailing data", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings"} {}`, status: 400, code: "invalid_body", msg: "unexpected data after the JSON document"},
	{name: "query body cut short", method: "POST", path: "/api/v1/readings/query", tenant: tenantA, body: `{"query": "readings"`, status: 400, code: "invalid_body", msg: "cut short"},

	// POST /readings
	{name: "insert agent not a UUID", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"agentUuid": "nope", "metricName": "a.b", "value": 1}`, status: 400, code: "invalid_parameter", msg: "agentUuid must be a UUID"},
	{name: "insert agent missing", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"metricName": "a.b", "value": 1}`, status: 400, code: "invalid_parameter", msg: "agentUuid is required"},
	{name: "insert value missing", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `[{"agentUuid": "$A3", "metricName": "a.b", "value": 1}, {"agentUuid": "$A3", "metricName": "a.b"}]`, status: 400, code: "invalid_parameter", msg: "readings[1].value is required"},
	{name: "insert value a string", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"agentUuid": "$A3", "metricName": "a.b", "value": "1"}`, status: 400, code: "invalid_parameter", msg: `value must be a number or null, got "\"1\""`},
	{name: "insert metric missing", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"agentUuid": "$A3", "value": 1}`, status: 400, code: "invalid_parameter", msg: "metricName is required"},
	{name: "insert metric without device", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"agentUuid": "$A3", "metricName": "temp", "value": 1}`, status: 400, code: "invalid_parameter", msg: "metricName must be <deviceName>.<reading name>"},
	{name: "insert metric of another device", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"agentUuid": "$A3", "metricName": "pump.x", "deviceName": "valve", "value": 1}`, status: 400, code: "invalid_parameter", msg: `metricName must be "valve." followed by a reading name`},
	{name: "insert time not a time", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"agentUuid": "$A3", "metricName": "a.b", "value": 1, "time": "soon"}`, status: 400, code: "invalid_parameter", msg: "time must be an RFC 3339 time"},
	{name: "insert unit too long", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"agentUuid": "$A3", "metricName": "a.b", "value": 1, "unit": "` + strings.Repeat("u", 256) + `"}`, status: 400, code: "invalid_parameter", msg: "unit must be at most 255 bytes, got 256"},
	{name: "insert unknown field", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"agentUuid": "$A3", "metricName": "a.b", "value": 1, "colour": "red"}`, status: 400, code: "invalid_body", msg: `unknown field "colour"`},
	{name: "insert empty array", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `[]`, status: 400, code: "invalid_body", msg: "no readings"},
	{name: "insert a string", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `"reading"`, status: 400, code: "invalid_body", msg: "must be a JSON object (one reading) or an array of readings"},
	{name: "insert too many", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: "[" + strings.Repeat(`{"agentUuid": "$A3", "metricName": "a.b", "value": 1},`, 1000) + `{"agentUuid": "$A3", "metricName": "a.b", "value": 1}]`, status: 400, code: "invalid_body", msg: "1001 readings exceed the limit of 1000"},
}

// writeCases change the data: they run after readCases.
var writeCases = []apiCase{
	{name: "insert one with defaults", method: "POST", path: "/api/v1/readings", tenant: tenantA, body: `{"agentUuid": "$A3", "metricName": "valve.open", "value": 1, "unit": "%"}`,
		status: 201, want: `{"inserted": 1, "ignored": 0}`},
	{name: "the defaults as stored", path: "/api/v1/readings/$A3/latest", tenant: tenantA, status: 200, want: `{"truncated": false, "readings": [
		{"agentUuid": "$A3", "metricName": "valve.open", "deviceName": "valve", "protocol": "", "unit": "%", "quality": "", "time": "2024-03-11T01:00:00Z", "value": 1}]}`},
	{name: "insert for another tenant's agent", method: "POST", path: "/api/v1/readings", tenant: tenantB, body: `{"agentUuid": "$A3", "metricName": "valve.open", "value": 2, "time": "2024-03-11T02:00:00Z"}`,
		status: 404, code: "not_found", msg: `agentUuid "$A3" is not an agent of this tenant`},
	{name: "insert a batch naming another tenant's agent", method: "POST", path: "/api/v1/readings", tenant: tenantB,
		body:   `[{"agentUuid": "$B1", "metricName": "boiler.temp", "value": 1, "time": "2024-03-11T02:00:00Z"}, {"agentUuid": "$A1", "metricName": "boiler.temp", "value": 2}]`,
		status: 404, code: "not_found", msg: `readings[1].agentUuid "$A1" is not an agent of this tenant`},
	{name: "a refused batch writes nothing", path: "/api/v1/readings/latest?metric=boiler.temp", tenant: tenantB, status: 200, want: `{"truncated": false, "readings": [
		{"agentUuid": "$B1", "metricName": "boiler.temp", "deviceName": "boiler", "protocol": "modbus", "unit": "°C", "quality": "good", "time": "2024-03-11T00:45:00Z", "value": 1000}]}`},
	{name: "insert a failed read", method: "POST", path: "/api/v1/readings", tenant: tenantB,
		body:   `{"agentUuid": "$B1", "metricName": "secret.x", "value": null, "quality": "bad", "time": "2024-03-11T00:50:00.000001Z", "deviceName": "secret", "protocol": "mqtt"}`,
		status: 201, want: `{"inserted": 1, "ignored": 0}`},
	{name: "the failed read as stored", path: "/api/v1/readings/$B1/latest?metric=secret.x", tenant: tenantB, status: 200, want: `{"truncated": false, "readings": [
		{"agentUuid": "$B1", "metricName": "secret.x", "deviceName": "secret", "protocol": "mqtt", "unit": "", "quality": "bad", "time": "2024-03-11T00:50:00.000001Z", "value": null}]}`},
}

// tightCases run with small limits, to reach each cap.
var tightCases = []apiCase{
	{name: "series over max_series", path: "/api/v1/readings/hourly?start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z", tenant: tenantA, status: 422, code: "limit_exceeded", msg: "series more than 1 exceeds the limit of 1 (max_series)"},
	{name: "one series within the limits", path: "/api/v1/readings/hourly?start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z&agent_uuid=$A1&metric=boiler.pressure", tenant: tenantA, status: 200,
		want: `{"granularity": "hourly", "start": "2024-03-10T09:00:00Z", "end": "2024-03-10T11:00:00Z", "series": [` + pressureHours + `]}`},
	{name: "raw points over max_points_per_series", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z", tenant: tenantA, status: 422, code: "limit_exceeded", msg: "points more than 4 exceeds the limit of 4 (max_points_per_series)"},
	{name: "buckets over max_points_per_series", path: "/api/v1/readings/$A1/timeseries?metric=boiler.temp&interval=1h&start=2024-03-10T09:00:00Z&end=2024-03-10T13:00:00Z", tenant: tenantA, status: 422, code: "limit_exceeded", msg: "buckets per series 5 exceeds the limit of 4 (max_points_per_series)"},
	{name: "range over a small max_range", path: "/api/v1/readings/daily", tenant: tenantA, status: 422, code: "limit_exceeded", msg: "time range (end - start) 29d1h exceeds the limit of 2d (max_range)"},
}

var rowCases = []apiCase{
	{name: "rows over max_rows", path: "/api/v1/readings/hourly?start=2024-03-10T09:00:00Z&end=2024-03-10T11:00:00Z&agent_uuid=$A1&metric=boiler.temp", tenant: tenantA, status: 422, code: "limit_exceeded", msg: "rows read more than 2 exceeds the limit of 2 (max_rows)"},
}

// TestReadingsAPIIntegration answers every endpoint on SQLite and on
// PostgreSQL from the same data, and checks both against the same
// hand-computed answers: so the engines agree with each other too.
func TestReadingsAPIIntegration(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			insertFixture(t, d)
			h := newRouter(t, d, query.Limits{}, testNow)
			for _, phase := range []struct {
				name  string
				h     http.Handler
				cases []apiCase
			}{
				{"setup", h, setupCases},
				{"read", h, readCases},
				{"errors", h, errorCases},
				{"tight", newRouter(t, d, query.Limits{MaxSeries: 1, MaxPointsPerSeries: 4, MaxRange: 2 * day}, testNow), tightCases},
				{"rows", newRouter(t, d, query.Limits{MaxRows: 2}, testNow), rowCases},
				{"write", h, writeCases},
			} {
				t.Run(phase.name, func(t *testing.T) {
					for _, tc := range phase.cases {
						t.Run(tc.name, func(t *testing.T) { tc.run(t, phase.h) })
					}
				})
			}
		})
	}
}

// TestUnavailableDatabaseIntegration: a database failure is a 503 that
// says nothing about the SQL.
func TestUnavailableDatabaseIntegration(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			h := newRouter(t, d, query.Limits{}, testNow)
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []apiCase{
				{path: "/api/v1/readings/latest"},
				{path: "/api/v1/readings/catalog"},
				{path: "/api/v1/metrics"},
				{path: "/api/v1/profiles"},
				{path: "/api/v1/readings/hourly"},
				{path: "/api/v1/readings/$A1/timeseries?metric=a.b"},
				{path: "/api/v1/readings/$A1/aggregate"},
				{method: "POST", path: "/api/v1/readings/query", body: `{"query": "readings"}`},
				{method: "POST", path: "/api/v1/readings", body: `{"agentUuid": "$A1", "metricName": "a.b", "value": 1}`},
			} {
				tc.name, tc.tenant, tc.status, tc.code = tc.path, tenantA, 503, "database_unavailable"
				tc.msg = "the database is not available"
				t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
			}
		})
	}
}
