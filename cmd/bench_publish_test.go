package cmd

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/cmd/internal/bench"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestBenchPublishIntegration: bench publish delivers its whole load to a
// subscriber of the bench topics, one line protocol line per reading, and
// reports what the broker acknowledged.
func TestBenchPublishIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	clearEnv(t)
	broker := coretest.PrivateMosquitto(t)
	t.Setenv("MQTT_BROKER_URL", broker.URL())

	var mu sync.Mutex
	var payloads [][]byte
	topics := map[string]bool{}
	sub := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("bench-publish-test").SetCleanSession(true))
	if tok := sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect the subscriber: %v", tok.Error())
	}
	defer sub.Disconnect(100)
	tok := sub.Subscribe("i/+/a/+/endpoints/modbus", 1, func(_ paho.Client, m paho.Message) {
		mu.Lock()
		defer mu.Unlock()
		payloads = append(payloads, m.Payload())
		topics[m.Topic()] = true
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}

	code, out, errOut := run(t, "bench", "publish", "--format", "influx", "--publishers", "2", "--messages", "10", "--readings", "5", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	var rep bench.PublishReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not the JSON report: %v\n%s", err, out)
	}
	if rep.Messages != 20 || rep.Published != 20 || rep.EndUnixNano < rep.StartUnixNano || rep.StartUnixNano == 0 || rep.PublishRate <= 0 {
		t.Errorf("report = %+v", rep)
	}
	coretest.Eventually(t, 10*time.Second, "all 20 messages at the subscriber", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(payloads) >= 20
	})

	mu.Lock()
	defer mu.Unlock()
	if len(payloads) != 20 || len(topics) != 2 {
		t.Fatalf("%d messages on %d topics, want 20 on 2", len(payloads), len(topics))
	}
	for topic := range topics {
		if !strings.HasPrefix(topic, "i/"+rep.Tenant+"/a/") {
			t.Errorf("topic %s is not the tenant %s's", topic, rep.Tenant)
		}
	}
	// The series (measurement and tags) and the time of each line: the
	// values are bench pipeline's, checked in the bench package.
	keys := map[string]bool{}
	for _, p := range payloads {
		for line := range strings.Lines(string(p)) {
			f := strings.Fields(line)
			if len(f) != 3 || !strings.HasPrefix(f[0], "readings,agent=") || !strings.HasPrefix(f[1], "value=") {
				t.Fatalf("line %q is not readings,agent=...,metric=... value=... <ns>", line)
			}
			keys[f[0]+" "+f[2]] = true
		}
	}
	if len(keys) != 100 {
		t.Errorf("%d distinct (agent, metric, time) lines, want 100", len(keys))
	}

	if code, _, errOut := run(t, "bench", "publish", "--format", "csv"); code == 0 || !strings.Contains(errOut, "--format") {
		t.Errorf("--format csv: exit %d, %q", code, errOut)
	}
}
