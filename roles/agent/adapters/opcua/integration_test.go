package opcua

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

func testEndpoint(url string, subscribe bool) adapters.Endpoint {
	conn := fmt.Sprintf(`{"endpointUrl":%q,"subscribe":%t,"publishingIntervalMs":100,"samplingIntervalMs":100,"timeoutMs":3000}`, url, subscribe)
	return adapters.Endpoint{
		UUID: "9b2f6c1e-0000-4000-8000-000000000001", Name: "line-plc", Protocol: "opcua",
		Connection: []byte(conn), PollIntervalMS: 500, Enabled: true,
		DataPoints: []adapters.DataPoint{
			{Name: "temperature", Register: "ns=1;s=Temperature", Unit: "C"},
			{Name: "counter", Register: "ns=1;s=Counter"},
			{Name: "running", Register: "ns=1;s=Running"},
			{Name: "label", Register: "ns=1;s=Label"},
			{Name: "pressure", Register: "ns=1;s=Pressure", Unit: "bar"},
			{Name: "missing", Register: "ns=1;s=NoSuchNode"},
		},
	}
}

func newAdapter(t *testing.T, ep adapters.Endpoint) *Adapter {
	t.Helper()
	a, err := Driver{}.New(ep, adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	ad := a.(*Adapter)
	t.Cleanup(func() { _ = ad.Close() })
	return ad
}

func byMetric(rs []adapters.Reading) map[string]adapters.Reading {
	m := make(map[string]adapters.Reading, len(rs))
	for _, r := range rs {
		m[r.Metric] = r
	}
	return m
}

// checkKnownValues asserts the fixed values of server.js.
func checkKnownValues(t *testing.T, rs []adapters.Reading) {
	t.Helper()
	m := byMetric(rs)
	want := []struct {
		metric   string
		value    any
		nodeType string
	}{
		{"counter", int32(42), "Int32"},
		{"running", true, "Boolean"},
		{"label", "line-1", "String"},
		{"pressure", 1.5, "Float"},
	}
	for _, w := range want {
		r := m[w.metric]
		if r.Quality != adapters.Good || r.Value != w.value || r.NodeType != w.nodeType || r.Protocol != "opcua" {
			t.Errorf("%s = %+v, want %v (%s) GOOD", w.metric, r, w.value, w.nodeType)
		}
	}
	temp := m["temperature"]
	if _, ok := temp.Value.(float64); !ok || temp.Quality != adapters.Good || temp.NodeType != "Double" || temp.Unit != "C" {
		t.Errorf("temperature = %+v", temp)
	}
	if temp.DeviceName != "line-plc" || temp.DeviceID != "9b2f6c1e-0000-4000-8000-000000000001" || temp.Timestamp.IsZero() {
		t.Errorf("temperature identity = %+v", temp)
	}
	if miss := m["missing"]; miss.Quality != adapters.Bad || miss.QualityCode != adapters.CodeReadError || miss.Value != nil {
		t.Errorf("missing node = %+v, want BAD READ_ERROR", miss)
	}
}

// goroutines waits for the goroutine count to settle back to at most base,
// proving Close ended gopcua's goroutines.
func checkGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPollIntegration(t *testing.T) {
	begin := time.Now()
	srv := startServer(t)
	t.Logf("server ready after %s", time.Since(begin).Round(time.Millisecond))
	base := runtime.NumGoroutine()
	a := newAdapter(t, testEndpoint(srv.url(), false))
	ctx := context.Background()
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Listen(ctx, func([]adapters.Reading) {}); !errors.Is(err, adapters.ErrPollOnly) {
		t.Fatalf("Listen = %v, want ErrPollOnly", err)
	}
	rs, err := a.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkKnownValues(t, rs)
	first := byMetric(rs)["temperature"].Value.(float64)
	coretest.Eventually(t, 10*time.Second, "temperature to change", func() bool {
		rs, err := a.Poll(ctx)
		return err == nil && byMetric(rs)["temperature"].Value != first
	})
	d := a.Diagnostics().(Diagnostics)
	if d.Reads < 2 || d.State != "Connected" {
		t.Errorf("diagnostics = %+v", d)
	}

	// Server killed: the next poll fails with BAD readings for all points.
	srv.stop()
	var lost []adapters.Reading
	coretest.Eventually(t, 15*time.Second, "Poll to fail after the server died", func() bool {
		lost, err = a.Poll(ctx)
		return err != nil
	})
	t.Logf("poll failed after the kill at %s: %v", time.Since(begin).Round(time.Millisecond), err)
	for _, r := range lost {
		if r.Quality != adapters.Bad || r.QualityCode == "" {
			t.Errorf("reading after server loss = %+v", r)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(ctx); err == nil {
		t.Fatal("Connect succeeded with the server down")
	} else if code := adapters.Classify(err); code != adapters.CodeConnectionRefused {
		t.Errorf("Connect to a dead server classified %s: %v", code, err)
	}

	// Restarted on the same port: Close + Connect resumes the data.
	srv.start()
	t.Logf("server restarted at %s", time.Since(begin).Round(time.Millisecond))
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err = a.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkKnownValues(t, rs)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	checkGoroutines(t, base)
}

// listener runs Listen in a goroutine and collects what it emits.
type listener struct {
	mu       sync.Mutex
	readings []adapters.Reading
	cancel   context.CancelFunc
	done     chan error
}

func listen(a *Adapter) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{cancel: cancel, done: make(chan error, 1)}
	go func() {
		l.done <- a.Listen(ctx, func(rs []adapters.Reading) {
			l.mu.Lock()
			l.readings = append(l.readings, rs...)
			l.mu.Unlock()
		})
	}()
	return l
}

// values returns the distinct GOOD values received for metric.
func (l *listener) values(metric string) []any {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[any]bool{}
	var out []any
	for _, r := range l.readings {
		if r.Metric == metric && r.Quality == adapters.Good && !seen[r.Value] {
			seen[r.Value] = true
			out = append(out, r.Value)
		}
	}
	return out
}

func (l *listener) snapshot() []adapters.Reading {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]adapters.Reading(nil), l.readings...)
}

