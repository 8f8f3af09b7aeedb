package query

import "time"

// Limits bound what one query may cost. A zero (or negative) field takes
// its default from DefaultLimits, so Limits{} is the defaults. Exceeding a
// limit gives a *LimitError naming it by the key in each field's comment.
type Limits struct {
	// MaxQueryBytes caps the query text (max_query_bytes; 4096).
	MaxQueryBytes int
	// MaxDepth caps nesting: aggregations, function calls and parentheses
	// each add one, a selector is 0 (max_depth; 5).
	MaxDepth int
	// MinStep is the smallest step (min_step; 1s).
	MinStep time.Duration
	// MaxRange caps end-start and a range selector's [range]
	// (max_range; 90 days).
	MaxRange time.Duration
	// MaxSeries caps the series in the result and in any intermediate
	// aggregation result (max_series; 500). A query without aggregation
	// returns every series it reads, so this also caps what it reads,
	// enforced in SQL with LIMIT.
	MaxSeries int
	// MaxPointsPerSeries caps the points of one series: (end-start)/step+1
	// for a range function, checked before the query runs; the samples
	// of a raw selector, checked as they are read (max_points_per_series;
	// 11000, Prometheus's figure).
	MaxPointsPerSeries int
	// MaxRows caps the rows one query reads from the database: raw
	// samples for a selector, one row per series and bucket for a range
	// function (max_rows; 2,000,000). It bounds the series an aggregation
	// may read, and the memory a query holds.
	MaxRows int
}

// DefaultLimits returns the defaults listed on Limits' fields.
func DefaultLimits() Limits {
	return Limits{
		MaxQueryBytes:      4096,
		MaxDepth:           5,
		MinStep:            time.Second,
		MaxRange:           90 * 24 * time.Hour,
		MaxSeries:          500,
		MaxPointsPerSeries: 11000,
		MaxRows:            2_000_000,
	}
}

// WithDefaults returns l with every zero or negative field set to its
// DefaultLimits value, so Limits{} means the defaults everywhere limits are
// read.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxQueryBytes <= 0 {
		l.MaxQueryBytes = d.MaxQueryBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MinStep <= 0 {
		l.MinStep = d.MinStep
	}
	if l.MaxRange <= 0 {
		l.MaxRange = d.MaxRange
	}
	if l.MaxSeries <= 0 {
		l.MaxSeries = d.MaxSeries
	}
	if l.MaxPointsPerSeries <= 0 {
		l.MaxPointsPerSeries = d.MaxPointsPerSeries
	}
	if l.MaxRows <= 0 {
		l.MaxRows = d.MaxRows
	}
	return l
}
