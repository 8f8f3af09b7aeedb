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
	// minDeltas is the number of changes the rate method needs: those of
	// the warm-up.
	minDeltas = WarmupBatches - 1
	// medianInflate is the variance of a sample median in units of σ²/n
	// (π/2 for Gaussian data): the center of the mad and rate methods is
	// that much less certain than a mean.
	medianInflate = math.Pi / 2
	// minSlotSamples is the number of samples an hour slot needs before it
	// is the baseline; until then the series' stand-in does (standInFor).
	minSlotSamples = 20
	// adoptAfter is the length of a run of level-flagged readings on one
	// side of the baseline after which the run is taken as the new normal.
	adoptAfter = 8
	// levelAlpha is the weight of the newest reading in the series level
	// (an exponentially weighted mean): a time constant of about 33
	// readings, long enough that noise barely moves it, short enough that
	// a slow drift or ramp never leaves the hour slots behind.
	levelAlpha = 0.03
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

// slot is one hour-of-day baseline of a series. Its window holds
// residuals, each reading minus the series level when it was taken: the
// hour's own spread and offset from the level, which stay true while the
// level follows a slow drift that would leave a window of raw values a day
// behind.
type slot struct {
	// win is allocated when the slot takes a sample and released when a
	// full window is summarised into kept.
	win *ring
	// levelAt is the mean level behind the window's residuals: added back,
	// it gives the exported baseline in the metric's unit.
	levelAt float64
	// count is every sample the slot has taken, restored ones included.
	count int64
	// restored is the persisted summary; it stands in until the window
	// holds minSlotSamples of its own.
	restored *summary
	// kept (when kept.n > 0) is the summary of the slot's last full
	// window, whose samples were released when the series moved on to the
	// next hour, and keptLevel the level it was taken at. It stands in, at
	// the current level, until the window refills. It is kept in float32,
	// as the samples it summarises were.
	kept      packedSummary
	keptLevel float64
	// atMS is the time of the newest sample, in Unix milliseconds (the
	// precision baselines are stored with).
	atMS int64
}

type pendingSample struct {
	x    float64
	slot int
	ms   int64 // Unix milliseconds
}

// instant is an observation's time and what the series take from it:
// the readings of a poll share it, so the detector works these out once
// per poll, not once per reading.
type instant struct {
	at   time.Time
	ms   int64 // Unix milliseconds, as slots keep times
	hour int   // hour-of-day slot in the detector's time zone

	// since's answer for the last time it was asked about: the series of
	// a poll were, but for new ones, all last seen at the previous poll.
	last  time.Time
	after bool
	dt    float64
	asked bool
}

// since reports whether the instant is after last and the seconds from
// last to it (0 when last is the zero time or not before it). Equal
// times (the same words, not Equal) give the same answer, so it is
// worked out once per poll rather than once per reading: subtracting
// two times was a tenth of a reading's cost.
func (ts *instant) since(last time.Time) (after bool, dt float64) {
	if !ts.asked || last != ts.last {
		ts.last, ts.asked = last, true
		ts.after, ts.dt = ts.at.After(last), 0
		if ts.after && !last.IsZero() {
			ts.dt = ts.at.Sub(last).Seconds()
		}
	}
	return ts.after, ts.dt
}

// series is the state of one (metric, device).
type series struct {
	metric, device string
	tune           tuning
	// slotv holds the slots, one per hour that has come, in the order
	// they came; slotIdx[h] is 1 + the index of hour h's slot in it, 0
	// before its hour first comes. A series read for an hour holds one
	// slot, not 24 pointers.
	slotv   []slot
	slotIdx [hoursPerDay]uint8
	// level is the series' smoothed level (valid once hasLevel); a slot's
	// baseline is the level plus the slot's residual statistics.
	level float64
	// standIn caches the baseline of a slot that has too few samples of
	// its own (standInFor): computed for hour standInHour, standInStale
	// pushes ago, valid while standInOK.
	standIn summary
	// pooledRestored pools the restored slots (poolRestored); it stands in
	// until the series has samples enough of its own.
	pooledRestored *summary
	restoredCount  int64
	deltas         ring

	batches   int64
	lastBatch uint64

	prev float64
	// resolution is the smallest non-zero change not flagged: the step of
	// an integer or scaled register, which sets the scale floor.
	resolution float64

	// The current run of level-flagged readings (see adoptAfter), on the
	// side runSign.
	runSum float64
	run    []pendingSample

	fc     holt
	dtStep float64 // EWMA of the seconds between observations
	lastAt time.Time

	lastScore float64
	lastNext  float64
	lastConf  float64

	// The small fields sit together: spread among the others, their
	// padding took the series into the next allocation size class.
	standInStale int32
	// negDeltas and posDeltas count the changes in deltas below and above
	// zero.
	negDeltas, posDeltas int32
	// hour is the slot of the last observation, -1 before the first.
	hour        int8
	standInHour int8
	runSign     int8
	hasLevel    bool
	// evicted is set when the series leaves the detector, so that a plan
	// still holding it looks the reading's series up again.
	evicted              bool
	standInOK            bool
	hasPrev, prevFlagged bool
	scored               bool
}

