package detect

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Observation is one reading handed to the detector.
type Observation struct {
	Metric string
	Device string
	Value  float64
	At     time.Time
}

// TimeToThreshold estimates when the forecast crosses the value at which
// the metric would be flagged.
type TimeToThreshold struct {
	// Threshold is the crossing value in the metric's unit: the baseline
	// median plus or minus the threshold times the robust deviation.
	Threshold        float64 `json:"threshold"`
	EstimatedSeconds float64 `json:"estimated_seconds"`
	Confidence       float64 `json:"confidence"`
}

// Result is the enrichment of one observation after the warm-up.
type Result struct {
	// Index is the observation's position in the batch given to Observe,
	// which names its metric and device: a batch's results are copied for
	// every poll (the agent keeps them with the batch it publishes), so
	// they carry no strings of their own.
	Index int `json:"-"`

	AnomalyScore     float64 `json:"anomaly_score"`
	AnomalyThreshold float64 `json:"anomaly_threshold"`
	BaselineSamples  int64   `json:"baseline_samples"`
	// DetectionMethods lists the methods that fired; it is shared between
	// results and must not be modified.
	DetectionMethods   []string         `json:"detection_methods"`
	PredictedNext      float64          `json:"predicted_next"`
	Trend              string           `json:"trend"`
	TrendStrength      float64          `json:"trend_strength"`
	ForecastConfidence float64          `json:"forecast_confidence"`
	TimeToThreshold    *TimeToThreshold `json:"time_to_threshold,omitempty"`

	// Alert is set when the observation was flagged.
	Alert *Alert `json:"-"`
}

// Baseline is the exportable summary of one hour slot of one series.
type Baseline struct {
	Metric       string    `json:"metric"`
	DeviceID     string    `json:"device_id"`
	TimeSlot     int       `json:"time_slot"`
	Mean         float64   `json:"mean"`
	StdDev       float64   `json:"std_dev"`
	Median       float64   `json:"median"`
	MAD          float64   `json:"mad"`
	SampleCount  int64     `json:"sample_count"`
	CalculatedAt time.Time `json:"calculated_at"`
}

// Counts are the detector's running totals.
type Counts struct {
	TotalDataPoints int64 `json:"totalDataPoints"`
	TotalAnomalies  int64 `json:"totalAnomalies"`
	TrackedMetrics  int   `json:"trackedMetrics"`
	// IgnoredValues counts NaN, infinite and out-of-range observations.
	IgnoredValues int64 `json:"ignoredValues"`
	// UntrackedValues counts the observations of new series refused
	// because MaxTracked series were all seen within the last minute.
	UntrackedValues int64 `json:"untrackedValues"`
}

// Prediction is the latest forecast of a metric.
type Prediction struct {
	NextValue  float64 `json:"nextValue"`
	Confidence float64 `json:"confidence"`
}

// Stats is a snapshot of the detector.
type Stats struct {
	Stats       Counts                `json:"stats"`
	Scores      map[string]float64    `json:"scores"`
	Predictions map[string]Prediction `json:"predictions"`
}

type seriesKey struct{ metric, device string }

// Detector scores observations against their baselines. It is safe for
// concurrent use; one mutex serialises every call.
type Detector struct {
	mu         sync.Mutex
	cfg        Config
	loc        *time.Location
	byName     map[string]MetricConfig
	maxTracked int
	series     map[seriesKey]*series
	// plans remember the series of recent batch shapes (planFor).
	plans map[seriesKey]*plan
	// evictableAt is the earliest time a full detector may evict.
	evictableAt time.Time
	batch       uint64
	// created counts the series ever created (ObserveAppendSeries).
	created uint64
	scratch []float64
	alerts  alertRing
	counts  Counts
}

