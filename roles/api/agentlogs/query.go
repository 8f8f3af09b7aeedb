package agentlogs

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Paging limits.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// maxText bounds the search text: it becomes a LIKE pattern.
	maxText = 200
)

// timeLayout is how line times are written: RFC 3339 in UTC with
// microseconds, the precision both databases keep.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// levels, lowest first: a level filter is a minimum, as on the agent's
// own GET /v1/logs.
var levels = []string{"debug", "info", "warn", "error"}

// query is a parsed request.
type query struct {
	levels       []string
	since, until time.Time
	text         string
	limit        int
	after        *cursor
}

// cursor is the position after the last line of a page: its time (Unix
// µs) and id, the page order's key.
type cursor struct {
	at int64
	id int64
}

func encodeCursor(c cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at, 10) + "." + strconv.FormatInt(c.id, 10)))
}

func decodeCursor(s string) (cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) > 48 {
		return cursor{}, errors.New("cursor: not a cursor this API gave")
	}
	a, b, ok := strings.Cut(string(raw), ".")
	at, err1 := strconv.ParseInt(a, 10, 64)
	id, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || id < 0 || at < minMicros || at > maxMicros {
		return cursor{}, errors.New("cursor: not a cursor this API gave")
	}
	return cursor{at: at, id: id}, nil
}

// The times a filter or cursor may name: years 1..9999, what both
// databases and RFC 3339 can hold.
var (
	minTime   = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime   = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	minMicros = minTime.UnixMicro()
	maxMicros = maxTime.UnixMicro()
)

func timeOfMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// parseTime reads RFC 3339 or Unix milliseconds.
func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	var t time.Time
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < minTime.UnixMilli() || ms > maxTime.UnixMilli() {
			return t, fmt.Errorf("%s: Unix ms %d is out of range", name, ms)
		}
		t = time.UnixMilli(ms)
	} else if t, err = time.Parse(time.RFC3339Nano, v); err != nil {
		return t, fmt.Errorf("%s must be RFC 3339 (2026-11-29T10:00:00Z) or Unix ms, got %s", name, quote(v))
	}
	t = t.UTC().Truncate(time.Microsecond)
	if t.Before(minTime) || t.After(maxTime) {
		return time.Time{}, fmt.Errorf("%s: %s is out of range", name, quote(v))
	}
	return t, nil
}

// parseQuery checks the query parameters.
func parseQuery(level, since, until, text, limit, cur string) (query, error) {
	q := query{limit: DefaultLimit}
	if level != "" {
		i := -1
		for j, l := range levels {
			if strings.EqualFold(level, l) {
				i = j
			}
		}
		if i < 0 {
			return q, fmt.Errorf("level must be one of debug, info, warn, error, got %s", quote(level))
		}
		q.levels = levels[i:]
	}
	var err error
	if q.since, err = parseTime("since", since); err != nil {
		return q, err
	}
	if q.until, err = parseTime("until", until); err != nil {
		return q, err
	}
	if !q.since.IsZero() && !q.until.IsZero() && !q.until.After(q.since) {
		return q, errors.New("until must be after since")
	}
	if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
		return q, errors.New("q must be UTF-8 text")
	}
	if utf8.RuneCountInString(text) > maxText {
		return q, fmt.Errorf("q is at most %d characters", maxText)
	}
	q.text = text
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > MaxLimit {
			return q, fmt.Errorf("limit must be 1..%d, got %s", MaxLimit, quote(limit))
		}
		q.limit = n
	}
	if cur != "" {
		c, err := decodeCursor(cur)
		if err != nil {
			return q, err
		}
		q.after = &c
	}
	return q, nil
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}
