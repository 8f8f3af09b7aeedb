package receipts

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/prometheus/client_golang/prometheus"
)

// sent is one receipt as the Sender got it.
type sent struct {
	tenant, agent codec.UUID
	r             control.Receipts
}

// collector is a Sender that keeps what it is handed, decoded with the
// agent's decoder, so every receipt is checked to be one an agent takes.
type collector struct {
	t  *testing.T
	mu sync.Mutex
	to []sent
}

func (c *collector) Send(tenant, agent codec.UUID, payload []byte) {
	r, err := control.DecodeReceipts(payload)
	if err != nil {
		c.t.Errorf("a receipt the agent refuses: %v (%d bytes)", err, len(payload))
	}
	if len(payload) > control.MaxCommandBytes {
		c.t.Errorf("a receipt of %d bytes", len(payload))
	}
	c.mu.Lock()
	c.to = append(c.to, sent{tenant, agent, r})
	c.mu.Unlock()
}

func (c *collector) take() []sent {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.to
	c.to = nil
	return out
}

func newTracker(t *testing.T, mutate func(*Options)) (*Tracker, *collector, *prometheus.Registry) {
	t.Helper()
	c := &collector{t: t}
	reg := prometheus.NewRegistry()
	o := Options{Sender: c, Registerer: reg}
	if mutate != nil {
		mutate(&o)
	}
	tr, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return tr, c, reg
}

func ids() (tenant, agent codec.UUID) { return codec.NewUUID(), codec.NewUUID() }

