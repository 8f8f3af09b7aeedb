package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/edgeplat/edgeplat/cmd/internal/bench"
	"github.com/edgeplat/edgeplat/core/coretest"
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
