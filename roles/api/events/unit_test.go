package events

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDiff(t *testing.T) {
	for _, c := range []struct {
		name, a, b string
		want       []Change
	}{
		{"equal", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, []Change{}},
		{"member changed, added, removed", `{"a":1,"b":2}`, `{"a":3,"c":4}`, []Change{
			{Path: "/a", Op: OpChanged, From: 1.0, To: 3.0}, {Path: "/b", Op: OpRemoved, From: 2.0}, {Path: "/c", Op: OpAdded, To: 4.0}}},
		{"array element and tail", `{"l":[1,2,3]}`, `{"l":[1,5]}`, []Change{
			{Path: "/l/1", Op: OpChanged, From: 2.0, To: 5.0}, {Path: "/l/2", Op: OpRemoved, From: 3.0}}},
		{"type change is a whole change", `{"x":{"y":1}}`, `{"x":[1]}`, []Change{
			{Path: "/x", Op: OpChanged, From: map[string]any{"y": 1.0}, To: []any{1.0}}}},
		{"pointer escapes", `{"a/b":1,"c~d":1}`, `{"a/b":2,"c~d":2}`, []Change{
			{Path: "/a~1b", Op: OpChanged, From: 1.0, To: 2.0}, {Path: "/c~0d", Op: OpChanged, From: 1.0, To: 2.0}}},
		{"root scalar", `1`, `2`, []Change{{Path: "/", Op: OpChanged, From: 1.0, To: 2.0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var a, b any
			if err := json.Unmarshal([]byte(c.a), &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(c.b), &b); err != nil {
				t.Fatal(err)
			}
			got, trunc := Diff(a, b)
			if !reflect.DeepEqual(got, c.want) || trunc {
				t.Errorf("Diff(%s, %s) = %v (truncated %v), want %v", c.a, c.b, got, trunc, c.want)
			}
		})
	}
	big := map[string]any{}
	for i := range maxChanges + 10 {
		big[strings.Repeat("k", 1+i%7)+string(rune('a'+i%26))+time.Duration(i).String()] = i
	}
	if got, trunc := Diff(map[string]any{}, big); len(got) != maxChanges || !trunc {
		t.Errorf("diff of %d additions: %d changes, truncated %v", len(big), len(got), trunc)
	}
}

func TestSignificantLeavesCountersOut(t *testing.T) {
	a := `{"timestamp":1,"runState":"running","buffer":{"n":1},"endpoints":[{"name":"p","polls":1,"lastPoll":"x"}],
		"apps":{"runtime":{"status":"connected","since":1},"apps":[{"appName":"w","services":[{"serviceName":"m","state":"running","status":"Up 1 minute"}]}]}}`
	b := `{"timestamp":2,"runState":"running","buffer":{"n":9},"endpoints":[{"name":"p","polls":7,"lastPoll":"y"}],
		"apps":{"runtime":{"status":"connected","since":5},"apps":[{"appName":"w","services":[{"serviceName":"m","state":"running","status":"Up 2 minutes"}]}]}}`
	c := strings.Replace(b, `"state":"running","status"`, `"state":"exited","status"`, 1)
	hash := func(s string) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		h, err := stateHash(m)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if hash(a) != hash(b) {
		t.Error("reports differing in times and counters only hash differently")
	}
	if hash(b) == hash(c) {
		t.Error("a service that exited hashes as one running")
	}
}

func TestCursorRoundTrip(t *testing.T) {
	for _, c := range []cursor{
		{at: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), src: srcAudit, seq: 42},
		{at: time.UnixMicro(0).UTC(), src: srcTargetVersion, seq: 7, key: "a1000000-0000-4000-8000-000000000001"},
		{at: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), src: srcIncidentClosed, key: "d1000000-0000-4000-8000-000000000001"},
	} {
		got, err := decodeCursor(c.encode())
		if err != nil || got != c {
			t.Errorf("decode(encode(%+v)) = %+v, %v", c, got, err)
		}
	}
}

func TestParseKinds(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"", true}, {"agent.status", true}, {"agent.*,job.*", true}, {"job.execution.failed", true},
		{KindStateReport + "," + KindTargetVersion, true}, {"anomaly_incident.*", true},
		{"agent.exploded", false}, {"job.execution.", false}, {"job.execution.a.b", false}, {"*", false}, {"nothing.*", false},
		{strings.Repeat("agent.status,", MaxKinds) + "agent.status", false},
	} {
		if _, err := parseKinds(c.in); (err == nil) != c.ok {
			t.Errorf("parseKinds(%q): %v, want ok %v", c.in, err, c.ok)
		}
	}
}

// FuzzListParams: any query string either fails with a field error or
// gives a filter within the bounds, whose cursor survives a round trip.
func FuzzListParams(f *testing.F) {
	for _, s := range []string{"", "limit=5&kind=agent.*", "from=2026-01-01T00:00:00Z&to=1700000000000", "cursor=" + (cursor{src: srcAudit, seq: 1}).encode(),
		"q=%25_x&agent=a1000000-0000-4000-8000-000000000001", "kind=job.execution.x,agent.status&limit=1000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		fl, err := listParams(q, true, "bucket")
		if err != nil {
			var fe *fieldError
			if !errors.As(err, &fe) {
				t.Fatalf("listParams(%q): %v is not a field error", raw, err)
			}
			return
		}
		if fl.Limit < 1 || fl.Limit > MaxLimit || len(fl.Text) > MaxText {
			t.Fatalf("listParams(%q) = %+v out of bounds", raw, fl)
		}
		if fl.After != nil {
			if c, err := decodeCursor(fl.After.encode()); err != nil || c != *fl.After {
				t.Fatalf("cursor %+v does not round-trip: %+v %v", *fl.After, c, err)
			}
		}
		_, _ = bucketParam(q.Get("bucket"))
	})
}

// FuzzStateHash: any JSON object hashes without a panic, the same way
// twice, and a document compared with itself has no changes.
func FuzzStateHash(f *testing.F) {
	f.Add(`{"timestamp":1,"endpoints":[{"polls":1}],"apps":{"runtime":{"since":1},"apps":[{"services":[{"status":"x"}]}]}}`)
	f.Add(`{"endpoints":3,"apps":[1]}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var m map[string]any
		if json.Unmarshal([]byte(raw), &m) != nil || m == nil {
			return
		}
		h1, err1 := stateHash(m)
		h2, err2 := stateHash(m)
		if err1 != nil || err2 != nil || h1 != h2 {
			t.Fatalf("hash of %s: %s %v, %s %v", raw, h1, err1, h2, err2)
		}
		if ch, _ := Diff(significant(m), significant(m)); len(ch) != 0 {
			t.Fatalf("%s differs from itself: %v", raw, ch)
		}
	})
}
