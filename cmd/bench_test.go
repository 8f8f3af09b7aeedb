package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/edgeplat/edgeplat/cmd/internal/bench"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// benchEnv points the bench at the test's PostgreSQL database and Redis.
// The Redis must be private (coretest.PrivateRedis): other tests' and other
// runs' ingest engines discover every tenant's ingestion stream on a shared
// one and would take the bench's entries.
func benchEnv(t *testing.T, dbc config.DB, redisAddr string) {
	t.Helper()
	host, port, err := net.SplitHostPort(redisAddr)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"DB_HOST": dbc.Host, "DB_PORT": strconv.Itoa(dbc.Port), "DB_NAME": dbc.Name, "DB_USER": dbc.User,
		"DB_PASSWORD": dbc.Password.Reveal(), "DB_SSL": "disable",
		"STREAMSTORE_HOST": host, "STREAMSTORE_PORT": port,
	} {
		t.Setenv(k, v)
	}
}

func TestBenchIngestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	clearEnv(t)
	dbc := coretest.Postgres(t)
	redisAddr := coretest.PrivateRedis(t).Addr()
	benchEnv(t, dbc, redisAddr)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	t.Run("json, anomaly rules and scores", func(t *testing.T) {
		code, out, errOut := run(t, "bench", "ingest", "--messages", "40", "--readings", "10", "--anomaly-rules", "5", "--anomaly-scores", "--json")
		if code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
		}
		var rep bench.IngestReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("output is not the JSON report: %v\n%s", err, out)
		}
		if len(rep.Results) != 2 || rep.Results[0].AnomalyRules != 0 || rep.Results[1].AnomalyRules != 5 {
			t.Fatalf("results = %+v, want a run without and one with 5 rules", rep.Results)
		}
		with := rep.Results[1]
		if with.Rows != 400 || with.AnomalyEvalSeconds <= 0 || with.AnomalyDroppedBatches != 0 || with.AnomalyThroughputRatio <= 0 {
			t.Errorf("run with rules = %+v", with)
		}
	})

	t.Run("json, two profiles", func(t *testing.T) {
		code, out, errOut := run(t, "bench", "ingest", "--messages", "50", "--readings", "10", "--profiles", "balanced,streaming", "--json")
		if code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
		}
		var rep bench.IngestReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("output is not the JSON report: %v\n%s", err, out)
		}
		if rep.Rows != 500 || rep.Ceiling.Rows != 500 || rep.Ceiling.RowsPerSec <= 0 {
			t.Errorf("report header = %+v, ceiling %+v", rep, rep.Ceiling)
		}
		if len(rep.Results) != 2 || rep.Results[0].Profile != "balanced" || rep.Results[1].Profile != "streaming" {
			t.Fatalf("results = %+v", rep.Results)
		}
		for _, r := range rep.Results {
			if r.Rows != 500 || r.Messages != 50 || r.ReadingsPerSec <= 0 || r.ElapsedSeconds <= 0 ||
				r.CeilingRowsPerSec != rep.Ceiling.RowsPerSec || r.Ratio <= 0 || r.PeakRSSMB <= 0 || r.WorkersStart < 1 {
				t.Errorf("result = %+v", r)
			}
		}
		if rep.Results[1].InsertMode != "realtime" || rep.Results[1].BatchSize != 20 {
			t.Errorf("streaming profile not applied: %+v", rep.Results[1])
		}
		for _, w := range []string{"ceiling: 500 rows by CopyFrom", "preload balanced: 50 messages", "ingest streaming: 500 rows in"} {
			if !strings.Contains(errOut, w) {
				t.Errorf("progress lacks %q:\n%s", w, errOut)
			}
		}
		assertBenchCleanedUp(t, dbc, redisAddr, rep.Results)
	})

	t.Run("table, variables override the profile", func(t *testing.T) {
		t.Setenv("WORKER_COUNT", "3")
		code, out, errOut := run(t, "bench", "ingest", "--messages", "50", "--readings", "10", "--profile", "benchmark")
		if code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
		}
		for _, w := range []string{"50 messages x 10 readings = 500 rows per profile", "ceiling: CopyFrom, one connection",
			"PROFILE", "READINGS/S", "CEILING ROWS/S", "RATIO", "PEAK RSS MB"} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		var row []string
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "benchmark" {
				row = f
			}
		}
		// benchmark, workers, batch, insert, messages, rows, elapsed, readings/s, ceiling, ratio, RSS
		if len(row) != 11 || row[1] != "3" || row[2] != "1000" || row[5] != "500" {
			t.Fatalf("result row = %q in:\n%s", row, out)
		}
		for _, i := range []int{7, 8, 9, 10} {
			if v, err := strconv.ParseFloat(row[i], 64); err != nil || v <= 0 {
				t.Errorf("column %d = %q, want a positive number", i, row[i])
			}
		}
	})

	t.Run("redis unreachable", func(t *testing.T) {
		port := coretest.FreePort(t)
		t.Setenv("STREAMSTORE_PORT", strconv.Itoa(port))
		code, _, errOut := run(t, "bench", "ingest", "--messages", "1")
		want := fmt.Sprintf("cannot reach Redis at 127.0.0.1:%d (STREAMSTORE_HOST, STREAMSTORE_PORT): ", port)
		if code != exitFailure || !strings.Contains(errOut, want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("exit %d, stderr %q; want exit %d and one line with %q", code, errOut, exitFailure, want)
		}
	})
}