// New validates cfg and builds a detector.
func New(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("anomaly config: %w", err)
	}
	d := &Detector{
		cfg:        cfg,
		loc:        cfg.Location,
		byName:     make(map[string]MetricConfig, len(cfg.Metrics)),
		maxTracked: cfg.MaxTracked,
		series:     make(map[seriesKey]*series),
		plans:      make(map[seriesKey]*plan),
	}
	if d.loc == nil {
		d.loc = time.UTC
	}
	if d.maxTracked == 0 {
		d.maxTracked = DefaultMaxTracked
	}
	maxAlerts := cfg.MaxAlerts
	if maxAlerts == 0 {
		maxAlerts = DefaultMaxAlerts
	}
	d.alerts = alertRing{size: maxAlerts}
	for _, m := range cfg.Metrics {
		d.byName[m.Name] = m
	}
	return d, nil
}

// MaxMagnitude bounds the values the detector takes: beyond it squares and
// differences of readings would overflow the statistics. Such a reading
// is a decoding fault rather than a measurement; it is ignored and
// counted like NaN.
const MaxMagnitude = 1e100

// Observe scores one batch (one poll of an endpoint or one frame) and
// returns a result for every observation of a series past its warm-up.
// NaN, infinite and values beyond ±MaxMagnitude are counted and otherwise
// ignored. A disabled detector returns nil and learns nothing.
func (d *Detector) Observe(batch []Observation) []Result {
	return d.ObserveAppend(nil, batch)
}

// ObserveAppend is Observe appending the results to dst, so that a caller
// reusing dst[:0] scores a steady batch without allocating.
func (d *Detector) ObserveAppend(dst []Result, batch []Observation) []Result {
	out, _ := d.ObserveAppendSeries(dst, batch)
	return out
}

