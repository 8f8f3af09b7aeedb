package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/gin-gonic/gin"
)

// load publishes telemetry as one agent does, QoS 1, one message every
// interval, until stopped; sent counts the messages the broker took.
type load struct {
	sent atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startLoad(t *testing.T, brokerURL, tenant, agent string, every time.Duration) *load {
	t.Helper()
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(brokerURL).SetClientID("agent-" + agent))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect publisher: %v", tok.Error())
	}
	l := &load{stop: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer pub.Disconnect(100)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for seq := 1; ; seq++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			raw, _ := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: codec.FormatMsgpackDeflate})
			if tok := pub.Publish("i/"+tenant+"/a/"+agent+"/endpoints/modbus", 1, false, raw); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Errorf("publish %d: %v", seq, tok.Error())
				return
			}
			l.sent.Add(1)
		}
	}()
	return l
}

// halt stops publishing and returns how many messages the broker took.
func (l *load) halt() int64 {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	return l.sent.Load()
}

// healthBody runs the role's /health handler.
func healthBody(h *handlers) (int, string) {
	gin.SetMode(gin.ReleaseMode)
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest(http.MethodGet, "/health", nil)
	h.health(c)
	return rec.Code, rec.Body.String()
}

// TestSpoolFullDiskFaultIntegration puts the spool on a 512 KiB file system
// that a filler file has nearly filled, and stops Redis under load: the
// spool fills the disk, health says so and the breaker is open. Redis
// comes back while the disk is still full, so the replayer cannot save its
// position; later the filler goes. Every message must end in the stream
// exactly once, and every spooled line be replayed once: a replayer that
// repeats its first batch on a full disk (it once did, forever) replays
// more lines than were spooled.
func TestSpoolFullDiskFaultIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test; -short given")
	}
	fs, ok := coretest.SmallFS(t, 512<<10)
	if !ok {
		t.Skip("cannot mount a small tmpfs here (needs root); core/spool's injected-ENOSPC test covers the replayer")
	}
	broker := coretest.PrivateMosquitto(t)
	srv, store := privateRedisStore(t, coretest.RedisOptions{})
	ctx := context.Background()
	tenant, agent := randomID(t), randomID(t)

	filler := coretest.FillFS(t, fs)
	if st, err := os.Stat(filler); err != nil {
		t.Fatal(err)
	} else if err := os.Truncate(filler, st.Size()-96<<10); err != nil {
		t.Fatal(err) // leaves ~96 KiB for the spool: about a hundred messages
	}
	pipe, r := spooledPipeline(t, store)
	pipe.every = 100 * time.Millisecond
	pipe.spoolOp.Dir = filepath.Join(fs, "spool")
	mo := mqttx.DefaultOptions()
	mo.BrokerURL, mo.ClientID = broker.URL(), "api-fault-"+agent
	mo.BackoffBase, mo.BackoffMax = 100*time.Millisecond, 500*time.Millisecond
	_, stopSubscriber := runSubscriberWith(t, pipe, r, mo, "i/"+tenant+"/a/+/endpoints/#")
	defer stopSubscriber()
	h := &handlers{rt: r, pipe: pipe}

	l := startLoad(t, broker.URL(), tenant, agent, 20*time.Millisecond)
	defer l.halt()
	coretest.Eventually(t, 10*time.Second, "the first messages in the stream", func() bool {
		n, _ := store.Len(ctx, telemetry.IngestionStream(tenant))
		return n > 0
	})
	srv.Stop()
	coretest.Eventually(t, 60*time.Second, "the spool to fill its disk", func() bool { return pipe.spool.Stats().DiskFull })
	if code, body := healthBody(h); code != http.StatusServiceUnavailable || !strings.Contains(body, "spool disk full") {
		t.Errorf("/health with the spool disk full = %d %s, want 503 naming the full spool disk", code, body)
	}
	if pipe.breaker.Allow() {
		t.Error("breaker closed while the store is down and the spool full")
	}
	spooledAtFull := counter(t, r, "api_telemetry_spooled_total")

	// Redis returns first: the replayer works on a disk with no room for
	// its position file.
	srv.Start()
	coretest.Eventually(t, 30*time.Second, "the replay to pass the first spooled batch", func() bool {
		return counter(t, r, "api_telemetry_replayed_total") > 100
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	sent := l.halt()
	want := 2 * sent
	coretest.Eventually(t, 60*time.Second, "the spool to drain and the breaker to close", func() bool {
		return pipe.spool.Empty() && pipe.breaker.Allow()
	})
	coretest.Eventually(t, 30*time.Second, "every message in the stream", func() bool {
		n, _ := store.Len(ctx, telemetry.IngestionStream(tenant))
		return n >= want
	})
	time.Sleep(300 * time.Millisecond) // anything extra would be appended by now
	if n, _ := store.Len(ctx, telemetry.IngestionStream(tenant)); n != want {
		t.Fatalf("stream has %d entries, want exactly %d (%d messages x 2 devices)", n, want, sent)
	}
	spooled, replayed := counter(t, r, "api_telemetry_spooled_total"), counter(t, r, "api_telemetry_replayed_total")
	if replayed != spooled {
		t.Errorf("replayed %g spool lines, spooled %g: each line must be replayed exactly once", replayed, spooled)
	}
	if code, body := healthBody(h); strings.Contains(body, "spool") && strings.Contains(body, "down") {
		t.Errorf("/health after recovery = %d %s, want the spool healthy", code, body)
	}
	t.Logf("%d messages; %g spooled (%g before the disk was full), %g replayed, %g duplicates, %g left unacknowledged",
		sent, spooled, spooledAtFull, replayed, counter(t, r, "api_telemetry_duplicates_total"), counter(t, r, "api_telemetry_unacknowledged_total"))
}
