package promapi

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/roles/api/query"
)

// Prometheus clients send the earliest and latest times Prometheus can
// represent to mean "no bound"; Go's time.Parse cannot read their years.
var (
	minTimeFormatted = time.Unix(math.MinInt64/1000+62135596801, 0).UTC().Format(time.RFC3339Nano)
	maxTimeFormatted = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC().Format(time.RFC3339Nano)
)

// paramError is an invalid request parameter, answered with bad_data as
// Prometheus words it.
type paramError struct {
	param string
	msg   string
}

func (e *paramError) Error() string { return fmt.Sprintf("invalid parameter %q: %s", e.param, e.msg) }

// parseTime reads a time as Prometheus's API does: Unix seconds with an
// optional fraction (rounded to the millisecond), or RFC 3339. ok is false
// for an absent value or one of the "no bound" times.
func parseTime(param, s string) (t time.Time, ok bool, err error) {
	if s == "" || s == minTimeFormatted || s == maxTimeFormatted {
		return time.Time{}, false, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		// Years 1 to 9999, what both engines store, in Unix seconds.
		if math.IsNaN(f) || f < -62135596800 || f > 253402300799 {
			return time.Time{}, false, &paramError{param, fmt.Sprintf("cannot parse %q to a valid timestamp", query.Shorten(s))}
		}
		sec, frac := math.Modf(f)
		ms := math.Round(frac * 1000)
		return time.Unix(int64(sec), int64(ms)*int64(time.Millisecond)).UTC(), true, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC().Truncate(time.Microsecond), true, nil
	}
	return time.Time{}, false, &paramError{param, fmt.Sprintf("cannot parse %q to a valid timestamp", query.Shorten(s))}
}

// parseStep reads a duration as Prometheus's API does: seconds with an
// optional fraction, or a PromQL duration such as 1m30s.
func parseStep(param, s string) (time.Duration, error) {
	if s == "" {
		return 0, &paramError{param, "cannot parse \"\" to a valid duration"}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		d := f * float64(time.Second)
		if math.IsNaN(d) || d <= 0 || d >= float64(maxDuration) {
			return 0, &paramError{param, fmt.Sprintf("cannot parse %q to a valid duration", query.Shorten(s))}
		}
		return time.Duration(d).Round(time.Microsecond), nil
	}
	if d, ok := parseDuration(s); ok {
		return d, nil
	}
	return 0, &paramError{param, fmt.Sprintf("cannot parse %q to a valid duration", query.Shorten(s))}
}

// maxDuration keeps durations far beyond any limit a query may reach, and
// their sums from overflowing.
const maxDuration = 100 * 365 * 24 * time.Hour

// parseDuration reads a PromQL duration ("5m", "1h30m", "250ms") the way
// the query lexer does, and nothing else around it.
func parseDuration(s string) (time.Duration, bool) {
	t, err := query.NewLexer(s, "").Next()
	if err != nil || t.Kind != query.TokDuration || t.Text != s || t.Dur > maxDuration {
		return 0, false
	}
	return t.Dur, true
}

// formatTime writes a time as Prometheus's API does, Unix seconds with the
// fraction, here to the microsecond readings are stored with.
func appendTime(b []byte, t time.Time) []byte {
	us := t.UnixMicro()
	if us < 0 {
		b = append(b, '-')
		us = -us
	}
	b = strconv.AppendInt(b, us/1e6, 10)
	if frac := us % 1e6; frac != 0 {
		digits := strconv.AppendInt(make([]byte, 0, 6), frac+1e6, 10)[1:] // zero-padded to six
		for digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		b = append(b, '.')
		b = append(b, digits...)
	}
	return b
}

// appendValue writes a sample value as Prometheus's API does: a string,
// "NaN", "+Inf" and "-Inf" included.
func appendValue(b []byte, v float64) []byte {
	b = append(b, '"')
	switch {
	case math.IsNaN(v):
		b = append(b, "NaN"...)
	case math.IsInf(v, 1):
		b = append(b, "+Inf"...)
	case math.IsInf(v, -1):
		b = append(b, "-Inf"...)
	default:
		b = strconv.AppendFloat(b, v, 'f', -1, 64)
	}
	return append(b, '"')
}
