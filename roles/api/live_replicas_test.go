package api

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/rt"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/token"
)

// TestLiveStreamAcrossReplicasIntegration runs two API replicas on one
// Redis, splitting an agent's MQTT telemetry through a shared
// subscription, with a dashboard's live stream open on each: every
// message reaches both dashboards, whichever replica took it from the
// broker, because the live relay goes through Redis pub/sub rather than
// the replica's memory.
func TestLiveStreamAcrossReplicasIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	brokerAddr := coretest.MQTTAddr(t)
	redisAddr := coretest.RedisAddr(t)
	ctx := context.Background()
	tenant, agent, group := randomID(t), randomID(t), "live-"+randomID(t)[:8]
	tenantUUID, _ := codec.DecodeID(tenant)
	agentUUID, _ := codec.DecodeID(agent)
	tokens := testTokens(t)
	bearer := sign(t, tokens, tenantUUID.String(), token.Access)

	var runtimes []*rt.Runtime
	var dashboards []*sseReader
	for i := range 2 {
		store, err := redisstore.New(redisstore.Options{Addrs: []string{redisAddr}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		lv := newLive(store, 10, prometheus.NewRegistry())
		srv := httptest.NewServer(restEngine(t, tokens, lv))
		t.Cleanup(srv.Close) // after the relay has ended its streams: cleanups run last first
		runtimes = append(runtimes, sharedReplica(t, brokerAddr, store, tenant, "live-"+agent[:6]+"-"+string(rune('a'+i)), group, lv))
		dashboards = append(dashboards, openStream(t, srv.URL+"/api/v1/agents/"+agentUUID.String()+"/stream", bearer))
	}
	defer func() {
		store, err := redisstore.New(redisstore.Options{Addrs: []string{redisAddr}})
		if err == nil {
			_, _ = store.Delete(ctx, telemetry.IngestionStream(tenant))
			_ = store.Close()
		}
	}()

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("agent-" + agent))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	const n = 30
	for seq := 1; seq <= n; seq++ {
		raw, _ := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: codec.FormatMsgpack})
		if tok := pub.Publish("i/"+tenant+"/a/"+agent+"/endpoints/modbus", 1, false, raw); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	// A stream that misses an event would block its read: end it.
	stop := time.AfterFunc(30*time.Second, func() {
		for _, d := range dashboards {
			d.resp.Body.Close()
		}
	})
	defer stop.Stop()
	for i, d := range dashboards {
		for got := 0; got < n; got++ {
			if ev, _ := d.nextEvent(); ev != "metrics" {
				t.Fatalf("dashboard on replica %d: event %q after %d metrics events", i, ev, got)
			}
		}
	}
	a, b := counter(t, runtimes[0], "edgeplat_api_telemetry_appended_total"), counter(t, runtimes[1], "edgeplat_api_telemetry_appended_total")
	if a == 0 || b == 0 {
		t.Errorf("replicas appended %g and %g device messages: one took nothing, so no event crossed replicas", a, b)
	}
	t.Logf("replicas appended %g and %g device messages; each dashboard got all %d batches", a, b, n)
}