func record(tr *Tracker, tenant, agent codec.UUID, kid string, seqs ...uint64) {
	for _, s := range seqs {
		id, err := codec.FormatMsgID(kid, s)
		if err != nil {
			panic(err)
		}
		tr.Record(codec.EncodeID(tenant), codec.EncodeID(agent), id)
	}
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// TestBatching: one receipt per agent per Every, whatever arrived
// meanwhile; each carries what came since the previous one.
func TestBatching(t *testing.T) {
	tr, c, reg := newTracker(t, nil)
	tenant, a := ids()
	_, b := ids()
	t0 := time.Now()
	record(tr, tenant, a, "Ab12Cd34", span(1, 10)...)
	record(tr, tenant, b, "Zz99Yy88", 5)
	tr.flush(t0)
	got := c.take()
	if len(got) != 2 {
		t.Fatalf("%d receipts, want one per agent", len(got))
	}
	for _, s := range got {
		want := control.KeyReceipt{KID: "Ab12Cd34", Ranges: []control.Range{{First: 1, Last: 10}}}
		if s.agent == b {
			want = control.KeyReceipt{KID: "Zz99Yy88", Ranges: []control.Range{{First: 5, Last: 5}}}
		}
		if s.tenant != tenant || len(s.r.Keys) != 1 || !sameKey(s.r.Keys[0], want) || s.r.At != t0.UnixMilli() {
			t.Errorf("receipt to %v: %+v, want %+v", s.agent, s.r, want)
		}
	}
	// Within the second nothing goes to a, however much arrives.
	for i := range 9 {
		record(tr, tenant, a, "Ab12Cd34", uint64(11+i))
		tr.flush(t0.Add(time.Duration(i+1) * 100 * time.Millisecond))
	}
	if got := c.take(); len(got) != 0 {
		t.Fatalf("%d receipts within the second", len(got))
	}
	tr.flush(t0.Add(time.Second))
	got = c.take()
	if len(got) != 1 || got[0].agent != a || !sameKey(got[0].r.Keys[0], control.KeyReceipt{KID: "Ab12Cd34", Ranges: []control.Range{{First: 11, Last: 19}}}) {
		t.Fatalf("after the second: %+v", got)
	}
	// An agent with nothing new gets nothing, and is forgotten.
	tr.flush(t0.Add(3 * time.Second))
	if got := c.take(); len(got) != 0 {
		t.Fatalf("receipts without news: %+v", got)
	}
	if n := len(tr.agents); n != 0 {
		t.Fatalf("%d agents held with nothing pending", n)
	}
	if v := coretest.MetricValue(t, reg, "edgeplat_api_receipts_sent_total", nil); v != 3 {
		t.Errorf("receipts sent %v, want 3", v)
	}
	if v := coretest.MetricValue(t, reg, "edgeplat_api_receipt_ranges_sent_total", nil); v != 3 {
		t.Errorf("ranges sent %v, want 3", v)
	}
}

func sameKey(a, b control.KeyReceipt) bool { return a.KID == b.KID && slices.Equal(a.Ranges, b.Ranges) }

// TestRanges: out-of-order and repeated sequences make sorted, disjoint,
// non-adjacent ranges per key.
func TestRanges(t *testing.T) {
	tr, c, _ := newTracker(t, nil)
	tenant, a := ids()
	record(tr, tenant, a, "Ab12Cd34", 7, 1, 3, 2, 8, 5, 3, 12)
	record(tr, tenant, a, "Qq11Ww22", 1<<40, 1<<40+1)
	record(tr, tenant, a, "Ab12Cd34", 6)
	tr.Record(codec.EncodeID(tenant), codec.EncodeID(a), "not-a-v2-id")
	tr.flush(time.Now())
	got := c.take()
	if len(got) != 1 || len(got[0].r.Keys) != 2 {
		t.Fatalf("%+v", got)
	}
	want := map[string][]control.Range{
		"Ab12Cd34": {{First: 1, Last: 3}, {First: 5, Last: 8}, {First: 12, Last: 12}},
		"Qq11Ww22": {{First: 1 << 40, Last: 1<<40 + 1}},
	}
	for _, k := range got[0].r.Keys {
		if !slices.Equal(k.Ranges, want[k.KID]) {
			t.Errorf("kid %s: %v, want %v", k.KID, k.Ranges, want[k.KID])
		}
	}
}

// TestBounds: past a memory bound sequences are dropped and counted, and
// a receipt at the range bound still fits a command.
func TestBounds(t *testing.T) {
	tr, c, reg := newTracker(t, func(o *Options) { o.MaxAgents, o.MaxRanges, o.MaxKeys = 1, 3, 1 })
	tenant, a := ids()
	_, b := ids()
	record(tr, tenant, a, "Ab12Cd34", 1, 3, 5, 7, 2) // 7 opens a fourth range: dropped; 2 joins two
	record(tr, tenant, a, "Bb12Cd34", 1)             // a second key: dropped
	record(tr, tenant, b, "Ab12Cd34", 1)             // a second agent: dropped
	tr.flush(time.Now())
	got := c.take()
	if len(got) != 1 || len(got[0].r.Keys) != 1 || !slices.Equal(got[0].r.Keys[0].Ranges, []control.Range{{First: 1, Last: 3}, {First: 5, Last: 5}}) {
		t.Fatalf("%+v", got)
	}
	for reason, want := range map[string]float64{"ranges": 1, "agents": 1, "keys": 1} {
		if v := coretest.MetricValue(t, reg, "edgeplat_api_receipt_sequences_dropped_total", map[string]string{"reason": reason}); v != want {
			t.Errorf("dropped for %s: %v, want %v", reason, v, want)
		}
	}

	// The default bounds at their worst: every range apart, sequences of
	// 20 digits, 64 keys.
	big, c2, _ := newTracker(t, nil)
	for k := range DefaultMaxKeys {
		kid := fmt.Sprintf("Kid%05d", k)
		for i := range uint64(DefaultMaxRanges / DefaultMaxKeys) {
			record(big, tenant, a, kid, 1<<63+2*i)
		}
	}
	record(big, tenant, a, "Kid00000", span(1, 100)...)
	big.flush(time.Now())
	if got := c2.take(); len(got) != 1 {
		t.Fatalf("%d receipts", len(got))
	}
}

// TestRun: the running tracker sends receipts with at least Every between
// two to the same agent while messages keep arriving, and every sequence
// recorded is in one of them.
func TestRun(t *testing.T) {
	every := 200 * time.Millisecond
	tr, c, _ := newTracker(t, func(o *Options) { o.Every, o.Tick = every, 20*time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	tenant, a := ids()
	var all []sent
	seq := uint64(0)
	for len(all) < 4 {
		seq++
		record(tr, tenant, a, "Ab12Cd34", seq)
		time.Sleep(time.Millisecond)
		all = append(all, c.take()...)
	}
	last := seq
	coretest.Eventually(t, 5*time.Second, "the last sequence receipted", func() bool {
		all = append(all, c.take()...)
		k := all[len(all)-1].r.Keys
		return len(k) == 1 && k[0].Contains(last)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var ranges []control.Range
	for i, s := range all {
		if i > 0 && time.UnixMilli(s.r.At).Sub(time.UnixMilli(all[i-1].r.At)) < every {
			t.Errorf("receipts %d and %d are %d ms apart, under %s", i-1, i, s.r.At-all[i-1].r.At, every)
		}
		for _, rg := range s.r.Keys[0].Ranges {
			for q := rg.First; q <= rg.Last; q++ {
				ranges = control.AddSeq(ranges, q)
			}
		}
	}
	if !slices.Equal(ranges, []control.Range{{First: 1, Last: last}}) {
		t.Errorf("receipted %v, want [1, %d]", ranges, last)
	}
}

// FuzzRecord: whatever msgIds agents send, the receipt the tracker makes
// is one the agent's decoder takes, and covers exactly the v2 sequences
// recorded.
func FuzzRecord(f *testing.F) {
	f.Add("v2_Ab12Cd34_1", uint64(1), uint64(3), uint64(2))
	f.Add("v2_Ab12Cd34_18446744073709551615", uint64(1<<63), uint64(0), uint64(18446744073709551615))
	f.Add("local-1", uint64(5), uint64(5), uint64(7))
	f.Fuzz(func(t *testing.T, msgID string, a, b, c uint64) {
		tr, col, _ := newTracker(t, nil)
		tenant, agent := ids()
		tr.Record(codec.EncodeID(tenant), codec.EncodeID(agent), msgID)
		want := map[string][]control.Range{}
		if kid, seq, err := codec.ParseMsgID(msgID); err == nil {
			want[kid] = control.AddSeq(want[kid], seq)
		}
		for _, s := range []uint64{a, b, c} {
			record(tr, tenant, agent, "Ab12Cd34", s)
			want["Ab12Cd34"] = control.AddSeq(want["Ab12Cd34"], s)
		}
		tr.flush(time.Now())
		got := col.take()
		if len(got) != 1 {
			t.Fatalf("%d receipts", len(got))
		}
		if len(got[0].r.Keys) != len(want) {
			t.Fatalf("keys %+v, want %+v", got[0].r.Keys, want)
		}
		for _, k := range got[0].r.Keys {
			if !slices.Equal(k.Ranges, want[k.KID]) {
				t.Fatalf("kid %s: %v, want %v", k.KID, k.Ranges, want[k.KID])
			}
		}
	})
}
