package detect

import "math"

// Holt's linear exponential smoothing constants (docs/anomaly.md,
// "Forecast and trend"): α weights the newest value in the level, β the newest level
// change in the trend, errWeight the newest squared one-step error.
const (
	holtAlpha = 0.3
	holtBeta  = 0.1
	errWeight = 0.1
	// trendHorizon is the number of steps over which the trend is compared
	// with the one-step forecast error to judge its strength.
	trendHorizon = 10
	// stableBelow is the dead band: a trend weaker than this is "stable".
	stableBelow = 0.5
)

// Trend directions of a forecast.
const (
	TrendRising  = "rising"
	TrendFalling = "falling"
	TrendStable  = "stable"
)

// holt is the forecast state of one series; steps are observations.
type holt struct {
	n            int
	level, trend float64
	errVar       float64 // EWMA of the squared one-step error
}

// update folds x in and returns the one-step error of the forecast that
// preceded it (0 until a forecast exists).
func (h *holt) update(x float64) {
	switch h.n {
	case 0:
		h.level = x
	case 1:
		// Two points fix a line: a linear series is forecast exactly from
		// here on.
		h.trend = x - h.level
		h.level = x
	default:
		e := x - (h.level + h.trend)
		h.errVar = (1-errWeight)*h.errVar + errWeight*e*e
		prev := h.level
		h.level = holtAlpha*x + (1-holtAlpha)*(h.level+h.trend)
		h.trend = holtBeta*(h.level-prev) + (1-holtBeta)*h.trend
	}
	h.n++
}

func (h *holt) next() float64 { return h.level + h.trend }

// strength is |trend|·horizon / (|trend|·horizon + rms one-step error), in
// 0..1: how far the trend carries the series over ten steps compared with
// how wrong a single forecast usually is.
func (h *holt) strength(rms float64) float64 {
	if h.n < 2 {
		return 0
	}
	move := math.Abs(h.trend) * trendHorizon
	if move+rms == 0 {
		return 0
	}
	return move / (move + rms)
}

func (h *holt) direction(strength float64) string {
	switch {
	case strength < stableBelow:
		return TrendStable
	case h.trend > 0:
		return TrendRising
	default:
		return TrendFalling
	}
}

// confidence is 1 - rmsError/(2·spread), clamped to 0..1: a forecast no
// better than the series' own spread scores about 0.5, an exact one 1.
func (h *holt) confidence(spread, rms float64) float64 {
	if h.n < 3 {
		return 0
	}
	if spread <= 0 {
		if rms == 0 {
			return 1
		}
		return 0
	}
	// Comparisons rather than the built-in max and min, whose care for
	// NaN and signed zeros costs more: a NaN stays NaN as it would with
	// them, and 1 - y is never -0.
	c := 1 - rms/(2*spread)
	if c > 1 {
		c = 1
	}
	if c < 0 {
		c = 0
	}
	return c
}

// rms is the root mean square one-step error, which strength and
// confidence take as an argument: a reading's result needs it twice.
func (h *holt) rms() float64 { return math.Sqrt(h.errVar) }
