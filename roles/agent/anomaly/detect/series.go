package detect

import (
	"math"
	"time"
)

const (
	// WarmupBatches is the number of batches a series must have been seen
	// in before it is scored.
	WarmupBatches = 20
	// deltaWindow is the number of recent changes the rate method keeps.
	deltaWindow = 60
	// minDeltas is the number of changes the rate method needs.
	minDeltas = 10
	// minSlotSamples is the number of samples an hour slot needs before it
	// is the baseline; until then the series' recent window stands in.
	minSlotSamples = 20
	// adoptAfter is the length of a run of level-flagged readings on one
	// side of the baseline after which the run is taken as the new normal.
	adoptAfter = 8
	// ttHorizon bounds time_to_threshold: a crossing further away than this
	// is not reported.
	ttHorizon = 24 * time.Hour
	// scoreHalf is the method score (σ) mapped to anomaly_score 0.5.
	scoreHalf = 4.0
)

// Detection method names, as published in detection_methods.
const (
	MethodZScore = "zscore"
	MethodMAD    = "mad"
	MethodRate   = "rate"
)

// methodSets holds every combination of fired methods, indexed by bit mask
// (1 zscore, 2 mad, 4 rate), so that a result shares a read-only slice
// instead of allocating one.
var methodSets = func() [8][]string {
	var sets [8][]string
	for m := range sets {
		s := []string{}
		if m&1 != 0 {
			s = append(s, MethodZScore)
		}
		if m&2 != 0 {
			s = append(s, MethodMAD)
		}
		if m&4 != 0 {
			s = append(s, MethodRate)
		}
		sets[m] = s
	}
	return sets
}()

// slot is one hour-of-day baseline of a series.
type slot struct {
	win ring
	// count is every sample the slot has taken, restored ones included.
	count int64
	// restored is the persisted summary; it stands in until the window
	// holds minSlotSamples of its own.
	restored *summary
	at       time.Time
}

type pendingSample struct {
	x    float64
	slot int
	at   time.Time
}

// series is the state of one (metric, device).
type series struct {
	metric, device string
	tune           tuning
	slots          [24]slot
	// recent is the last window of samples of any slot: the baseline of a
	// slot that has too few samples of its own.
	recent         ring
	recentRestored *summary
	restoredCount  int64
	deltas         ring

	batches   int64
	lastBatch uint64

	prev                 float64
	hasPrev, prevFlagged bool

	// The current run of level-flagged readings (see adoptAfter).
	runSign int
	runSum  float64
	run     []pendingSample

	fc     holt
	dtStep float64 // EWMA of the seconds between observations
	lastAt time.Time

	scored    bool
	lastScore float64
	lastNext  float64
	lastConf  float64
}

func newSeries(metric, device string, t tuning) *series {
	s := &series{metric: metric, device: device, tune: t}
	for i := range s.slots {
		s.slots[i].win.size = t.window
	}
	s.recent.size = t.window
	s.deltas.size = deltaWindow
	return s
}

func (s *series) minSamples() int { return min(minSlotSamples, s.tune.window) }

// baseline returns the summary the reading of hour h is scored against and
// the number of samples behind it.
func (s *series) baseline(h int, sc *[]float64) (summary, int64, bool) {
	sl := &s.slots[h]
	switch {
	case sl.win.len() >= s.minSamples():
		return summarize(sl.win.buf, sc), sl.count, true
	case sl.restored != nil:
		return *sl.restored, sl.count, true
	case s.recent.len() >= 2:
		return summarize(s.recent.buf, sc), int64(s.recent.len()), true
	case s.recentRestored != nil:
		return *s.recentRestored, s.restoredCount, true
	}
	return summary{}, 0, false
}

// isCounter reports whether the recent changes are those of a counter: at
// least 95% not negative and at least half positive. A counter's level
// leaves every past baseline behind, so only its rate is scored.
func (s *series) isCounter() bool {
	n := s.deltas.len()
	if n < WarmupBatches-1 {
		return false
	}
	var neg, pos int
	for _, d := range s.deltas.buf {
		switch {
		case d < 0:
			neg++
		case d > 0:
			pos++
		}
	}
	return neg*20 <= n && pos*2 >= n
}

// outcome is what one observation produced.
type outcome struct {
	result    Result
	strongest float64
	flagged   bool
	warm      bool
}

