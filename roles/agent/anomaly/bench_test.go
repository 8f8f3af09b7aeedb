package anomaly

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

// BenchmarkObserveBatch is one poll of a 100-register Modbus device, as
// the agent's footprint benchmark polls ten of them every second
// (docs/benchmarks.md): per op, 100 readings through ObserveBatch, and
// through the detector alone for comparison. "service" and "detector"
// poll registers taking three values; "bench" polls ten devices in turn
// whose registers never change, as the footprint benchmark's pymodbus
// server serves them.
func BenchmarkObserveBatch(b *testing.B) {
	mk := func(i int) batch.Batch {
		at := t0.Add(time.Duration(i) * time.Second)
		rs := make([]adapters.Reading, 100)
		for r := range rs {
			rs[r] = adapters.Reading{DeviceID: "dev", Metric: fmt.Sprintf("r%d", r), Value: uint16(1000 + r + i%3), Quality: adapters.Good, Timestamp: at}
		}
		return batch.Batch{Messages: []batch.Message{{Received: at, Readings: rs}}}
	}
	b.Run("bench", func(b *testing.B) {
		s := newService(b, &memStore{}, &events{})
		// The agent's readings of one device share their metric and
		// device strings from poll to poll (the data point names).
		const devices = 10
		names := make([]string, 100)
		for r := range names {
			names[r] = fmt.Sprintf("r%d", r)
		}
		polls := make([]batch.Batch, devices)
		for d := range polls {
			rs := make([]adapters.Reading, len(names))
			for r := range rs {
				rs[r] = adapters.Reading{DeviceName: fmt.Sprintf("bench-%d", d+1), DeviceID: fmt.Sprintf("dev-%d", d+1), Metric: names[r], Value: uint16((d+1)*1000 + r), Quality: adapters.Good}
			}
			polls[d] = batch.Batch{Messages: []batch.Message{{Endpoint: fmt.Sprintf("bench-%d", d+1), Readings: rs}}}
		}
		poll := func(i int) {
			p := &polls[i%devices]
			at := t0.Add(time.Duration(i/devices) * time.Second)
			p.Messages[0].Received = at
			for r := range p.Messages[0].Readings {
				p.Messages[0].Readings[r].Timestamp = at
			}
			p.Anomaly = nil
			s.ObserveBatch(p.Messages[0].Endpoint, p).Release()
		}
		// Past the warm-up and the first windows, as the benchmark's two
		// minutes are.
		for i := range 300 * devices {
			poll(i)
		}
		b.ReportAllocs()
		for i := 300 * devices; b.Loop(); i++ {
			poll(i)
		}
	})
	polls := make([]batch.Batch, 64)
	for i := range polls {
		polls[i] = mk(i)
	}
	b.Run("service", func(b *testing.B) {
		s, err := New(Options{Store: func() (Store, error) { return &memStore{}, nil }, Events: &events{}, Location: time.UTC})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(b.Context()); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			p := polls[i%len(polls)]
			p.Anomaly = nil
			s.ObserveBatch("bench", &p).Release()
		}
	})
	b.Run("detector", func(b *testing.B) {
		d, err := detect.New(detect.Config{Enabled: true, Location: time.UTC})
		if err != nil {
			b.Fatal(err)
		}
		obs := make([][]detect.Observation, len(polls))
		for i, p := range polls {
			for _, r := range p.Messages[0].Readings {
				obs[i] = append(obs[i], detect.Observation{Metric: r.Metric, Device: "dev", Value: float64(r.Value.(uint16)), At: r.Timestamp})
			}
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			d.Observe(obs[i%len(obs)])
		}
	})
}
