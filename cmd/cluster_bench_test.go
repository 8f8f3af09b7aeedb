package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/cmd/internal/bench"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestBenchClusterSurvivesSIGKILLIntegration runs `edgeplat bench cluster`
// with two serve-api and two ingest processes on a private broker and
// Redis, SIGKILLs one of each mid-run and restarts them, and checks that
// every message the broker acknowledged is in PostgreSQL exactly once.
func TestBenchClusterSurvivesSIGKILLIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	dbc := coretest.Postgres(t)
	// Private: the bench's ingest processes take every tenant stream of
	// their Redis database, and its serve-api processes every agent topic
	// of their broker.
	redis := coretest.PrivateRedis(t)
	broker := coretest.PrivateMosquittoWith(t, "max_inflight_messages 100\n")
	bin := buildBinary(t)
	host, port := "127.0.0.1", redis.Addr()[len("127.0.0.1:"):]

	c := exec.Command(bin, "bench", "cluster", "--api", "2", "--ingest", "2", "--kill", "--restart-after", "1s",
		"--rate", "100", "--duration", "20s", "--readings", "5", "--publishers", "2",
		"--reclaim-idle", "2s", "--stall-after", "30s", "--timeout", "90s", "--json")
	c.Env = append(os.Environ(),
		"DB_HOST="+dbc.Host, "DB_PORT="+strconv.Itoa(dbc.Port), "DB_NAME="+dbc.Name, "DB_USER="+dbc.User, "DB_SSL=disable",
		"STREAMSTORE_HOST="+host, "STREAMSTORE_PORT="+port, "MQTT_BROKER_URL="+broker.URL())
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if err != nil {
		t.Errorf("bench cluster: %v", err)
	}
	var reps []bench.ClusterReport
	if jerr := json.Unmarshal(stdout.Bytes(), &reps); jerr != nil || len(reps) != 1 {
		t.Fatalf("report: %v (%d runs)\nstdout: %s\nstderr: %s", jerr, len(reps), stdout.String(), stderr.String())
	}
	r := reps[0]
	if r.Published != int64(r.Messages) || r.Rows != r.RowsWanted || r.Rows != int64(r.Messages*r.ReadingsPerMessage) ||
		r.Missing != 0 || r.Partial != 0 || r.Duplicates != 0 || r.DeadLetters != 0 || !r.Killed || !r.Restarted {
		t.Errorf("report %+v\nstderr: %s", r, stderr.String())
	} else if err != nil {
		t.Logf("stderr: %s", stderr.String())
	}
	t.Logf("2+2 with one serve-api and one ingest killed: %d messages, %d rows, %.1fs, %.0f redeliveries dropped",
		r.Published, r.Rows, r.ElapsedSeconds, r.Redeliveries)
}

func TestBenchClusterBadInput(t *testing.T) {
	clearEnv(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no serve-api", []string{"--api", "0"}, "--api must be 1..16, got 0"},
		{"no rate", []string{"--rate", "0"}, "--rate must be positive, got 0"},
		{"kill at the end", []string{"--kill-at", "1"}, "--kill-at must be between 0 and 1"},
		{"kill with SIGHUP", []string{"--kill-signal", "HUP"}, `--kill-signal must be KILL or TERM, got "HUP"`},
		{"bad format", []string{"--format", "xml"}, "--format: "},
		{"bad flag value", []string{"--ingest", "two"}, `invalid argument "two" for "--ingest" flag`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"bench", "cluster"}, tt.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, exitUsage, tt.want)
			}
		})
	}
}

// TestBenchClusterRefusesASharedRedisIntegration: the bench's ingest
// processes would consume other tenants' streams, so a Redis database
// that has some is refused before anything starts.
func TestBenchClusterRefusesASharedRedisIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	clearEnv(t)
	dbc := coretest.Postgres(t)
	redis := coretest.PrivateRedis(t)
	store, err := redisstore.New(redisstore.Options{Addrs: []string{redis.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Add(context.Background(), telemetry.IngestionStream("someoneElsesTenant0000"), map[string]string{"data": "{}"}, 0); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"DB_HOST": dbc.Host, "DB_PORT": strconv.Itoa(dbc.Port), "DB_NAME": dbc.Name, "DB_USER": dbc.User,
		"STREAMSTORE_HOST": "127.0.0.1", "STREAMSTORE_PORT": redis.Addr()[len("127.0.0.1:"):]} {
		t.Setenv(k, v)
	}
	code, _, errOut := run(t, "bench", "cluster")
	if code != exitUsage || !strings.Contains(errOut, "holds 1 tenants' ingestion streams") || !strings.Contains(errOut, "pick an unused "+config.EnvNames("streamstore.db")) {
		t.Errorf("exit %d, stderr %q; want a usage error naming STREAMSTORE_DB", code, errOut)
	}
}
