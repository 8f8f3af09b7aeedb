package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	memstore "github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// testMembers is a membership record under scope for client id, started.
func testMembers(t *testing.T, store streamstore.Store, scope, group, id string) *groupMembers {
	t.Helper()
	g := newGroupMembers(store, nil, group, func() string { return id }, func() bool { return true },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if g == nil {
		t.Fatal("no membership record on a Redis store")
	}
	g.scope = func(context.Context) (string, error) { return scope, nil }
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGroupMembersIntegration: a replica leaves only when another live
// member remains; of two stopping one after the other only the first
// leaves; a member whose heartbeat expired does not count.
func TestGroupMembersIntegration(t *testing.T) {
	store, _ := redisTestStore(t)
	ctx := t.Context()
	tests := []struct {
		name string
		run  func(t *testing.T, scope string) []bool // the Leave answers, in order
		want []bool
	}{
		{"last member keeps its session", func(t *testing.T, scope string) []bool {
			a := testMembers(t, store, scope, "g", "a")
			if err := a.beat(ctx); err != nil {
				t.Fatal(err)
			}
			return []bool{a.Leave(ctx)}
		}, []bool{false}},
		{"one of two leaves, then the other is last", func(t *testing.T, scope string) []bool {
			a, b := testMembers(t, store, scope, "g", "a"), testMembers(t, store, scope, "g", "b")
			for _, m := range []*groupMembers{a, b} {
				if err := m.beat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			return []bool{a.Leave(ctx), b.Leave(ctx)}
		}, []bool{true, false}},
		{"a stopped member does not count", func(t *testing.T, scope string) []bool {
			a, b := testMembers(t, store, scope, "g", "a"), testMembers(t, store, scope, "g", "b")
			for _, m := range []*groupMembers{a, b} {
				if err := m.beat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			return []bool{a.Leave(ctx)}
		}, []bool{false}},
		{"an expired member does not count", func(t *testing.T, scope string) []bool {
			a, b := testMembers(t, store, scope, "g", "a"), testMembers(t, store, scope, "g", "b")
			b.ttl = time.Millisecond
			if err := b.beat(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // past b's TTL on the server's clock
			if err := a.beat(ctx); err != nil {
				t.Fatal(err)
			}
			return []bool{a.Leave(ctx)}
		}, []bool{false}},
		{"other groups and installations do not count", func(t *testing.T, scope string) []bool {
			a := testMembers(t, store, scope, "g", "a")
			for _, m := range []*groupMembers{a, testMembers(t, store, scope, "other", "b"), testMembers(t, store, scope+"x", "g", "c")} {
				if err := m.beat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			return []bool{a.Leave(ctx)}
		}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scope := randomID(t)
			t.Cleanup(func() {
				_, _ = store.Delete(context.Background(), groupKeyPrefix+"{"+scope+":g}", groupKeyPrefix+"{"+scope+":other}",
					groupKeyPrefix+"{"+scope+"x:g}")
			})
			if got := tt.run(t, scope); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Leave answered %v, want %v", got, tt.want)
			}
		})
	}
}

// TestGroupMembersWithoutRedis: the in-process store has no other
// replica, so nothing is recorded and the replica never leaves.
func TestGroupMembersWithoutRedis(t *testing.T) {
	store, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if g := newGroupMembers(store, nil, "g", nil, nil, nil); g != nil {
		t.Error("a membership record on the in-process store")
	}
}

// leavingReplica runs a pipeline and a persistent MQTT client in group,
// with the membership record that decides whether it leaves the group when
// it stops; stop stops it as a signal would.
func leavingReplica(t *testing.T, brokerURL string, store streamstore.Store, rdb *goredis.Client, scope, tenant, clientID, group string) (r *rt.Runtime, stop func()) {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	r = &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	pipe, err := newPipeline(cfg, r, store)
	if err != nil {
		t.Fatal(err)
	}
	var client *mqttx.Client
	members := newGroupMembers(store, nil, group, func() string { return client.ClientID() },
		func() bool { return client.State() == mqttx.StateConnected }, r.Logger)
	members.scope = func(context.Context) (string, error) { return scope, nil }
	mo := mqttx.DefaultOptions()
	mo.BrokerURL, mo.Registerer, mo.Name = brokerURL, r.Metrics, "api-mqtt"
	mo.ClientID, mo.SharedGroup, mo.LeaveShared = clientID, group, members.Leave
	mo.LeaveQuiet, mo.OnStateChange = 300*time.Millisecond, members.StateChanged
	if client, err = mqttx.New(mo); err != nil {
		t.Fatal(err)
	}
	if err := client.SubscribeBatch("i/"+tenant+"/a/+/endpoints/#", 1, pipe.handleBatch); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- lifecycle.Run(ctx, lifecycle.Options{GracePeriod: 20 * time.Second}, pipe, client, members)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("replica %s: %v", clientID, err)
			}
		}
	}
	t.Cleanup(stop)
	coretest.Eventually(t, 10*time.Second, "replica to connect", func() bool { return client.Check(ctx) == nil })
	// Recorded as a member, on connecting, before the test relies on it.
	coretest.Eventually(t, 10*time.Second, "replica recorded as a member", func() bool {
		return rdb.ZScore(ctx, members.key, clientID).Err() == nil
	})
	return r, stop
}

// TestGroupMembersBeatOnConnect: the record appears when the client
// connects, not only at the next heartbeat, and not while it is
// disconnected.
func TestGroupMembersBeatOnConnect(t *testing.T) {
	store, rdb := redisTestStore(t)
	var connected atomic.Bool
	var asked atomic.Int64
	g := testMembers(t, store, randomID(t), "g", "a")
	t.Cleanup(func() { _, _ = store.Delete(context.Background(), g.key) })
	g.connected = func() bool {
		c := connected.Load()
		asked.Add(1) // after the read: once asked, the answer is given
		return c
	}
	g.every = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// Run's first round found the client disconnected; the next heartbeat
	// is an hour away.
	coretest.Eventually(t, 10*time.Second, "the first round", func() bool { return asked.Load() > 0 })
	g.StateChanged(mqttx.StateConnecting, mqttx.StateReconnecting) // no kick
	connected.Store(true)
	g.StateChanged(mqttx.StateConnecting, mqttx.StateConnected)
	coretest.Eventually(t, 10*time.Second, "the record after connecting", func() bool {
		return rdb.ZScore(ctx, g.key, "a").Err() == nil
	})
}

// TestReplicaLeavesSharedGroupIntegration runs two serve-api pipelines in
// one shared group on a private Mosquitto and stops the first while an
// agent publishes: it leaves the group, so every message is appended once
// by one of the two without the first coming back. Then the second, now
// the last member, stops: it keeps its session, which queues what is
// published meanwhile for its return.
func TestReplicaLeavesSharedGroupIntegration(t *testing.T) {
	broker := coretest.PrivateMosquitto(t)
	store, rdb := redisTestStore(t)
	scope, tenant, agent, group := randomID(t), randomID(t), randomID(t), "leave-"+randomID(t)[:8]
	t.Cleanup(func() {
		_, _ = store.Delete(context.Background(), telemetry.IngestionStream(tenant), groupKeyPrefix+"{"+scope+":"+group+"}")
	})
	ra, stopA := leavingReplica(t, broker.URL(), store, rdb, scope, tenant, "api-a-"+agent[:8], group)
	rb, stopB := leavingReplica(t, broker.URL(), store, rdb, scope, tenant, "api-b-"+agent[:8], group)

	pub := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("agent-" + agent))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	seq := 0
	publish := func(k int) {
		t.Helper()
		for range k {
			seq++
			raw, _ := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: codec.FormatMsgpack})
			if tok := pub.Publish("i/"+tenant+"/a/"+agent+"/endpoints/modbus", 1, false, raw); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Fatalf("publish %d: %v", seq, tok.Error())
			}
		}
	}
	decoded := func(rs ...*rt.Runtime) (sum float64) {
		for _, r := range rs {
			sum += counter(t, r, "edgeplat_api_telemetry_decoded_total")
		}
		return sum
	}
	publish(200)
	stopped := make(chan struct{})
	go func() { defer close(stopped); stopA() }()
	publish(200) // while A leaves and after
	<-stopped
	publish(200)
	coretest.Eventually(t, 30*time.Second, "600 messages decoded by the two replicas", func() bool { return decoded(ra, rb) >= 600 })
	if got := decoded(ra, rb); got != 600 {
		t.Errorf("decoded %g messages, want 600", got)
	}
	if d := counter(t, ra, "edgeplat_api_telemetry_duplicates_total") + counter(t, rb, "edgeplat_api_telemetry_duplicates_total"); d != 0 {
		t.Errorf("%g messages came twice", d)
	}
	if decoded(ra) == 0 {
		t.Errorf("the first replica decoded nothing before it left")
	}
	t.Logf("decoded: first %g, second %g", decoded(ra), decoded(rb))

	// B is the last member: it keeps its session, which queues for it.
	stopB()
	publish(50)
	rb2, _ := leavingReplica(t, broker.URL(), store, rdb, scope, tenant, "api-b-"+agent[:8], group)
	coretest.Eventually(t, 30*time.Second, "the queued 50 messages on the last member's return", func() bool { return decoded(rb2) >= 50 })
}
