package drift

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// benchFrame is a frame as an MQTT endpoint receives one: 20 fields,
// one level of nesting, an array.
const benchFrame = `{"device":"press-7","ts":1767225600000,"seq":18231,"status":"RUN",` +
	`"temps":{"oil":61.2,"bearing":48.9,"motor":55.1,"ambient":23.4},` +
	`"pressure":{"in":4.21,"out":3.98,"ok":true},"alarms":[],"counts":[12,0,3],` +
	`"operator":null,"shift":"B","cycle_ms":812}`

// BenchmarkObserveJSON is the cost per frame on the MQTT path, once
// warmed up, every frame its own batch.
func BenchmarkObserveJSON(b *testing.B) {
	d := New()
	if err := d.SetOptions("mqtt", Options{Enabled: true, MaxFieldCount: DefaultMaxFieldCount}); err != nil {
		b.Fatal(err)
	}
	frame := []byte(benchFrame)
	at := t0
	for range 2 * PresenceWindow {
		at = at.Add(time.Second)
		if _, err := d.ObserveJSON("mqtt", frame, at); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		at = at.Add(time.Second)
		if _, err := d.ObserveJSON("mqtt", frame, at); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserveBatch is the cost of one poll of 100 data points on
// the polled path.
func BenchmarkObserveBatch(b *testing.B) {
	d := New()
	if err := d.SetOptions("modbus", Options{Enabled: true, MaxFieldCount: DefaultMaxFieldCount}); err != nil {
		b.Fatal(err)
	}
	var spec strings.Builder
	for i := range 100 {
		fmt.Fprintf(&spec, "reg_%03d:number ", i)
	}
	fields := parse(spec.String())
	at := t0
	for range 2 * PresenceWindow {
		at = at.Add(time.Second)
		if _, err := d.ObserveBatch("modbus", fields, at); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(time.Second)
		if _, err := d.ObserveBatch("modbus", fields, at); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServiceReadings is the drift cost of one poll of 100 uint16
// registers as the agent's polled path pays it: readings to fields,
// then the detector.
func BenchmarkServiceReadings(b *testing.B) {
	deps := &fakeDeps{opts: map[string]Options{"modbus": {Enabled: true, MaxFieldCount: DefaultMaxFieldCount}}}
	s := NewService(ServiceOptions{Options: deps, Store: deps})
	at := t0
	s.SetClock(func() time.Time { return at })
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	rs := make([]adapters.Reading, 100)
	for i := range rs {
		rs[i] = adapters.Reading{Metric: fmt.Sprintf("reg_%03d", i), Value: float64(i), Quality: adapters.Good}
	}
	for range 2 * PresenceWindow {
		at = at.Add(time.Second)
		s.Readings("modbus", rs)
	}
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(time.Second)
		s.Readings("modbus", rs)
	}
}