func newSeries(metric, device string, t tuning) *series {
	s := &series{metric: metric, device: device, tune: t, hour: -1}
	s.deltas.size = deltaWindow
	return s
}

// hoursPerDay is the number of hour-of-day slots.
const hoursPerDay = 24

// slotAt returns the slot of hour h, nil before its hour first came. The
// pointer is valid until the next slotFor.
func (s *series) slotAt(h int) *slot {
	i := s.slotIdx[h]
	if i == 0 {
		return nil
	}
	return &s.slotv[i-1]
}

// slotFor returns the slot of hour h, adding it on first use. slotv grows
// by exactly one slot, at most 24 times, so it carries no spare capacity.
func (s *series) slotFor(h int) *slot {
	if sl := s.slotAt(h); sl != nil {
		return sl
	}
	grown := make([]slot, len(s.slotv)+1)
	copy(grown, s.slotv)
	s.slotv = grown
	s.slotIdx[h] = uint8(len(grown))
	sl := &grown[len(grown)-1]
	sl.atMS = noTime
	return sl
}

// noTime is a slot's atMS before it has a sample.
const noTime = math.MinInt64

// calculatedAt is the time of the slot's newest sample, zero when none.
func (sl *slot) calculatedAt() time.Time {
	if sl.atMS == noTime {
		return time.Time{}
	}
	return time.UnixMilli(sl.atMS).UTC()
}

// leave is called when the series moves on from hour h. A window that
// filled within its hour (a series sampled at least windowSize times an
// hour) holds nothing of the previous days, and the next visit replaces
// it within the hour as well: only its summary is kept until then, so a
// series holds one full window of samples instead of 24.
func (s *series) leave(h int, sc *[]float64) {
	sl := s.slotAt(h)
	if sl == nil {
		return
	}
	if sl.win.len() < s.tune.window {
		sl.win.parkOrder()
		return
	}
	sl.kept, sl.keptLevel = pack(summarize(sl.win.buf, sc)), sl.levelAt
	sl.win = nil
}

func (s *series) minSamples() int { return min(minSlotSamples, s.tune.window) }

// baseline returns the summary, in the metric's unit, the reading of hour
// h is scored against and the number of samples behind it.
func (s *series) baseline(h int, sc *[]float64) (summary, int64, bool) {
	sl := s.slotAt(h)
	switch {
	case sl != nil && sl.win.len() >= s.minSamples():
		return s.atLevel(*sl.win.summary(sc)), sl.count, true
	case sl != nil && sl.kept.n > 0:
		return s.atLevel(sl.kept.unpack()), sl.count, true
	case sl != nil && sl.restored != nil:
		return *sl.restored, sl.count, true
	}
	st := s.standInFor(h, sc)
	switch {
	case st.n >= s.minSamples() || (s.pooledRestored == nil && st.n >= 2):
		return s.atLevel(st), int64(st.n), true
	case s.pooledRestored != nil:
		// A restored series is warm at once: its persisted summary beats
		// the handful of samples taken since.
		return *s.pooledRestored, s.restoredCount, true
	}
	return summary{}, 0, false
}