// ObserveAppendSeries is ObserveAppend that also reports how many series
// the batch created. A caller keeping its own index of what was observed
// updates it only when that is not zero: a poll after the first creates
// none.
func (d *Detector) ObserveAppendSeries(dst []Result, batch []Observation) (results []Result, newSeries int) {
	if !d.cfg.Enabled || len(batch) == 0 {
		return dst, 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	created := d.created
	d.batch++
	out := dst
	// The readings of a poll share a timestamp: its hour slot and
	// milliseconds are worked out once.
	var ts instant
	haveTS := false
	p := d.planFor(batch)
	for i := range batch {
		// By pointer: an Observation is 64 bytes.
		o := &batch[i]
		if !(math.Abs(o.Value) <= MaxMagnitude) {
			d.counts.IgnoredValues++
			continue
		}
		s := p[i]
		if s == nil || s.evicted || s.metric != o.Metric || s.device != o.Device {
			s = d.seriesFor(o.Metric, o.Device, o.At)
			p[i] = s
		}
		if s == nil {
			d.counts.UntrackedValues++
			continue
		}
		d.counts.TotalDataPoints++
		if s.lastBatch != d.batch {
			s.lastBatch = d.batch
			s.batches++
		}
		// Comparing the words of the two times (not Equal) may miss an
		// equal instant in another zone, which only costs working it out
		// again.
		if !haveTS || o.At != ts.at {
			ts, haveTS = instant{at: o.At, ms: o.At.UnixMilli(), hour: o.At.In(d.loc).Hour()}, true
		}
		// A series past its warm-up writes its result in place.
		var r *Result
		if s.batches > WarmupBatches {
			if out == nil {
				out = make([]Result, 0, len(batch)-i)
			}
			out = append(out, Result{Index: i})
			r = &out[len(out)-1]
		}
		strongest, flagged := s.observe(o.Value, &ts, &d.scratch, r)
		if flagged {
			d.counts.TotalAnomalies++
			a := d.alerts.add(Alert{
				Metric:       o.Metric,
				DeviceID:     o.Device,
				Value:        o.Value,
				Threshold:    r.AnomalyThreshold,
				Severity:     severityOf(strongest, s.tune.sigma),
				Timestamp:    ts.ms,
				AnomalyScore: r.AnomalyScore,
			})
			r.Alert = &a
		}
	}
	return out, int(d.created - created)
}

// maxPlans bounds the batch shapes planFor remembers: about one per
// endpoint or device polled.
const maxPlans = 256

// planFor returns the series of the previous batch that began with the
// same series as batch, by position, with room for every observation of
// batch. A poll reads the same data points in the same order every time,
// so its series are found by comparing two strings per reading instead
// of hashing them; a position that does not match is looked up and
// remembered.
func (d *Detector) planFor(batch []Observation) []*series {
	k := seriesKey{batch[0].Metric, batch[0].Device}
	p := d.plans[k]
	if p == nil {
		if len(d.plans) >= maxPlans {
			clear(d.plans)
		}
		p = &plan{}
		d.plans[k] = p
	}
	if len(p.series) < len(batch) {
		p.series = append(p.series, make([]*series, len(batch)-len(p.series))...)
	}
	return p.series
}

// plan is one batch shape's series by position.
type plan struct{ series []*series }

// evictGrace is how long a series must have been idle before a new one
// may evict it. Without it, more live series than MaxTracked evict each
// other in turn (the idlest is always the next one to be polled), none of
// them ever warms up, and every observation pays a new series and a scan
// of all of them.
const evictGrace = time.Minute

// restoreAt is the time Restore creates series at: later than any
// observation, so it evicts like one that comes after a long silence.
var restoreAt = time.Unix(1<<62, 0)

// seriesFor returns the series of (metric, device), creating it and, when
// MaxTracked series exist, evicting the one idle the longest if it has
// been idle for evictGrace; otherwise it returns nil and the observation
// is not tracked.
func (d *Detector) seriesFor(metric, device string, at time.Time) *series {
	k := seriesKey{metric, device}
	if s, ok := d.series[k]; ok {
		return s
	}
	if len(d.series) >= d.maxTracked {
		// The scan is skipped while no series can have been idle long
		// enough: last seen times only move forward.
		if at.Before(d.evictableAt) {
			return nil
		}
		var oldest seriesKey
		first := true
		var idle time.Time
		for k, s := range d.series {
			if first || s.lastAt.Before(idle) || (s.lastAt.Equal(idle) && less(k, oldest)) {
				oldest, idle, first = k, s.lastAt, false
			}
		}
		if at.Sub(idle) < evictGrace {
			d.evictableAt = idle.Add(evictGrace)
			return nil
		}
		d.series[oldest].evicted = true
		delete(d.series, oldest)
	}
	s := newSeries(metric, device, d.cfg.tuningFor(metric, d.byName))
	d.series[k] = s
	d.created++
	return s
}

// less orders keys so that eviction among equally idle series does not
// depend on map order.
func less(a, b seriesKey) bool {
	if a.metric != b.metric {
		return a.metric < b.metric
	}
	return a.device < b.device
}

// Stats returns the totals, and per metric the score and forecast of the
// series of that metric seen last.
func (d *Detector) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := Stats{Stats: d.counts, Scores: map[string]float64{}, Predictions: map[string]Prediction{}}
	st.Stats.TrackedMetrics = len(d.series)
	latest := map[string]*series{}
	for _, s := range d.series {
		if !s.scored {
			continue
		}
		if p, ok := latest[s.metric]; !ok || s.lastBatch > p.lastBatch || (s.lastBatch == p.lastBatch && s.device < p.device) {
			latest[s.metric] = s
		}
	}
	for m, s := range latest {
		st.Scores[m] = s.lastScore
		st.Predictions[m] = Prediction{NextValue: s.lastNext, Confidence: s.lastConf}
	}
	return st
}

// Baselines exports the summary of every hour slot that has samples.
func (d *Detector) Baselines() []Baseline {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Baseline
	for _, s := range d.series {
		for h := range hoursPerDay {
			sl := s.slotAt(h)
			if sl == nil || sl.count == 0 {
				continue
			}
			var sum summary
			switch {
			case sl.win.len() >= s.minSamples() || (sl.kept.n == 0 && sl.restored == nil):
				// The residuals, back in the metric's unit at the level
				// they were taken at.
				sum = summarize(sl.win.samples(), &d.scratch)
				sum.mean += sl.levelAt
				sum.median += sl.levelAt
			case sl.kept.n > 0:
				sum = sl.kept.unpack()
				sum.mean += sl.keptLevel
				sum.median += sl.keptLevel
			default:
				sum = *sl.restored
			}
			out = append(out, Baseline{
				Metric: s.metric, DeviceID: s.device, TimeSlot: h,
				Mean: sum.mean, StdDev: sum.std, Median: sum.median, MAD: sum.mad,
				SampleCount: sl.count, CalculatedAt: sl.calculatedAt(),
			})
		}
	}
	return out
}