func (s *series) observe(x float64, at time.Time, loc *time.Location, sc *[]float64) outcome {
	h := at.In(loc).Hour()
	warm := s.batches >= WarmupBatches
	base, n, ok := s.baseline(h, sc)
	counter := s.isCounter()

	var zs, ms, rs float64
	if ok && !counter {
		zs = deviation(x, base.mean, base.std)
		ms = deviation(x, base.median, base.robustScale())
	}
	// A reading that follows a flagged one is not rate-scored: the way back
	// from a spike is as large a change as the spike.
	if s.hasPrev && !s.prevFlagged && s.deltas.len() >= minDeltas {
		ds := summarize(s.deltas.buf, sc)
		rs = deviation(x-s.prev, ds.median, ds.robustScale())
	}
	T := s.tune.sigma
	mask := 0
	if zs > T {
		mask |= 1
	}
	if ms > T {
		mask |= 2
	}
	if rs > T {
		mask |= 4
	}
	strongest := max(zs, ms, rs)
	flagged := warm && mask != 0

	if warm && mask&3 != 0 {
		s.holdOut(x, h, at, x-base.median)
	} else {
		s.clearRun()
		s.push(x, h, at)
	}
	if s.hasPrev {
		s.deltas.push(x - s.prev)
	}
	s.prev, s.hasPrev, s.prevFlagged = x, true, flagged
	if !s.lastAt.IsZero() && at.After(s.lastAt) {
		dt := at.Sub(s.lastAt).Seconds()
		if s.dtStep == 0 {
			s.dtStep = dt
		} else {
			s.dtStep = 0.9*s.dtStep + 0.1*dt
		}
	}
	if at.After(s.lastAt) {
		s.lastAt = at
	}
	s.fc.update(x)

	if !warm {
		return outcome{}
	}
	r := Result{
		Metric:           s.metric,
		Device:           s.device,
		AnomalyScore:     scoreOf(strongest),
		AnomalyThreshold: scoreOf(T),
		BaselineSamples:  n,
		DetectionMethods: methodSets[mask],
		PredictedNext:    s.fc.next(),
	}
	r.TrendStrength = s.fc.strength()
	r.Trend = s.fc.direction(r.TrendStrength)
	spread := 0.0
	if ok {
		spread = base.robustScale()
	}
	r.ForecastConfidence = s.fc.confidence(spread)
	if ok && !counter && r.Trend != TrendStable {
		r.TimeToThreshold = s.timeToThreshold(base, T, r.ForecastConfidence*r.TrendStrength)
	}
	s.scored, s.lastScore, s.lastNext, s.lastConf = true, r.AnomalyScore, r.PredictedNext, r.ForecastConfidence
	return outcome{result: r, strongest: strongest, flagged: flagged, warm: true}
}

// scoreOf maps a method score in σ to anomaly_score: s/(s+4), so 4σ is 0.5
// and a step off a constant (+Inf) is 1.
func scoreOf(sigma float64) float64 {
	if math.IsInf(sigma, 1) {
		return 1
	}
	return sigma / (sigma + scoreHalf)
}

func (s *series) push(x float64, h int, at time.Time) {
	sl := &s.slots[h]
	sl.win.push(x)
	sl.count++
	if at.After(sl.at) {
		sl.at = at
	}
	s.recent.push(x)
}

func (s *series) clearRun() {
	s.run, s.runSign, s.runSum = s.run[:0], 0, 0
}

// holdOut keeps a level-flagged reading out of the baselines, so a spike
// never inflates them. A run of adoptAfter such readings on one side is a
// level shift: every baseline of the series moves by the run's mean offset
// and the run joins them.
func (s *series) holdOut(x float64, h int, at time.Time, resid float64) {
	sign := 1
	if resid < 0 {
		sign = -1
	}
	if sign != s.runSign {
		s.clearRun()
		s.runSign = sign
	}
	s.run = append(s.run, pendingSample{x: x, slot: h, at: at})
	s.runSum += resid
	if len(s.run) < adoptAfter {
		return
	}
	off := s.runSum / float64(len(s.run))
	for i := range s.slots {
		sl := &s.slots[i]
		sl.win.shift(off)
		if sl.restored != nil {
			sl.restored.mean += off
			sl.restored.median += off
		}
	}
	s.recent.shift(off)
	if s.recentRestored != nil {
		s.recentRestored.mean += off
		s.recentRestored.median += off
	}
	for _, p := range s.run {
		s.push(p.x, p.slot, p.at)
	}
	s.clearRun()
}

func (s *series) timeToThreshold(base summary, sigma, conf float64) *TimeToThreshold {
	scale := base.robustScale()
	if s.dtStep <= 0 || scale <= 1e-9*max(1, math.Abs(base.median)) || s.fc.trend == 0 {
		return nil
	}
	bound := base.median + sigma*scale
	if s.fc.trend < 0 {
		bound = base.median - sigma*scale
	}
	steps := (bound - s.fc.level) / s.fc.trend
	secs := steps * s.dtStep
	if steps <= 0 || secs > ttHorizon.Seconds() {
		return nil
	}
	return &TimeToThreshold{Threshold: bound, EstimatedSeconds: secs, Confidence: conf}
}