// assertBenchCleanedUp checks that the bench left neither rows, nor its
// ceiling table, nor streams behind.
func assertBenchCleanedUp(t *testing.T, dbc config.DB, redisAddr string, results []bench.ProfileResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := url.URL{Scheme: "postgres", User: url.UserPassword(dbc.User, dbc.Password.Reveal()),
		Host: net.JoinHostPort(dbc.Host, strconv.Itoa(dbc.Port)), Path: "/" + dbc.Name, RawQuery: "sslmode=disable"}
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, tables int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM readings), (SELECT count(*) FROM pg_tables WHERE tablename LIKE 'bench_ceiling_%')`).Scan(&rows, &tables); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || tables != 0 {
		t.Errorf("left behind: %d readings rows, %d ceiling tables", rows, tables)
	}
	store, err := redisstore.New(redisstore.Options{Addrs: []string{redisAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, r := range results {
		for _, s := range []string{telemetry.IngestionStream(r.Tenant), telemetry.DLQStream(r.Tenant)} {
			if n, err := store.Len(ctx, s); err != nil || n != 0 {
				t.Errorf("stream %s left behind with %d entries (%v)", s, n, err)
			}
		}
	}
}

func TestBenchIngestBadInput(t *testing.T) {
	clearEnv(t)
	closed := coretest.FreePort(t)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{name: "no messages", args: []string{"--messages", "0"}, code: exitUsage, want: "--messages must be at least 1, got 0"},
		{name: "bad flag value", args: []string{"--readings", "many"}, code: exitUsage, want: `invalid argument "many" for "--readings" flag`},
		{name: "unknown profile", args: []string{"--profiles", "balanced,turbo"}, code: exitUsage, want: `--profiles: unknown profile "turbo"`},
		{name: "both profile flags", args: []string{"--profile", "hp", "--profiles", "all"}, code: exitUsage, want: "give --profile or --profiles, not both"},
		{name: "unknown --profile", args: []string{"--profile", "turbo"}, code: exitUsage, want: "ingest.profile (INGESTION_PROFILE) must be one of"},
		{name: "too many anomaly rules", args: []string{"--anomaly-rules", "501"}, code: exitUsage, want: "--anomaly-rules must be 0..500, got 501"},
		{name: "postgres unreachable", env: map[string]string{"DB_HOST": "127.0.0.1", "DB_PORT": strconv.Itoa(closed)}, code: exitFailure,
			want: fmt.Sprintf("edgeplat: cannot reach PostgreSQL at 127.0.0.1:%d (DB_HOST, DB_PORT): ", closed)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, _, errOut := run(t, append([]string{"bench", "ingest"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tt.code, tt.want)
			}
			if lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1; lines != 1 {
				t.Errorf("want one line, got %d:\n%s", lines, errOut)
			}
		})
	}
}

func TestBenchIngestHelp(t *testing.T) {
	code, out, _ := run(t, "bench", "ingest", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"--messages int", "(default 2000)", "--readings int", "(default 50)", `--profile string`,
		`(default "balanced")`, "--profiles string", "--keep", "--json", "(default 10m0s)", "ratio of at least 0.8"} {
		if !strings.Contains(out, w) {
			t.Errorf("bench ingest --help lacks %q:\n%s", w, out)
		}
	}
	code, out, _ = run(t, "--help")
	if code != 0 || !strings.Contains(out, "\n  bench ") {
		t.Errorf("--help does not list bench (exit %d):\n%s", code, out)
	}
}

func TestBenchPipelineIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	clearEnv(t)
	dbc := coretest.Postgres(t)
	redisAddr := coretest.PrivateRedis(t).Addr()
	mqttAddr := coretest.MQTTAddr(t)
	benchEnv(t, dbc, redisAddr)
	t.Setenv("MQTT_BROKER_URL", "tcp://"+mqttAddr)

	code, out, errOut := run(t, "bench", "pipeline", "--publishers", "2", "--messages", "20", "--readings", "5", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	var rep bench.PipelineReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not the JSON report: %v\n%s", err, out)
	}
	if rep.Messages != 40 || rep.Rows != 200 || rep.ReadingsPerSec <= 0 || rep.MessagesPerSec <= 0 || rep.ElapsedSeconds <= 0 {
		t.Errorf("report = %+v", rep)
	}
	if rep.IngestOnly == nil || rep.IngestOnly.Rows != 200 || rep.Ratio <= 0 {
		t.Errorf("ingestion-only = %+v, ratio %v", rep.IngestOnly, rep.Ratio)
	}
	if rep.Duplicates != 0 {
		t.Errorf("duplicates = %d", rep.Duplicates)
	}
	for _, w := range []string{"encode: 40 messages", "pipeline: 200 rows in"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("progress lacks %q:\n%s", w, errOut)
		}
	}

	// Two rounds: each its own pair of measurements, then the medians.
	code, out, errOut = run(t, "bench", "pipeline", "--publishers", "2", "--messages", "20", "--readings", "5", "--rounds", "2", "--json")
	if code != 0 {
		t.Fatalf("--rounds 2: exit %d\nstderr:\n%s", code, errOut)
	}
	var sum bench.RoundsSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("--rounds 2: output is not the JSON summary: %v\n%s", err, out)
	}
	if len(sum.Rounds) != 2 || sum.ReadingsPerSec.Median <= 0 || sum.Ratio.Median <= 0 {
		t.Fatalf("--rounds 2: summary = %+v", sum)
	}
	for i, r := range sum.Rounds {
		if r.Rows != 200 || r.IngestOnly == nil || r.IngestOnly.Rows != 200 || r.Tenant == sum.Rounds[1-i].Tenant {
			t.Errorf("round %d = %+v", i+1, r)
		}
	}
	if code, _, errOut := run(t, "bench", "pipeline", "--rounds", "0"); code == 0 || !strings.Contains(errOut, "--rounds") {
		t.Errorf("--rounds 0: exit %d, %q", code, errOut)
	}
}

// TestBenchPipelineStallFaultIntegration runs the pipeline bench against a
// Mosquitto that drops for a subscriber that falls behind (a queue of 10,
// an inflight window of 2): the bench must fail with the cause and the
// fix instead of waiting for rows that cannot come.
func TestBenchPipelineStallFaultIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	clearEnv(t)
	dbc := coretest.Postgres(t)
	// The bench clears what it wrote, so it gets a Redis of its own
	// (bench_test.go says why).
	redisAddr := coretest.PrivateRedis(t).Addr()
	broker := coretest.PrivateMosquittoWith(t, "max_queued_messages 10\nmax_inflight_messages 2\nsys_interval 1\n")
	benchEnv(t, dbc, redisAddr)
	t.Setenv("MQTT_BROKER_URL", broker.URL())

	code, _, errOut := run(t, "bench", "pipeline", "--publishers", "2", "--messages", "2000", "--readings", "5",
		"--no-ingest-only", "--stall-after", "3s", "--timeout", "3m")
	if code == 0 {
		t.Fatalf("the bench finished against a broker that drops:\n%s", errOut)
	}
	for _, want := range []string{"stalled", "rows committed", "max_queued_messages", "docs/benchmarks.md"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	t.Logf("bench output:\n%s", errOut[max(0, len(errOut)-1500):])
}
