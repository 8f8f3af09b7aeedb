package cmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
)

func TestBenchPipelineIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	clearEnv(t)
	dbc := coretest.Postgres(t)
	redisAddr := coretest.RedisAddr(t)
	mqttAddr := coretest.MQTTAddr(t)
	benchEnv(t, dbc, redisAddr)
	// Away from the ingest bench's database and other packages' engines.
	t.Setenv("STREAMSTORE_DB", "11")
	t.Setenv("MQTT_BROKER_URL", "tcp://"+mqttAddr)

	code, out, errOut := run(t, "bench", "pipeline", "--publishers", "2", "--messages", "20", "--readings", "5", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	var rep pipelineReport
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
}
