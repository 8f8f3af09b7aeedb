package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	"github.com/gin-gonic/gin"
)

func outageLength(t *testing.T) time.Duration {
	if v := os.Getenv("EDGEPLAT_TEST_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("EDGEPLAT_TEST_OUTAGE: %v", err)
		}
		return d
	}
	return 6 * time.Second
}

// TestStreamStoreOutageIntegration stops a private Redis while telemetry
// flows through the real Mosquitto: the breaker opens, spool files grow and
// ingestion-health says so; with Redis back the spool replays and every
// message is in the stream exactly once.
func TestStreamStoreOutageIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	brokerAddr := coretest.MQTTAddr(t)
	srv, store := privateRedisStore(t, coretest.RedisOptions{})
	ctx := context.Background()
	tenant, agent := randomID(t), randomID(t)

	pipe, r := spooledPipeline(t, store)
	pipe.every = 100 * time.Millisecond
	_, stopSubscriber := runSubscriber(t, pipe, r, brokerAddr, "outage-test-"+agent, "i/"+tenant+"/a/+/endpoints/#")
	defer stopSubscriber()

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("agent-" + agent))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	var mu sync.Mutex
	sent := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := 1; ; seq++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			raw, _ := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: codec.FormatMsgpackDeflate})
			if tok := pub.Publish("i/"+tenant+"/a/"+agent+"/endpoints/modbus", 1, false, raw); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Errorf("publish: %v", tok.Error())
				return
			}
			mu.Lock()
			sent++
			mu.Unlock()
		}
	}()

	h := &handlers{rt: r, pipe: pipe}
	ingestionHealth := func() string {
		gin.SetMode(gin.ReleaseMode)
		rec := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(rec)
		c.Request = httptest.NewRequest(http.MethodGet, "/api/v1/metrics/ingestion-health", nil)
		h.ingestionHealth(c)
		return rec.Body.String()
	}

	time.Sleep(500 * time.Millisecond)
	srv.Stop()
	outage := outageLength(t)
	t0 := time.Now()
	coretest.Eventually(t, outage, "the breaker to open", func() bool { return !pipe.breaker.Allow() })
	coretest.Eventually(t, outage, "spool files to appear", func() bool {
		files, _ := filepath.Glob(filepath.Join(pipe.spoolOp.Dir, "spool-*.ndjson"))
		return len(files) > 0
	})
	if body := ingestionHealth(); !strings.Contains(body, `"streamStoreConnected":false`) || !strings.Contains(body, `"circuitBreaker":"open"`) {
		t.Errorf("ingestion-health during the outage = %s", body)
	}
	time.Sleep(time.Until(t0.Add(outage)))
	srv.Start()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	coretest.Eventually(t, 30*time.Second, "the spool to drain and the breaker to close", func() bool {
		return pipe.spool.Empty() && pipe.breaker.Allow()
	})
	mu.Lock()
	want := int64(sent * 2)
	mu.Unlock()
	coretest.Eventually(t, 10*time.Second, fmt.Sprintf("%d entries in the stream", want), func() bool {
		n, _ := store.Len(ctx, telemetry.IngestionStream(tenant))
		return n >= want
	})
	time.Sleep(300 * time.Millisecond)
	if n, _ := store.Len(ctx, telemetry.IngestionStream(tenant)); n != want {
		t.Fatalf("stream has %d entries, want exactly %d (%d messages x 2 devices)", n, want, want/2)
	}
	if body := ingestionHealth(); !strings.Contains(body, `"streamStoreConnected":true`) || !strings.Contains(body, `"circuitBreaker":"closed"`) {
		t.Errorf("ingestion-health after recovery = %s", body)
	}
	t.Logf("outage %s: %d messages, %g spooled, %g replayed, stream exact", outage, want/2,
		counter(t, r, "edgeplat_api_telemetry_spooled_total"), counter(t, r, "edgeplat_api_telemetry_replayed_total"))
}

// privateRedisStore starts a private Redis with opts and opens a stream
// store on it; the test's cleanup closes both.
func privateRedisStore(t *testing.T, opts coretest.RedisOptions) (*coretest.RedisServer, *redisstore.Store) {
	t.Helper()
	srv := coretest.PrivateRedisWith(t, opts)
	store, err := redisstore.New(redisstore.Options{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return srv, store
}

// spooledPipeline is the Cloud API pipeline on store with the default
// configuration and a disk spool in a temporary directory.
func spooledPipeline(t *testing.T, store streamstore.Store) (*pipeline, *rt.Runtime) {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Spool.Enabled, cfg.Spool.Path = true, t.TempDir()
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	pipe, err := newPipeline(cfg, r, store)
	if err != nil {
		t.Fatal(err)
	}
	return pipe, r
}

// runSubscriber runs pipe with an MQTT subscriber of its own on the broker
// at brokerAddr, subscribed to filters with the pipeline's batch handler,
// and waits until it is connected. stop ends both; defer it before anything
// the pipeline uses is closed.
func runSubscriber(t *testing.T, pipe *pipeline, r *rt.Runtime, brokerAddr, clientID string, filters ...string) (client *mqttx.Client, stop func()) {
	t.Helper()
	mo := mqttx.DefaultOptions()
	mo.BrokerURL, mo.ClientID, mo.CleanSession = "tcp://"+brokerAddr, clientID, true
	return runSubscriberWith(t, pipe, r, mo, filters...)
}

// runSubscriberWith is runSubscriber with the caller's client options, for
// tests that need a persistent session: a message left unacknowledged is
// redelivered on a reconnect only to a session the broker kept.
func runSubscriberWith(t *testing.T, pipe *pipeline, r *rt.Runtime, mo mqttx.Options, filters ...string) (client *mqttx.Client, stop func()) {
	t.Helper()
	mo.Registerer, mo.Name = r.Metrics, "api-mqtt"
	client, err := mqttx.New(mo)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range filters {
		if err := client.SubscribeBatch(f, 1, pipe.handleBatch); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, lifecycle.Options{}, pipe, client) }()
	stop = func() { cancel(); <-done }
	coretest.Eventually(t, 10*time.Second, "the subscriber to connect", func() bool { return client.Check(ctx) == nil })
	return client, stop
}
