package agentlogs

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

func TestParseQuery(t *testing.T) {
	q, err := parseQuery("warn", "1764410400000", "2026-11-29T11:00:00.5Z", "Pump", "10", encodeCursor(cursor{at: 1764410400000000, id: 42}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(q.levels, ",") != "warn,error" || q.since != time.UnixMilli(1764410400000).UTC() ||
		q.until != time.Date(2026, 11, 29, 11, 0, 0, 500e6, time.UTC) || q.text != "Pump" || q.limit != 10 || *q.after != (cursor{1764410400000000, 42}) {
		t.Fatalf("parsed %+v", q)
	}
	if q, err := parseQuery("", "", "", "", "", ""); err != nil || q.limit != DefaultLimit || q.levels != nil || q.after != nil {
		t.Fatalf("defaults %+v, %v", q, err)
	}
	var s db.SQLBuilder
	buildSQL(&s, db.Dialect{Engine: db.SQLite}, "t", "a", query{text: `50%_\`, limit: 5})
	if args := s.Args(); args[2] != `%50\%\_\\%` || args[3] != 6 {
		t.Fatalf("args %v", args)
	}
}

func FuzzParseQuery(f *testing.F) {
	f.Add("warn", "1764410400000", "2026-11-29T11:00:00Z", "pump 100%", "10", encodeCursor(cursor{at: 1764410400000000, id: 42}))
	f.Add("", "-62135596800000", "253402300799999", "", "1000", "")
	f.Add("error", "", "", "\x00", "x", "MTIzLjQ1")
	f.Fuzz(func(t *testing.T, level, since, until, text, limit, cur string) {
		q, err := parseQuery(level, since, until, text, limit, cur)
		if err != nil {
			return
		}
		if q.limit < 1 || q.limit > MaxLimit {
			t.Fatalf("limit %d accepted", q.limit)
		}
		if q.after != nil {
			// A cursor that parses encodes back to one that parses the same.
			again, err := decodeCursor(encodeCursor(*q.after))
			if err != nil || again != *q.after {
				t.Fatalf("cursor %+v round trip: %+v, %v", *q.after, again, err)
			}
		}
		for _, tm := range []time.Time{q.since, q.until} {
			if !tm.IsZero() && (tm.Before(minTime) || tm.After(maxTime)) {
				t.Fatalf("time %v out of range accepted", tm)
			}
		}
		// The search text is only ever an argument: any text gives the
		// SQL text a plain one gives.
		var s, plain db.SQLBuilder
		buildSQL(&s, db.Dialect{Engine: db.Postgres}, "t", "a", q)
		if q.text != "" {
			q.text = "x"
		}
		buildSQL(&plain, db.Dialect{Engine: db.Postgres}, "t", "a", q)
		if s.String() != plain.String() {
			t.Fatalf("search text %q changed the SQL text", text)
		}
	})
}
