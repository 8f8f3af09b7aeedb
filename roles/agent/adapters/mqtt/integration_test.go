package mqtt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// listening is an adapter connected to a broker with Listen running.
type listening struct {
	a        *Adapter
	readings chan []adapters.Reading
	result   chan error
	cancel   context.CancelFunc
}

func listen(t *testing.T, broker string, dps ...adapters.DataPoint) *listening {
	t.Helper()
	ep := endpoint(fmt.Sprintf(`{"brokerUrl":%q,"topics":["plant/#"],"qos":1,"timeoutMs":5000}`, broker), dps...)
	a, err := NewAdapter(ep, adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	l := &listening{a: a, readings: make(chan []adapters.Reading, 100), result: make(chan error, 1)}
	lctx, lcancel := context.WithCancel(context.Background())
	l.cancel = lcancel
	go func() { l.result <- a.Listen(lctx, func(rs []adapters.Reading) { l.readings <- rs }) }()
	t.Cleanup(func() { lcancel(); _ = a.Close() })
	return l
}

func (l *listening) next(t *testing.T) []adapters.Reading {
	t.Helper()
	select {
	case rs := <-l.readings:
		return rs
	case err := <-l.result:
		t.Fatalf("Listen returned %v while waiting for readings", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no readings within 10 s")
	}
	return nil
}

func publisher(t *testing.T, broker string) paho.Client {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(broker).SetClientID("test-pub-" + t.Name()).
		SetAutoReconnect(false).SetConnectTimeout(5 * time.Second))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

func publish(t *testing.T, c paho.Client, topic, payload string) {
	t.Helper()
	if tok := c.Publish(topic, 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
}

func values(rs []adapters.Reading) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s/%s=%#v %s%s;", r.DeviceName, r.Metric, r.Value, r.Quality, r.QualityCode)
	}
	return b.String()
}

func TestListenIntegration(t *testing.T) {
	srv := coretest.PrivateMosquitto(t)
	before := runtime.NumGoroutine()
	scale := 0.01
	l := listen(t, srv.URL(), adapters.DataPoint{Name: "pressure", Register: "p.raw", Scale: &scale, Unit: "bar"},
		adapters.DataPoint{Name: "count", Register: "n"})
	pub := publisher(t, srv.URL())

	publish(t, pub, "plant/press-1", `{"deviceName":"press-1","p":{"raw":1234},"n":42}`+"\n")
	if got, want := values(l.next(t)), "press-1/pressure=12.34 GOOD;press-1/count=42 GOOD;"; got != want {
		t.Fatalf("readings %s, want %s", got, want)
	}

	// Several frames in one message, then one frame over two messages.
	publish(t, pub, "plant/a", `{"p":{"raw":1},"n":1}`+"\n"+`{"p":{"raw":2},"n":2}`+"\n"+`{"p":{"ra`)
	if got := values(l.next(t)); got != "line-1/pressure=0.01 GOOD;line-1/count=1 GOOD;" {
		t.Fatalf("first frame %s", got)
	}
	if got := values(l.next(t)); got != "line-1/pressure=0.02 GOOD;line-1/count=2 GOOD;" {
		t.Fatalf("second frame %s", got)
	}
	// A frame on another topic must not mix with the pending part.
	publish(t, pub, "plant/b", `{"p":{"raw":5},"n":5}`+"\n")
	if got := values(l.next(t)); got != "line-1/pressure=0.05 GOOD;line-1/count=5 GOOD;" {
		t.Fatalf("other topic %s", got)
	}
	publish(t, pub, "plant/a", `w":300},"n":3}`+"\n")
	if got := values(l.next(t)); got != "line-1/pressure=3 GOOD;line-1/count=3 GOOD;" {
		t.Fatalf("reassembled frame %s", got)
	}

	publish(t, pub, "plant/a", "this is not json\n")
	if got := values(l.next(t)); got != "line-1/frame=<nil> BADBAD_DATA;" {
		t.Fatalf("invalid frame %s", got)
	}

	s := l.a.Stats()
	if !s.Connected || s.Messages != 5 || s.Frames != 6 || s.InvalidFrames != 1 || s.Overflows != 0 || s.PendingTopics != 0 || s.LastMessage == nil {
		t.Fatalf("stats %+v", s)
	}
	l.cancel()
	select {
	case err := <-l.result:
		if err != nil {
			t.Fatalf("Listen after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Listen did not return after its context ended")
	}
	_ = l.a.Close()
	pub.Disconnect(100)
	settle(t, before)
}

// settle waits for the goroutine count to fall back to at most n.
func settle(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBrokerLossIntegration: stopping the broker makes Listen fail, the
// runner's Close leaves no goroutine behind, and a new Connect after the
// broker is back works.
func TestBrokerLossIntegration(t *testing.T) {
	// Counted before the broker starts: Stop ends the goroutine that
	// waits for the broker process, so nothing new may remain after Close.
	before := runtime.NumGoroutine()
	srv := coretest.PrivateMosquitto(t)
	l := listen(t, srv.URL())
	srv.Stop()
	select {
	case err := <-l.result:
		if err == nil {
			t.Fatal("Listen returned nil after the broker stopped")
		}
		t.Logf("Listen: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("Listen did not notice the broker stopped")
	}
	if err := l.a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	settle(t, before)
	t.Logf("goroutines: %d before Connect, %d after Close", before, runtime.NumGoroutine())

	srv.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.a.Connect(ctx); err != nil {
		t.Fatalf("Connect after the broker came back: %v", err)
	}
	defer l.a.Close()
	lctx, lcancel := context.WithCancel(context.Background())
	defer lcancel()
	got := make(chan []adapters.Reading, 1)
	go func() { _ = l.a.Listen(lctx, func(rs []adapters.Reading) { got <- rs }) }()
	publish(t, publisher(t, srv.URL()), "plant/x", `{"v":1}`+"\n")
	select {
	case rs := <-got:
		if values(rs) != "line-1/v=1 GOOD;" {
			t.Fatalf("readings after reconnect %s", values(rs))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no readings after reconnect")
	}
}

func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	a, err := NewAdapter(endpoint(fmt.Sprintf(`{"brokerUrl":"tcp://%s","topics":["a"]}`, addr)), adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Connect(context.Background())
	if err == nil {
		t.Fatal("Connect to a closed port succeeded")
	}
	if code := adapters.Classify(err); code != adapters.CodeConnectionRefused {
		t.Fatalf("Classify(%v) = %s", err, code)
	}
	if err := a.Listen(context.Background(), func([]adapters.Reading) {}); err == nil {
		t.Fatal("Listen without a connection returned nil")
	}
	if rs, err := a.Poll(context.Background()); rs != nil || err != nil {
		t.Fatalf("Poll: %v %v", rs, err)
	}
	_ = a.Close()
}

// TestConnectCancelled: a broker that accepts TCP but never answers the
// CONNECT is given up on when ctx ends, not after timeoutMs.
func TestConnectCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	a, err := NewAdapter(endpoint(fmt.Sprintf(`{"brokerUrl":"tcp://%s","topics":["a"],"timeoutMs":60000}`, ln.Addr())), adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	// A cancel, not a deadline: the deadline would also bound paho's own
	// handshake time-out, and only the abort on ctx is under test here.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err = a.Connect(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect: %v, want the context's cancellation", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Connect took %v", d)
	}
	_ = a.Close()
}
