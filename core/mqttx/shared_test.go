package mqttx

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// testSharedSplit runs two clients in one shared subscription group on the
// broker at brokerURL, publishes n messages and checks that they were split
// between the two: each got some, none got a message twice, none was lost.
// shared marks a broker that outlives the test (see asPublisher).
func testSharedSplit(t *testing.T, brokerURL string, shared bool) {
	const n = 200
	group := uniqueID("g")
	base := uniqueID("edgeplat-test/shared")
	filter := base + "/+/data"

	var mu sync.Mutex
	seen := map[string]int{}     // payload → deliveries
	byClient := map[string]int{} // client → messages
	handler := func(name string) Handler {
		return func(_ context.Context, m Message) error {
			mu.Lock()
			defer mu.Unlock()
			seen[string(m.Payload)]++
			byClient[name]++
			return nil
		}
	}
	for _, name := range []string{"replica-a", "replica-b"} {
		o := testOptions(t, brokerURL)
		o.Name = name
		o.SharedGroup = group
		o.CleanSession = shared
		c := newClient(t, o)
		if err := c.Subscribe(filter, 1, handler(name)); err != nil {
			t.Fatal(err)
		}
		start(t, c)
		waitState(t, c, StateConnected)
	}
	pub := newClient(t, asPublisher(testOptions(t, brokerURL), shared))
	start(t, pub)
	waitState(t, pub, StateConnected)
	for i := range n {
		publishOK(t, pub, fmt.Sprintf("%s/dev%d/data", base, i%7), fmt.Sprintf("m%03d", i))
	}
	coretest.Eventually(t, waitFor, fmt.Sprintf("%d messages across the group", n), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	mu.Lock()
	defer mu.Unlock()
	for p, k := range seen {
		if k != 1 {
			t.Errorf("%s delivered %d times", p, k)
		}
	}
	if byClient["replica-a"] == 0 || byClient["replica-b"] == 0 || byClient["replica-a"]+byClient["replica-b"] != n {
		t.Errorf("split %v, want both replicas to get some and %d in all", byClient, n)
	}
	t.Logf("split between replicas: %v", byClient)
}

// TestSharedSubscriptionSplits runs the split against the embedded broker.
func TestSharedSubscriptionSplits(t *testing.T) {
	tb := startBroker(t, 0)
	testSharedSplit(t, tb.url(), false)
}

// TestSharedSubscriptionSplitsIntegration runs it against the machine's
// Mosquitto (EDGEPLAT_TEST_MQTT_ADDR), the broker production uses.
func TestSharedSubscriptionSplitsIntegration(t *testing.T) {
	addr := coretest.MQTTAddr(t)
	testSharedSplit(t, "tcp://"+addr, true)
}
