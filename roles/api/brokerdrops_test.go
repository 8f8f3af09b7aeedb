package api

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDropWatchCountsIncreases(t *testing.T) {
	tests := []struct {
		name     string
		readings []string
		want     float64 // counted drops
		warnings int
	}{
		{"quiet broker", []string{"0", "0", "0"}, 0, 0},
		{"drops while watched", []string{"0", "5", "5", "12"}, 12, 2},
		{"drops before we watched: baseline, reported once", []string{"40", "40", "41"}, 1, 2},
		{"broker restarted", []string{"10", "3", "4"}, 4, 3},
		{"unreadable payloads ignored", []string{"0", "lots", "", "-1", "2"}, 2, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf coretest.SyncBuffer
			w := newDropWatch(slog.New(slog.NewTextHandler(&buf, nil)), metrics.NewRegistry())
			for _, r := range tc.readings {
				if err := w.handle(context.Background(), mqttx.Message{Topic: brokerDroppedTopic, Payload: []byte(r)}); err != nil {
					t.Fatal(err)
				}
			}
			if got := testutil.ToFloat64(w.dropped); got != tc.want {
				t.Errorf("counted %g drops, want %g", got, tc.want)
			}
			if got := strings.Count(buf.String(), "level=WARN"); got != tc.warnings {
				t.Errorf("%d warnings, want %d:\n%s", got, tc.warnings, buf.String())
			}
		})
	}
}

// TestBrokerDropWarningIntegration drives Mosquitto into dropping for
// real: a private broker that queues 10 messages per client, a subscriber
// with a persistent session that went away, and more messages for it than
// that. serve-api's watch must see the broker's counter grow, warn and
// count it.
func TestBrokerDropWarningIntegration(t *testing.T) {
	broker := coretest.PrivateMosquittoWith(t, "max_queued_messages 10\nsys_interval 1\n")
	var buf coretest.SyncBuffer
	reg := metrics.NewRegistry()
	w := newDropWatch(slog.New(slog.NewTextHandler(&buf, nil)), reg)
	mo := mqttx.DefaultOptions()
	mo.BrokerURL, mo.ClientID, mo.CleanSession, mo.Registerer, mo.Name = broker.URL(), "api-drops-"+randomID(t), true, reg, "api-mqtt"
	client, err := mqttx.New(mo)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.subscribe(client); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, lifecycle.Options{}, client) }()
	defer func() { cancel(); <-done }()
	coretest.Eventually(t, 15*time.Second, "the first reading of the broker's drop counter", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.seen
	})

	// A slow subscriber at its slowest: subscribed with a persistent
	// session, then gone.
	topic := "slow/" + randomID(t)
	slow := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("slow-" + randomID(t)).SetCleanSession(false))
	if tok := slow.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	if tok := slow.Subscribe(topic, 1, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	slow.Disconnect(100)
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("pub-" + randomID(t)))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	const sent = 50
	for i := range sent {
		if tok := pub.Publish(topic, 1, false, []byte{byte(i)}); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	coretest.Eventually(t, 20*time.Second, "the drop warning", func() bool {
		return testutil.ToFloat64(w.dropped) > 0 && strings.Contains(buf.String(), "dropped messages it had acknowledged")
	})
	t.Logf("broker dropped %g of %d messages for the absent subscriber", testutil.ToFloat64(w.dropped), sent)
}
