package anomaly

import (
	"encoding/json"
	"math"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

// scratch is one batch's observations and their reading indices, reused
// through a pool: the agent polls a thousand registers a second.
type scratch struct {
	obs []detect.Observation
	idx []int
	res []detect.Result
}

// Scored holds the scratch space a batch's results live in until Release.
type Scored struct {
	s  *Service
	sc *scratch
}

// Release hands the batch's results back for the next poll: b.Anomaly
// must not be read after it. A Scored never released only costs the
// reuse.
func (r Scored) Release() {
	if r.sc != nil {
		r.s.scratch.Put(r.sc)
	}
}

// ObserveBatch scores the numeric GOOD readings of one endpoint batch in
// one Observe call and sets b.Anomaly to the results, their Index
// counting the batch's readings; alerts go to the cloud. The results live
// in pooled scratch space until the returned Scored is released: the
// publisher encodes them before Deliver returns, so a poll allocates
// nothing for them (a copy per batch was a tenth of the agent's garbage).
// With detection off it returns at once and leaves b alone.
func (s *Service) ObserveBatch(endpoint string, b *batch.Batch) Scored {
	if !s.on.Load() {
		return Scored{}
	}
	d := s.detector()
	if d == nil {
		return Scored{}
	}
	sc := s.scratch.Get().(*scratch)
	done := Scored{s: s, sc: sc}
	obs, idx := sc.obs[:0], sc.idx[:0]
	// idx maps observations to readings only once a reading was left
	// out: until then they are the same.
	sparse := false
	i := 0
	for mi := range b.Messages {
		m := &b.Messages[mi]
		// By pointer: a Reading is 168 bytes, copied twice per reading
		// when ranged over by value and passed on.
		for ri := range m.Readings {
			r := &m.Readings[ri]
			if v, ok := numeric(r); ok {
				at := r.Timestamp
				if at.IsZero() {
					at = m.Received
				}
				if at.IsZero() {
					at = time.Now()
				}
				if !sparse && len(obs) != i {
					sparse = true
					for k := range len(obs) {
						idx = append(idx, k)
					}
				}
				obs = append(obs, detect.Observation{Metric: r.Metric, Device: deviceOf(r, endpoint), Value: v, At: at})
				if sparse {
					idx = append(idx, i)
				}
			}
			i++
		}
	}
	sc.obs, sc.idx = obs, idx
	if len(obs) == 0 {
		return done
	}
	rs, created := d.ObserveAppendSeries(sc.res[:0], obs)
	sc.res = rs
	if created > 0 {
		// A batch that created no series names no metric the catalog
		// lacks: the batch that created them added them. Looking the
		// names up at every poll was a sixth of detection's cost.
		s.cat.see(endpoint, obs)
	}
	for k := range rs {
		if sparse {
			rs[k].Index = idx[rs[k].Index]
		}
		if rs[k].Alert != nil {
			s.raise(*rs[k].Alert)
		}
	}
	// The observations hold strings of the readings only; clearing them
	// is not needed for correctness, only the slices are reused.
	s.m.observed.Add(float64(len(obs)))
	if len(rs) > 0 {
		b.Anomaly = rs[:len(rs):len(rs)]
	}
	return done
}

// deviceOf names a reading's series device: the id the protocol gives,
// else its device name, else the endpoint.
func deviceOf(r *adapters.Reading, endpoint string) string {
	switch {
	case r.DeviceID != "":
		return r.DeviceID
	case r.DeviceName != "":
		return r.DeviceName
	}
	return endpoint
}

// numeric returns the value of a GOOD reading that is a finite number;
// booleans, strings and composite values are not scored.
func numeric(r *adapters.Reading) (float64, bool) {
	if r.Quality == adapters.Bad {
		return 0, false
	}
	var f float64
	switch v := r.Value.(type) {
	case float64:
		f = v
	case float32:
		f = float64(v)
	case int:
		f = float64(v)
	case int8:
		f = float64(v)
	case int16:
		f = float64(v)
	case int32:
		f = float64(v)
	case int64:
		f = float64(v)
	case uint:
		f = float64(v)
	case uint8:
		f = float64(v)
	case uint16:
		f = float64(v)
	case uint32:
		f = float64(v)
	case uint64:
		f = float64(v)
	case json.Number:
		x, err := v.Float64()
		if err != nil {
			return 0, false
		}
		f = x
	default:
		return 0, false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// catalog is the live metric names and the endpoint each was first seen
// on, for GET /v1/anomaly/metrics. It is bounded like the detector's
// series.
type catalog struct {
	mu   sync.RWMutex
	live map[string]string
}

func (c *catalog) see(endpoint string, obs []detect.Observation) {
	c.mu.RLock()
	missing := false
	for i := range obs {
		if _, ok := c.live[obs[i].Metric]; !ok {
			missing = true
			break
		}
	}
	c.mu.RUnlock()
	if !missing {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range obs {
		if _, ok := c.live[obs[i].Metric]; !ok && len(c.live) < detect.DefaultMaxTracked {
			c.live[obs[i].Metric] = endpoint
		}
	}
}

func (c *catalog) snapshot() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]string, len(c.live))
	for k, v := range c.live {
		out[k] = v
	}
	return out
}