// standInFor returns the residual summary that stands in for the
// baseline of hour h while its slot has too few samples: that of the
// last windowSize residuals, taken from slot h and the slots before it
// (h-1, h-2, ...), or, when a slot before it had its full window
// summarised (a series read at least windowSize times an hour, see
// leave), that summary. Keeping no separate window of recent residuals
// saves a window per series; the walk runs only in the first minutes of
// an hour the slot has not learned yet, and its result is cached like a
// window's statistics (refreshDivisor).
func (s *series) standInFor(h int, sc *[]float64) summary {
	if s.standInOK && int(s.standInHour) == h && int(s.standInStale) < max(1, s.standIn.n/refreshDivisor) {
		return s.standIn
	}
	buf := (*sc)[:0]
	var st summary
	found := false
	for i := 0; i < hoursPerDay && len(buf) < s.tune.window; i++ {
		sl := s.slotAt((h - i + hoursPerDay) % hoursPerDay)
		switch {
		case sl == nil:
		case sl.win.len() > 0:
			for _, v := range sl.win.buf {
				buf = append(buf, float64(v))
			}
		case sl.kept.n > 0 && len(buf) < s.minSamples():
			st, found = sl.kept.unpack(), true
		}
		if found {
			break
		}
	}
	if !found {
		st = summarizeOwned(buf)
	}
	*sc = buf
	s.standIn, s.standInHour, s.standInStale, s.standInOK = st, int8(h), 0, true
	return st
}

// isCounter reports whether the recent changes are those of a counter: at
// least 95% not negative and at least half positive. A counter's level
// leaves every past baseline behind, so only its rate is scored.
func (s *series) isCounter() bool {
	n := s.deltas.len()
	if n < WarmupBatches-1 {
		return false
	}
	neg, pos := int(s.negDeltas), int(s.posDeltas)
	return neg*20 <= n && pos*2 >= n
}

// pushDelta adds a change to the rate window and keeps the counts of
// negative and positive changes in it, which isCounter would otherwise
// take from the whole window at every reading.
func (s *series) pushDelta(d float64) {
	r := &s.deltas
	if r.len() == int(r.size) {
		s.countDelta(r.buf[r.next], -1)
	}
	r.push(d)
	s.countDelta(narrow(d), 1)
}

// countDelta counts without a branch: the sign of a noisy series' change
// is a coin toss, which a branch would mispredict every other reading.
// Changes are never NaN.
func (s *series) countDelta(d float32, by int32) {
	b := math.Float32bits(d)
	nonZero := int32((b&0x7fffffff + 0x7fffffff) >> 31)
	neg := int32(b >> 31)
	s.negDeltas += by * (neg & nonZero)
	s.posDeltas += by * ((1 - neg) & nonZero)
}

