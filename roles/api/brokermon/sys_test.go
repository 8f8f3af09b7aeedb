package brokermon

import (
	"math"
	"strconv"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }
func near(got, want, tol float64) bool   { return math.Abs(got-want) <= tol }
func itoa(n int) []byte                  { return []byte(strconv.Itoa(n)) }
func burst(c *sysCollector, vals map[string]int) {
	for topic, v := range vals {
		c.handle(topic, itoa(v))
	}
}

// TestSysRatesFromBursts: Mosquitto's bursts, each value only when it
// changed, become readings timed at each burst; rates span the window.
func TestSysRatesFromBursts(t *testing.T) {
	clk := newFakeClock()
	platform := int64(0)
	c := newSysCollector(clk.now, func() int64 { return platform })
	if v := c.view(); v.seen || v.rated {
		t.Fatal("figures before any $SYS message")
	}
	received := 1000
	for i := range 30 {
		vals := map[string]int{"$SYS/broker/publish/messages/received": received}
		c.handle("$SYS/broker/uptime", []byte(strconv.Itoa(100+i)+" seconds"))
		if i < 3 {
			// Unchanged values are not sent again.
			vals["$SYS/broker/clients/connected"] = 4
			c.handle("$SYS/broker/version", []byte("mosquitto version 2.0.18"))
		}
		clk.add(2 * time.Millisecond)
		burst(c, vals)
		clk.add(time.Second - 2*time.Millisecond)
		received += 250
		platform += 40
	}
	v := c.view()
	if !v.rated || !near(v.rates.PerSec[PublishReceived], 250, 0.01) || !near(v.rates.PerSec[platformMessages], 40, 0.01) {
		t.Fatalf("rates %+v", v.rates)
	}
	if w := v.rates.To.Sub(v.rates.From); w < 14*time.Second || w > rateWindow {
		t.Errorf("window %s", w)
	}
	if v.latest.Values[ClientsConnected] != 4 || v.latest.Values[UptimeSeconds] != 129 || v.latest.Version != "mosquitto version 2.0.18" {
		t.Errorf("latest %+v", v.latest)
	}
	if v.interval != time.Second {
		t.Errorf("interval %s", v.interval)
	}
	// A restart within the window rates nothing rather than a negative.
	c.handle("$SYS/broker/publish/messages/received", itoa(3))
	clk.add(time.Second)
	if r, ok := c.view().rates.PerSec[PublishReceived]; ok {
		t.Errorf("rate across a restart: %v", r)
	}
}

func TestSysBounded(t *testing.T) {
	clk := newFakeClock()
	c := newSysCollector(clk.now, func() int64 { return 0 })
	for i := range 2 * maxRaw {
		c.handle("$SYS/x/"+strconv.Itoa(i), make([]byte, 4*maxRawValue))
		clk.add(time.Second)
	}
	v := c.view()
	if len(v.raw) > maxRaw {
		t.Errorf("%d raw values, bound %d", len(v.raw), maxRaw)
	}
	for k, s := range v.raw {
		if len(s) > maxRawValue {
			t.Errorf("%s: %d bytes kept", k, len(s))
		}
	}
	if len(c.hist.snaps) > historyLen {
		t.Errorf("%d readings kept, bound %d", len(c.hist.snaps), historyLen)
	}
	c.handle("not-sys/topic", []byte("1"))
	if _, ok := c.view().raw["not-sys/topic"]; ok {
		t.Error("a topic outside $SYS kept")
	}
}