// Restore loads persisted baselines. A restored slot is scored against its
// summary until its window holds enough samples of its own, and its
// sample_count continues, so a series restored with 20 samples or more
// does not warm up again. Invalid records are refused as a whole.
func (d *Detector) Restore(bs []Baseline) error {
	for i, b := range bs {
		if err := b.validate(); err != nil {
			return fmt.Errorf("baselines[%d]: %w", i, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Each series is looked up once: restoring more than MaxTracked
	// series evicts some of them again, and those are simply dropped.
	restored := map[seriesKey]*series{}
	var order []*series
	for _, b := range bs {
		k := seriesKey{b.Metric, b.DeviceID}
		s, ok := restored[k]
		if !ok {
			// A restore always makes room, as an observation made long
			// after every tracked series was seen would.
			s = d.seriesFor(b.Metric, b.DeviceID, restoreAt)
			restored[k] = s
			order = append(order, s)
		}
		sl := s.slotFor(b.TimeSlot)
		sl.win, sl.kept = nil, packedSummary{}
		sl.restored = restoredSummary(b.Mean, b.StdDev, b.Median, b.MAD, b.SampleCount, s.tune.window)
		sl.count = b.SampleCount
		sl.atMS = b.CalculatedAt.UnixMilli()
		s.standInOK = false
	}
	for _, s := range order {
		s.poolRestored()
	}
	return nil
}

func (b Baseline) validate() error {
	switch {
	case b.Metric == "":
		return fmt.Errorf("metric: must not be empty")
	case b.TimeSlot < 0 || b.TimeSlot > 23:
		return fmt.Errorf("time_slot: must be 0..23, got %d", b.TimeSlot)
	case b.SampleCount < 0:
		return fmt.Errorf("sample_count: must not be negative, got %d", b.SampleCount)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"mean", b.Mean}, {"std_dev", b.StdDev}, {"median", b.Median}, {"mad", b.MAD}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s: must be a finite number, got %v", f.name, f.v)
		}
	}
	if b.StdDev < 0 || b.MAD < 0 {
		return fmt.Errorf("std_dev and mad: must not be negative, got %g and %g", b.StdDev, b.MAD)
	}
	return nil
}

// poolRestored derives the series-wide stand-in baseline from its restored
// slots, weighted by sample count: the mixture's mean and variance, and
// for the robust pair the weighted median and a MAD widened by the spread
// of the slot medians (an approximation; the window replaces it as soon as
// it holds samples).
func (s *series) poolRestored() {
	var w, mean, med float64
	var count int64
	for i := range s.slotv {
		sl := &s.slotv[i]
		if sl.restored == nil || sl.count == 0 {
			continue
		}
		c := float64(sl.count)
		w += c
		count += sl.count
		mean += c * sl.restored.mean
		med += c * sl.restored.median
	}
	if w == 0 {
		return
	}
	mean /= w
	med /= w
	var v, m float64
	for i := range s.slotv {
		sl := &s.slotv[i]
		if sl.restored == nil || sl.count == 0 {
			continue
		}
		c := float64(sl.count)
		dm := sl.restored.mean - mean
		v += c * (sl.restored.std*sl.restored.std + dm*dm)
		dmed := (sl.restored.median - med) / madToSigma
		m += c * (sl.restored.mad*sl.restored.mad + dmed*dmed)
	}
	s.pooledRestored = restoredSummary(mean, math.Sqrt(v/w), med, math.Sqrt(m/w), count, s.tune.window)
	s.restoredCount = count
	s.batches = max(s.batches, count)
}

// restoredSummary stands in for a window from persisted statistics: the
// robust scale is 1.4826·MAD (the samples are gone), and the scales count
// as estimated from at most a window of samples.
func restoredSummary(mean, std, med, mad float64, count int64, window int) *summary {
	robust := madToSigma * mad
	if mad <= 0 {
		robust = std
	}
	return &summary{mean: mean, std: std, median: med, mad: mad, robust: robust, n: int(min(count, int64(window)))}
}
