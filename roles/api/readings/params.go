package readings

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/core/codec"
)

// paramError is a bad request parameter. msg names the parameter first, as
// in `interval must be one of 1m, 1h, 1d, got "2m"`.
type paramError struct {
	param string
	msg   string
}

func (e *paramError) Error() string { return e.msg }

func badParam(param, format string, args ...any) *paramError {
	return &paramError{param: param, msg: param + " " + fmt.Sprintf(format, args...)}
}

// quote shows a client's value in a message, quoted and shortened:
// messages are read by people and logged, and must stay small whatever was
// sent. The bound is on the quoted form, since escapes can make it four
// times longer than the input.
func quote(s string) string {
	const max = 64
	b := []byte{'"'}
	for i := 0; i < len(s); {
		_, w := utf8.DecodeRuneInString(s[i:])
		q := strconv.Quote(s[i : i+w])
		q = q[1 : len(q)-1]
		if len(b)+len(q) > max+1 {
			return string(b) + `"...`
		}
		b = append(b, q...)
		i += w
	}
	return string(append(b, '"'))
}

// params reads a request's query string, refusing names the endpoint does
// not take and names given twice, so a misspelt filter fails loudly
// instead of silently returning everything.
type params struct {
	v url.Values
}

func newParams(q url.Values, allowed ...string) (params, error) {
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names) // the same error for the same request
	for _, name := range names {
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return params{}, badParam(quote(name), "is not a parameter of this endpoint, which takes none")
			}
			return params{}, badParam(quote(name), "is not a parameter of this endpoint; it takes %s", strings.Join(allowed, ", "))
		}
		if len(q[name]) > 1 {
			return params{}, badParam(name, "is given %d times; give it once", len(q[name]))
		}
	}
	return params{v: q}, nil
}

// get returns the parameter's value and whether it was given (an empty
// value counts as not given).
func (p params) get(name string) (string, bool) {
	v := p.v.Get(name)
	return v, v != ""
}

// maxNameBytes bounds metric names in filters and inserts.
const maxNameBytes = 512

// maxAttrBytes bounds the other text attributes of an inserted reading.
const maxAttrBytes = 255

// parseAgent accepts an agent id in the hyphenated 8-4-4-4-12 form, in
// either case, and returns it in canonical lowercase, as both engines
// store it.
func parseAgent(param, s string) (string, error) {
	u, err := codec.ParseUUID(s)
	if err != nil {
		return "", badParam(param, "must be a UUID (8-4-4-4-12 hex digits), got %s", quote(s))
	}
	return u.String(), nil
}

// checkText refuses what no stored text can hold: invalid UTF-8 and NUL,
// which PostgreSQL rejects, and overlong values.
func checkText(param, s string, max int) error {
	switch {
	case !utf8.ValidString(s):
		return badParam(param, "must be valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return badParam(param, "must not contain NUL")
	case len(s) > max:
		return badParam(param, "must be at most %d bytes, got %d", max, len(s))
	}
	return nil
}

// optAgent reads an optional agent_uuid parameter.
func (p params) optAgent(name string) (string, error) {
	s, ok := p.get(name)
	if !ok {
		return "", nil
	}
	return parseAgent(name, s)
}

// optMetric reads an optional metric parameter (an exact metric name).
func (p params) optMetric(name string) (string, error) {
	s, ok := p.get(name)
	if !ok {
		return "", nil
	}
	return s, checkText(name, s, maxNameBytes)
}

// limit reads a positive integer up to max, def when absent.
func (p params) limit(name string, def, max int) (int, error) {
	s, ok := p.get(name)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, badParam(name, "must be a whole number from 1 to %d, got %s", max, quote(s))
	}
	return n, nil
}

// oneOf reads a parameter that takes one of a fixed set of values.
func (p params) oneOf(name, def string, values ...string) (string, error) {
	s, ok := p.get(name)
	if !ok {
		return def, nil
	}
	if !slices.Contains(values, s) {
		return "", badParam(name, "must be one of %s, got %s", strings.Join(values, ", "), quote(s))
	}
	return s, nil
}

// Times both engines can store and compare: years 1 to 9999, as the query
// language allows.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// parseTime accepts RFC 3339 (ISO 8601 with a zone, any fraction) or Unix
// milliseconds, and returns UTC truncated to microseconds, the databases'
// resolution.
func parseTime(param, s string) (time.Time, error) {
	var t time.Time
	if isInteger(s) {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms < minTime.UnixMilli() || ms > maxTime.UnixMilli() {
			return t, badParam(param, "is out of range for Unix milliseconds (years 1 to 9999), got %s", quote(s))
		}
		t = time.UnixMilli(ms)
	} else {
		var err error
		t, err = time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return t, badParam(param, "must be an RFC 3339 time such as 2024-03-10T10:00:00Z, or Unix milliseconds, got %s", quote(s))
		}
	}
	t = t.UTC().Truncate(time.Microsecond)
	if t.Before(minTime) || t.After(maxTime) {
		return time.Time{}, badParam(param, "must be between years 1 and 9999, got %s", quote(s))
	}
	return t, nil
}

