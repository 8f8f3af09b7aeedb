package brokermon

import (
	"testing"
	"time"
)

const (
	tenantA = "AAAAAAAAAAAAAAAAAAAAAA"
	tenantB = "BBBBBBBBBBBBBBBBBBBBBB"
	agentA  = "QUFBQUFBQUFBQUFBQUFBQQ"
)

func topicOf(tenant, rest string) string { return "i/" + tenant + "/a/" + agentA + "/" + rest }

func find(n TopicNode, topic string) (TopicNode, bool) {
	if n.Topic == topic {
		return n, true
	}
	for _, c := range n.Children {
		if f, ok := find(c, topic); ok {
			return f, true
		}
	}
	return TopicNode{}, false
}

func TestTreeCountsPerLevel(t *testing.T) {
	tr := newTree(100, 100, time.Hour)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, rest := range []string{"endpoints/modbus", "endpoints/modbus", "endpoints/opcua/line1", "state"} {
		tr.observe(tenantA, topicOf(tenantA, rest), 10, at.Add(time.Duration(i)*time.Second))
	}
	tr.observe(tenantB, topicOf(tenantB, "state"), 5, at)
	root, levels, ok := tr.subtree(tenantA)
	if !ok || root.Messages != 4 || root.Bytes != 40 || levels != 8 {
		t.Fatalf("tenant A: ok %v, %d messages, %d bytes, %d levels", ok, root.Messages, root.Bytes, levels)
	}
	for _, tt := range []struct {
		rest      string
		msgs, own int64
		last      int
	}{{"endpoints", 3, 0, 2}, {"endpoints/modbus", 2, 2, 1}, {"endpoints/opcua", 1, 0, 2}, {"endpoints/opcua/line1", 1, 1, 2}, {"state", 1, 1, 3}} {
		n, ok := find(root, topicOf(tenantA, tt.rest))
		if !ok || n.Messages != tt.msgs || n.Own != tt.own || n.LastSeen == nil || !n.LastSeen.Equal(at.Add(time.Duration(tt.last)*time.Second)) {
			t.Errorf("%s: found %v, %+v", tt.rest, ok, n)
		}
	}
	if top := leaves(root, 2); len(top) != 2 || top[0].Topic != topicOf(tenantA, "endpoints/modbus") {
		t.Errorf("top topics %+v", top)
	}
	if b, _, _ := tr.subtree(tenantB); b.Messages != 1 {
		t.Errorf("tenant B: %+v", b)
	}
	// A topic outside the tenant's own is not counted under it.
	if tr.observe(tenantA, topicOf(tenantB, "state"), 1, at) {
		t.Error("another tenant's topic asked for a sample")
	}
	if r, _, _ := tr.subtree(tenantA); r.Messages != 4 {
		t.Errorf("tenant A counted another tenant's topic: %d", r.Messages)
	}
}

func TestTreeBounds(t *testing.T) {
	tr := newTree(20, 8, 0)
	at := time.Now()
	for i := range 30 {
		tr.observe(tenantA, topicOf(tenantA, "endpoints/"+string(rune('a'+i))), 1, at)
	}
	_, levels, _ := tr.subtree(tenantA)
	if levels > 8 {
		t.Errorf("tenant A holds %d levels, bound 8", levels)
	}
	if tr.refused.Load() == 0 {
		t.Error("no message counted as untracked past the bound")
	}
	// The other tenant still finds room.
	if !tr.observe(tenantB, topicOf(tenantB, "state"), 1, at) {
		t.Error("tenant B found no room after tenant A filled its own")
	}
	deep := "endpoints"
	for range 2 * maxDepth {
		deep += "/x"
	}
	if tr.observe(tenantB, topicOf(tenantB, deep), 1, at) {
		t.Error("a topic deeper than the bound asked for a sample")
	}
	if tr.nodes > 20 {
		t.Errorf("%d levels, bound 20", tr.nodes)
	}
}

func TestTreeSamplesAtRate(t *testing.T) {
	tr := newTree(100, 100, time.Second)
	at := time.Now()
	topic := topicOf(tenantA, "endpoints/modbus")
	var got []bool
	for _, d := range []time.Duration{0, 100 * time.Millisecond, 900 * time.Millisecond, 1000 * time.Millisecond, 1500 * time.Millisecond, 2100 * time.Millisecond} {
		got = append(got, tr.observe(tenantA, topic, 1, at.Add(d)))
	}
	if want := []bool{true, false, false, true, false, true}; !equalBools(got, want) {
		t.Errorf("samples %v, want %v", got, want)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestObserveAllocatesNothing: a topic seen before costs the subscriber
// no allocation.
func TestObserveAllocatesNothing(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	topic := topicOf(tenantA, "endpoints/modbus/plc1")
	m.Observe(tenantA, topic, 100)
	if n := testing.AllocsPerRun(1000, func() { m.Observe(tenantA, topic, 100) }); n != 0 {
		t.Errorf("Observe allocates %v times per message", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	m, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	topics := make([]string, 64)
	for i := range topics {
		topics[i] = topicOf(tenantA, "endpoints/modbus/plc"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Observe(tenantA, topics[i%len(topics)], 200)
			i++
		}
	})
}