// observe scores reading x taken at ts. The caller passes r, where the
// result goes, exactly when the series is past its warm-up, and nil
// before; flagged is only ever true with a result.
func (s *series) observe(x float64, ts *instant, sc *[]float64, r *Result) (strongest float64, flagged bool) {
	at, h := ts.at, ts.hour
	if h != int(s.hour) {
		if s.hour >= 0 {
			s.leave(int(s.hour), sc)
		}
		s.hour = int8(h)
	}
	warm := r != nil
	base, n, ok := s.baseline(h, sc)
	counter := s.isCounter()
	if !s.hasLevel {
		s.level, s.hasLevel = x, true
	}

	// The t statistics of the zscore, mad and rate methods, in the bit
	// order of methodSets.
	var stats [3]tStat
	// The floor of the baseline's scales, also that of the forecast's
	// spread below.
	var floor float64
	if ok {
		floor = scaleFloor(s.resolution, base.median)
	}
	if ok && !counter && base.n >= 2 {
		stats[0] = meanScorer.stat(math.Abs(x-base.mean), atLeast(base.std, floor), base.n)
		stats[1] = medianScorer.stat(math.Abs(x-base.median), atLeast(base.robust, floor), base.n)
	}
	// A reading that follows a flagged one is not rate-scored: the way back
	// from a spike is as large a change as the spike.
	if s.hasPrev && !s.prevFlagged && s.deltas.len() >= minDeltas {
		ds := s.deltas.summary(sc)
		stats[2] = medianScorer.stat(math.Abs(x-s.prev-ds.median), atLeast(ds.robust, scaleFloor(s.resolution, s.prev)), ds.n)
	}
	T := s.tune.sigma
	mask, strongest := resolve(&stats, T)
	flagged = warm && mask != 0

	if warm && mask&3 != 0 {
		s.holdOut(x, h, ts.ms, x-base.median)
	} else {
		s.clearRun()
		s.push(x, h, ts.ms)
		s.level += levelAlpha * (x - s.level)
	}
	if s.hasPrev {
		s.pushDelta(x - s.prev)
		// A flagged change is not evidence of the resolution: the first
		// step of a constant register would otherwise hide the next one.
		if d := math.Abs(x - s.prev); !flagged && d > 0 && (s.resolution == 0 || d < s.resolution) {
			s.resolution = d
		}
	}
	s.prev, s.hasPrev, s.prevFlagged = x, true, flagged
	if after, dt := ts.since(s.lastAt); after {
		if !s.lastAt.IsZero() {
			if s.dtStep == 0 {
				s.dtStep = dt
			} else {
				s.dtStep = 0.9*s.dtStep + 0.1*dt
			}
		}
		s.lastAt = at
	}
	s.fc.update(x)

	if !warm {
		return strongest, false
	}
	r.AnomalyScore = scoreOf(strongest)
	r.AnomalyThreshold = scoreOf(T)
	r.BaselineSamples = n
	r.DetectionMethods = methodSets[mask]
	r.PredictedNext = s.fc.next()
	rms := s.fc.rms()
	r.TrendStrength = s.fc.strength(rms)
	r.Trend = s.fc.direction(r.TrendStrength)
	spread := 0.0
	if ok {
		spread = atLeast(base.robust, floor)
	}
	r.ForecastConfidence = s.fc.confidence(spread, rms)
	if ok && !counter && r.Trend != TrendStable {
		r.TimeToThreshold = s.timeToThreshold(base, spread, T, r.ForecastConfidence*r.TrendStrength)
	}
	s.scored, s.lastScore, s.lastNext, s.lastConf = true, r.AnomalyScore, r.PredictedNext, r.ForecastConfidence
	return strongest, flagged
}

// scoreOf maps a method score in σ to anomaly_score: s/(s+4), so 4σ is 0.5
// and a step off a constant (+Inf) is 1.
func scoreOf(sigma float64) float64 {
	if math.IsInf(sigma, 1) {
		return 1
	}
	return sigma / (sigma + scoreHalf)
}

// push adds reading x, as its residual from the level, to the slot of
// hour h.
func (s *series) push(x float64, h int, ms int64) {
	sl := s.slotFor(h)
	if sl.win == nil {
		sl.win = &ring{size: int16(s.tune.window)}
	}
	sl.win.push(x - s.level)
	sl.levelAt += (s.level - sl.levelAt) / float64(sl.win.len())
	sl.count++
	if sl.win.len() >= s.minSamples() {
		// The window is the baseline from here on.
		sl.kept, sl.restored = packedSummary{}, nil
	}
	if ms > sl.atMS {
		sl.atMS = ms
	}
	s.standInStale++
}

// atLevel turns a summary of residuals into one in the metric's unit at
// the current level.
func (s *series) atLevel(r summary) summary {
	r.mean += s.level
	r.median += s.level
	return r
}

func (s *series) clearRun() {
	s.run, s.runSign, s.runSum = s.run[:0], 0, 0
}

// holdOut keeps a level-flagged reading out of the baselines and the
// level, so a spike never inflates them. A run of adoptAfter such readings
// on one side is a level shift: the series level moves by the run's mean
// offset and the run joins the baselines.
func (s *series) holdOut(x float64, h int, ms int64, resid float64) {
	sign := int8(1)
	if resid < 0 {
		sign = -1
	}
	if sign != s.runSign {
		s.clearRun()
		s.runSign = sign
	}
	s.run = append(s.run, pendingSample{x: x, slot: h, ms: ms})
	s.runSum += resid
	if len(s.run) < adoptAfter {
		return
	}
	s.level += s.runSum / float64(len(s.run))
	for _, p := range s.run {
		s.push(p.x, p.slot, p.ms)
	}
	s.clearRun()
}

func (s *series) timeToThreshold(base summary, scale, sigma, conf float64) *TimeToThreshold {
	if s.dtStep <= 0 || s.fc.trend == 0 {
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
