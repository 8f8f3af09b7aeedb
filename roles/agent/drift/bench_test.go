package drift

import (
	"fmt"
	"strings"
	"testing"
	"time"
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
