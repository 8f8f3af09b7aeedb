package api

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestSharedSubscriptionReplicasIntegration runs two API replicas in one
// MQTT_SHARED_SUBSCRIPTION_GROUP on the real Mosquitto: they split the
// messages, and together append each exactly once.
func TestSharedSubscriptionReplicasIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	brokerAddr := coretest.MQTTAddr(t)
	redisAddr := coretest.RedisAddr(t)
	ctx := context.Background()
	tenant, agent, group := randomID(t), randomID(t), "api-"+randomID(t)[:8]

	var runtimes []*rt.Runtime
	for i := range 2 {
		store, err := redisstore.New(redisstore.Options{Addrs: []string{redisAddr}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		runtimes = append(runtimes, sharedReplica(t, brokerAddr, store, tenant, "replica-"+agent[:6]+"-"+string(rune('a'+i)), group))
	}
	store, err := redisstore.New(redisstore.Options{Addrs: []string{redisAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	defer store.Delete(ctx, telemetry.IngestionStream(tenant))

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("agent-" + agent))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	const n = 200
	for seq := 1; seq <= n; seq++ {
		raw, _ := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: codec.FormatMsgpack})
		if tok := pub.Publish("i/"+tenant+"/a/"+agent+"/endpoints/modbus", 1, false, raw); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	coretest.Eventually(t, 15*time.Second, "every message appended", func() bool {
		l, _ := store.Len(ctx, telemetry.IngestionStream(tenant))
		return l >= 2*n
	})
	time.Sleep(300 * time.Millisecond)
	if l, _ := store.Len(ctx, telemetry.IngestionStream(tenant)); l != 2*n {
		t.Errorf("stream has %d entries, want %d", l, 2*n)
	}
	a, b := counter(t, runtimes[0], "edgeplat_api_telemetry_appended_total"), counter(t, runtimes[1], "edgeplat_api_telemetry_appended_total")
	if a == 0 || b == 0 || a+b != 2*n {
		t.Errorf("replicas appended %g and %g, want a split summing to %d", a, b, 2*n)
	}
	t.Logf("replicas appended %g and %g device messages", a, b)
}

// sharedReplica runs one API replica's MQTT pipeline, subscribed to the
// tenant's agents in the shared subscription group on the real broker,
// with more services (a live relay, say) beside it, until the test ends.
func sharedReplica(t *testing.T, brokerAddr string, store streamstore.Store, tenant, clientID, group string, more ...lifecycle.Service) *rt.Runtime {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	pipe, err := newPipeline(cfg, r, store)
	if err != nil {
		t.Fatal(err)
	}
	mo := mqttx.DefaultOptions()
	mo.BrokerURL, mo.CleanSession, mo.Registerer, mo.Name = "tcp://"+brokerAddr, true, r.Metrics, "api-mqtt"
	mo.ClientID, mo.SharedGroup = clientID, group
	client, err := mqttx.New(mo)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Subscribe("i/"+tenant+"/a/+/endpoints/#", 1, pipe.handle); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- lifecycle.Run(ctx, lifecycle.Options{}, append([]lifecycle.Service{pipe, client}, more...)...)
	}()
	t.Cleanup(func() { cancel(); <-done })
	coretest.Eventually(t, 10*time.Second, "replica to connect", func() bool { return client.Check(ctx) == nil })
	return r
}
