package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// readingLog is a subscriber on the destination's topic: it keeps, per
// msgId, the values of metric n of that payload. A msgId seen twice is one
// payload sent twice (at least once delivery), which the cloud
// de-duplicates; a value under two msgIds is a reading published twice.
type readingLog struct {
	mu    sync.Mutex
	byMsg map[string][]int
	bad   []string
}

func (l *readingLog) add(payload []byte) {
	dec, err := codec.Decode(payload, codec.Limits{})
	l.mu.Lock()
	defer l.mu.Unlock()
	doc, _ := dec.Value.(map[string]any)
	id, _ := doc["msgId"].(string)
	if err != nil || id == "" {
		l.bad = append(l.bad, string(payload))
		return
	}
	var values []int
	msgs, _ := doc["messages"].([]any)
	for _, m := range msgs {
		rs, _ := m.(map[string]any)["readings"].([]any)
		for _, r := range rs {
			rm, _ := r.(map[string]any)
			if rm["metric"] != "n" {
				continue
			}
			v, err := strconv.ParseFloat(fmt.Sprint(rm["value"]), 64)
			if err != nil {
				l.bad = append(l.bad, string(payload))
				continue
			}
			values = append(values, int(v))
		}
	}
	l.byMsg[id] = values
}

// counts returns how many distinct payloads carried each value.
func (l *readingLog) counts() map[int]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]int{}
	for _, vs := range l.byMsg {
		for _, v := range vs {
			out[v]++
		}
	}
	return out
}

// TestRebootStopsEverythingAndLosesNothingIntegration: the agent's MQTT
// adapter listens to a broker a test publisher feeds, and an MQTT
// destination publishes every batch to the same broker. Some readings
// wait in the endpoint's batcher when POST /v1/reboot arrives. After the
// reboot the agent runs as many goroutines as before (every loop, worker
// and connection of the old run ended), and every reading fed before and
// after arrived exactly once.
func TestRebootStopsEverythingAndLosesNothingIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Mosquitto")
	}
	broker := coretest.PrivateMosquitto(t)
	r := startAgent(t, t.TempDir(), true, nil)

	log := &readingLog{byMsg: map[string][]int{}}
	watch := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("reboot-watch").SetCleanSession(true))
	if tok := watch.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watcher: %v", tok.Error())
	}
	t.Cleanup(func() { watch.Disconnect(100) })
	if tok := watch.Subscribe("out/#", 1, func(_ paho.Client, m paho.Message) { log.add(m.Payload()) }); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watcher subscribe: %v", tok.Error())
	}
	feed := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("reboot-feed").SetCleanSession(true))
	if tok := feed.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("feeder: %v", tok.Error())
	}
	t.Cleanup(func() { feed.Disconnect(100) })

	create := func(path, body string) map[string]any {
		t.Helper()
		code, out := r.do("POST", path, body, nil)
		if code != 201 {
			t.Fatalf("POST %s: %d %s", path, code, out)
		}
		return decode(t, out)
	}
	d := create("/v1/publish/destinations", fmt.Sprintf(`{"name":"line-broker","type":"mqtt","config_json":{"url":%q}}`, broker.URL()))
	create("/v1/publish/subscriptions", fmt.Sprintf(`{"publish_destination_id":%v,"route_json":{"topic":"out/line-1"}}`, d["id"]))
	// Seven readings a batch: of every 20 fed, 14 go out at once and 6
	// wait in the batcher (for a minute), so the reboot must flush them.
	create("/v1/endpoints", fmt.Sprintf(`{"name":"line-1","protocol":"mqtt","buffer_size":7,"buffer_time_ms":60000,
		"connection":{"brokerUrl":%q,"topics":["src/line-1"],"qos":1,"cleanSession":false},
		"data_points":[{"name":"n","register":"n","type":"float"}]}`, broker.URL()))

	adapterReadings := func() int {
		code, body := r.do("GET", "/v1/adapters/mqtt/devices/line-1", "", nil)
		if code != 200 {
			return -1
		}
		var dev struct {
			Connected   bool `json:"connected"`
			Diagnostics struct {
				Stats struct {
					Readings int `json:"readings"`
				} `json:"stats"`
			} `json:"diagnostics"`
		}
		if json.Unmarshal([]byte(body), &dev) != nil || !dev.Connected {
			return -1
		}
		return dev.Diagnostics.Stats.Readings
	}
	coretest.Eventually(t, 15*time.Second, "the MQTT endpoint to connect", func() bool { return adapterReadings() >= 0 })
	send := func(from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			if tok := feed.Publish("src/line-1", 1, false, fmt.Sprintf("{\"n\":%d}\n", i)); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Fatalf("feed %d: %v", i, tok.Error())
			}
		}
	}
	published := func(n int) func() bool {
		return func() bool { return len(log.counts()) >= n }
	}
	// quiet returns the goroutine count once it holds still: nothing is
	// fed, the test's idle HTTP connections are closed.
	quiet := func() int {
		var n int
		coretest.Eventually(t, 10*time.Second, "a steady goroutine count", func() bool {
			http.DefaultClient.CloseIdleConnections()
			a := runtime.NumGoroutine()
			time.Sleep(100 * time.Millisecond)
			n = runtime.NumGoroutine()
			return a == n
		})
		return n
	}

	send(1, 20)
	coretest.Eventually(t, 15*time.Second, "the adapter to take 20 readings", func() bool { return adapterReadings() == 20 })
	coretest.Eventually(t, 15*time.Second, "the first 14 readings published", published(14))
	if got := len(log.counts()); got != 14 {
		t.Fatalf("%d readings published before the reboot, want the 14 of two full batches", got)
	}
	before := quiet()

	if code, body := r.do("POST", "/v1/reboot", "", nil); code != 202 {
		t.Fatalf("reboot = %d %s", code, body)
	}
	r.waitReady()
	coretest.Eventually(t, 15*time.Second, "the 6 batched readings flushed by the reboot", published(20))
	coretest.Eventually(t, 15*time.Second, "the MQTT endpoint to reconnect", func() bool { return adapterReadings() >= 0 })
	send(21, 40)
	coretest.Eventually(t, 15*time.Second, "the readings fed after the reboot", published(34))
	// The last 6 wait in the batcher, as before the reboot.
	if after := quiet(); after != before {
		t.Errorf("%d goroutines after the reboot, %d before: the old run left some behind (or the new one lacks some)", after, before)
	}

	counts := log.counts()
	for v := 1; v <= 34; v++ {
		if counts[v] != 1 {
			t.Errorf("reading %d published %d times, want once", v, counts[v])
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.bad) > 0 {
		t.Errorf("payloads without a msgId or a numeric value: %q", log.bad)
	}
	t.Logf("%d payloads, readings 1..34 each once; %d goroutines before and after the reboot", len(log.byMsg), before)
}