func TestSubscribeIntegration(t *testing.T) {
	srv := startServer(t)
	base := runtime.NumGoroutine()
	a := newAdapter(t, testEndpoint(srv.url(), true))
	if err := a.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := listen(a)
	coretest.Eventually(t, 15*time.Second, "three temperature changes", func() bool { return len(l.values("temperature")) >= 3 })
	coretest.Eventually(t, 5*time.Second, "the fixed values", func() bool {
		m := byMetric(l.snapshot())
		return len(m) == len(a.points)
	})
	checkKnownValues(t, l.snapshot())

	// Server killed: Listen returns an error so the runner reconnects.
	srv.stop()
	select {
	case err := <-l.done:
		if err == nil {
			t.Fatal("Listen returned nil after the server died")
		}
		t.Logf("Listen after server loss: %v (%s)", err, adapters.Classify(err))
	case <-time.After(30 * time.Second):
		t.Fatal("Listen did not return after the server died")
	}
	l.cancel()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	srv.start()
	if err := a.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	l2 := listen(a)
	coretest.Eventually(t, 15*time.Second, "temperature changes after reconnecting", func() bool { return len(l2.values("temperature")) >= 2 })
	checkKnownValues(t, l2.snapshot())

	// ctx ending is a normal stop.
	l2.cancel()
	select {
	case err := <-l2.done:
		if err != nil {
			t.Fatalf("Listen after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return after cancel")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	checkGoroutines(t, base)
}

func findNode(nodes []*BrowseNode, id string) *BrowseNode {
	for _, n := range nodes {
		if n.NodeID == id {
			return n
		}
		if f := findNode(n.Children, id); f != nil {
			return f
		}
	}
	return nil
}

func maxDepth(nodes []*BrowseNode) int {
	d := 0
	for _, n := range nodes {
		d = max(d, 1+maxDepth(n.Children))
	}
	return d
}

func TestBrowseIntegration(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	res, err := Browse(ctx, BrowseRequest{EndpointURL: srv.url()})
	if err != nil {
		t.Fatal(err)
	}
	if res.EndpointURL != srv.url() || res.Truncated || res.NodeCount == 0 {
		t.Fatalf("result header = %+v", res)
	}
	t.Logf("unlimited browse: %d nodes, %d levels", res.NodeCount, maxDepth(res.Nodes))
	plant := findNode(res.Nodes, "ns=1;s=Plant")
	if plant == nil || plant.NodeClass != "Object" || plant.BrowseName != "1:Plant" || plant.DisplayName != "Plant" {
		t.Fatalf("Plant = %+v", plant)
	}
	for id, dt := range map[string]string{
		"ns=1;s=Temperature": "Double", "ns=1;s=Counter": "Int32", "ns=1;s=Running": "Boolean", "ns=1;s=Label": "String",
	} {
		n := findNode(res.Nodes, id)
		if n == nil || n.NodeClass != "Variable" || n.DataType != dt {
			t.Errorf("%s = %+v, want a %s variable", id, n, dt)
		}
	}
	if findNode(plant.Children, "ns=1;s=Counter") == nil {
		t.Error("Counter not under Plant")
	}

	shallow, err := Browse(ctx, BrowseRequest{EndpointURL: srv.url(), MaxDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDepth(shallow.Nodes); d != 1 {
		t.Errorf("maxDepth 1 gave a tree %d deep", d)
	}
	if findNode(shallow.Nodes, "ns=1;s=Plant") == nil || findNode(shallow.Nodes, "ns=1;s=Temperature") != nil {
		t.Error("maxDepth 1 must list Plant but not its variables")
	}
	two, err := Browse(ctx, BrowseRequest{EndpointURL: srv.url(), MaxDepth: 2})
	if err != nil {
		t.Fatal(err)
	}
	if findNode(two.Nodes, "ns=1;s=Temperature") == nil || findNode(two.Nodes, "ns=1;s=Counter") != nil {
		t.Error("maxDepth 2 must reach Temperature but not Line1's Counter")
	}

	srv.stop()
	_, err = Browse(ctx, BrowseRequest{EndpointURL: srv.url(), TimeoutMS: 2000})
	if err == nil || adapters.Classify(err) != adapters.CodeConnectionRefused {
		t.Fatalf("browse of a dead server = %v (%s)", err, adapters.Classify(err))
	}
}

func TestSecureIntegration(t *testing.T) {
	srv := startServer(t)
	ep := testEndpoint(srv.url(), false)
	ep.Connection = []byte(fmt.Sprintf(`{"endpointUrl":%q,"securityMode":"SignAndEncrypt","securityPolicy":"Basic256Sha256","username":"operator","password":"secret"}`, srv.url()))
	a := newAdapter(t, ep)
	ctx := context.Background()
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := a.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkKnownValues(t, rs)
	_ = a.Close()

	// A wrong password is refused by the server.
	ep.Connection = []byte(fmt.Sprintf(`{"endpointUrl":%q,"securityMode":"SignAndEncrypt","securityPolicy":"Basic256Sha256","username":"operator","password":"wrong"}`, srv.url()))
	if err := newAdapter(t, ep).Connect(ctx); err == nil {
		t.Fatal("Connect with a wrong password succeeded")
	}

	// A trusted list without the server's certificate refuses to connect.
	ep.Connection = []byte(fmt.Sprintf(`{"endpointUrl":%q,"securityMode":"SignAndEncrypt","securityPolicy":"Basic256Sha256","certificateTrustMode":"trusted-list","trustedCertificates":[%q]}`,
		srv.url(), selfSignedPEM(t)))
	b := newAdapter(t, ep)
	if err := b.Connect(ctx); !errors.Is(err, ErrUntrustedServer) {
		t.Fatalf("Connect with an untrusted server = %v", err)
	}
}

func TestNamespaceURIIntegration(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	probe := newAdapter(t, testEndpoint(srv.url(), false))
	if err := probe.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	namespaces := probe.client.Namespaces()
	_ = probe.Close()
	if len(namespaces) < 2 {
		t.Fatalf("namespaces = %v", namespaces)
	}
	ep := testEndpoint(srv.url(), false)
	ep.DataPoints = []adapters.DataPoint{
		{Name: "counter", Register: "nsu=" + namespaces[1] + ";s=Counter"},
		{Name: "elsewhere", Register: "nsu=urn:no:such:namespace;s=Counter"},
	}
	a := newAdapter(t, ep)
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := a.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := byMetric(rs)
	if r := m["counter"]; r.Quality != adapters.Good || r.Value != int32(42) {
		t.Errorf("counter by namespace URI = %+v", r)
	}
	if r := m["elsewhere"]; r.Quality != adapters.Bad || r.QualityCode != adapters.CodeReadError {
		t.Errorf("unknown namespace URI = %+v", r)
	}
}