func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseJSONTime reads a time from a JSON body: an RFC 3339 string, or Unix
// milliseconds as a number or a string of digits. ok is false when the
// field is absent or null.
func parseJSONTime(param string, raw json.RawMessage) (t time.Time, ok bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, false, nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, false, badParam(param, "must be a string or a number")
		}
	} else {
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			return time.Time{}, false, badParam(param, "must be an RFC 3339 string or Unix milliseconds, got %s", quote(string(raw)))
		}
		if f != math.Trunc(f) {
			return time.Time{}, false, badParam(param, "must be whole Unix milliseconds, got %s", quote(string(raw)))
		}
		s = string(raw)
		if strings.ContainsAny(s, ".eE") {
			s = strconv.FormatFloat(f, 'f', 0, 64)
		}
	}
	t, err = parseTime(param, s)
	return t, err == nil, err
}

// timeRange is a request's [start, end], both included, in UTC.
type timeRange struct {
	start, end time.Time
}

// defaultStart computes the start when the request gives none, from end.
type defaultStart func(end time.Time) time.Time

// span is a defaultStart that goes back d from end.
func span(d time.Duration) defaultStart {
	return func(end time.Time) time.Time { return end.Add(-d) }
}

// wholeBuckets is a defaultStart giving n whole buckets of width w: the
// start of the bucket end falls in, moved back n-1 buckets.
func wholeBuckets(n int, w time.Duration) defaultStart {
	return func(end time.Time) time.Time { return floorTo(end, w).Add(-time.Duration(n-1) * w) }
}

// rangeParams reads start and end: end defaults to now, start to def(end).
func (p params) rangeParams(now time.Time, def defaultStart) (timeRange, error) {
	var r timeRange
	var err error
	r.end = now.UTC().Truncate(time.Microsecond)
	if s, ok := p.get("end"); ok {
		if r.end, err = parseTime("end", s); err != nil {
			return r, err
		}
	}
	if s, ok := p.get("start"); ok {
		if r.start, err = parseTime("start", s); err != nil {
			return r, err
		}
	} else {
		r.start = def(r.end)
		if r.start.Before(minTime) {
			r.start = minTime
		}
	}
	if r.start.After(r.end) {
		return r, badParam("start", "must not be after end (start %s, end %s)", formatTime(r.start), formatTime(r.end))
	}
	return r, nil
}

// bucketOrigin is core/db's bucket alignment (Monday 2000-01-03T00:00Z).
// Minute, hour and day buckets fall on whole UTC minutes, hours and days.
var bucketOrigin = time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC).UnixMicro()

// floorTo returns the start of the w-wide bucket t falls in, as core/db's
// TimeBucket computes it.
func floorTo(t time.Time, w time.Duration) time.Time {
	us, wu := t.UnixMicro()-bucketOrigin, w.Microseconds()
	us -= ((us % wu) + wu) % wu
	return time.UnixMicro(us + bucketOrigin).UTC()
}

// parseStep reads a duration in the query language's notation: one or
// more <integer><unit> parts, units from largest to smallest, each at most
// once; units y (365d), w, d, h, m, s, ms.
func parseStep(param, s string) (time.Duration, error) {
	bad := badParam(param, "must be a duration such as 30s, 1m or 1h30m (units ms, s, m, h, d, w, y), got %s", quote(s))
	units := []struct {
		name string
		d    time.Duration
	}{
		{"y", 365 * 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour},
		{"h", time.Hour}, {"ms", time.Millisecond}, {"m", time.Minute}, {"s", time.Second},
	}
	// rank orders units from largest to smallest; "ms" is listed before
	// "m" above only so that it is matched first.
	rank := map[string]int{"y": 0, "w": 1, "d": 2, "h": 3, "m": 4, "s": 5, "ms": 6}
	if s == "" {
		return 0, bad
	}
	var total time.Duration
	last := -1
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i {
			return 0, bad
		}
		n, err := strconv.ParseInt(s[i:j], 10, 64)
		if err != nil {
			return 0, bad
		}
		k := -1
		for u := range units {
			if strings.HasPrefix(s[j:], units[u].name) {
				k = u
				break
			}
		}
		if k < 0 || rank[units[k].name] <= last {
			return 0, bad
		}
		last = rank[units[k].name]
		d := units[k].d
		if n > math.MaxInt64/int64(d) || total > math.MaxInt64-time.Duration(n)*d {
			return 0, badParam(param, "is too large, got %s", quote(s))
		}
		total += time.Duration(n) * d
		i = j + len(units[k].name)
	}
	return total, nil
}

// formatTime is the one time format of responses and messages: RFC 3339
// in UTC with as many fraction digits as needed.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
