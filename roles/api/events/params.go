package events

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Bounds of the list and count routes (docs/events.md).
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// MaxText bounds the text searched for.
	MaxText = 200
	// DefaultTimelineSpan is the timeline's window when from is not given.
	DefaultTimelineSpan = 24 * time.Hour
	// DefaultStatsSpan and DefaultBucket are the stats' window and bucket.
	DefaultStatsSpan = 24 * time.Hour
	DefaultBucket    = time.Hour
	MinBucket        = time.Minute
	// MaxBuckets bounds the buckets of one stats answer per kind.
	MaxBuckets = 1000
)

// listParams reads the list routes' query: limit, cursor, and with
// filters the search's kind, agent, from, to and q. Unknown parameters are
// refused, so a misspelt filter is not silently ignored.
func listParams(q url.Values, filters bool, allowed ...string) (Filter, error) {
	f := Filter{Limit: DefaultLimit}
	known := map[string]bool{"limit": true, "cursor": true}
	if filters {
		for _, k := range []string{"kind", "agent", "from", "to", "q"} {
			known[k] = true
		}
	}
	for _, k := range allowed {
		known[k] = true
	}
	for k, v := range q {
		if !known[k] {
			return f, invalid(k, "is not a parameter of this route")
		}
		if len(v) > 1 {
			return f, invalid(k, "is given %d times", len(v))
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return f, invalid("limit", "must be 1..%d, got %q", MaxLimit, clip(s))
		}
		f.Limit = n
	}
	if s := q.Get("cursor"); s != "" {
		c, err := decodeCursor(s)
		if err != nil {
			return f, invalid("cursor", "%v", err)
		}
		f.After = &c
	}
	if !filters {
		return f, nil
	}
	var err error
	if f.Kinds, err = parseKinds(q.Get("kind")); err != nil {
		return f, invalid("kind", "%v", err)
	}
	if s := q.Get("agent"); s != "" {
		u, err := codec.ParseUUID(s)
		if err != nil {
			return f, invalid("agent", "must be a hyphenated UUID, got %q", clip(s))
		}
		f.Agent = u.String()
	}
	if f.From, err = timeParam(q, "from"); err != nil {
		return f, err
	}
	if f.To, err = timeParam(q, "to"); err != nil {
		return f, err
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, invalid("to", "must be after from")
	}
	f.Text = strings.TrimSpace(q.Get("q"))
	if len(f.Text) > MaxText {
		return f, invalid("q", "is over %d bytes", MaxText)
	}
	return f, nil
}

// timeParam reads an RFC 3339 time or Unix milliseconds.
func timeParam(q url.Values, name string) (time.Time, error) {
	s := q.Get(name)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 && ms < 1<<53 {
		return time.UnixMilli(ms).UTC(), nil
	}
	return time.Time{}, invalid(name, "must be an RFC 3339 time or Unix milliseconds, got %q", clip(s))
}

// bucketParam reads the stats bucket width: a Go duration ("15m", "1h")
// or whole days ("1d").
func bucketParam(s string) (time.Duration, error) {
	if s == "" {
		return DefaultBucket, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		if err == nil && (n < 1 || n > 366) {
			err = fmt.Errorf("out of range")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < MinBucket || d%time.Minute != 0 {
		return 0, invalid("bucket", "must be a whole number of minutes of at least 1m (15m, 1h, 1d), got %q", clip(s))
	}
	return d, nil
}
