package drift

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// parse turns "a:number b.c:string" into fields.
func parse(spec string) []Field {
	var fs []Field
	for _, w := range strings.Fields(spec) {
		p, t, _ := strings.Cut(w, ":")
		fs = append(fs, Field{Path: p, Type: Type(t)})
	}
	return fs
}

// step is n batches, one every `every` (10 s when 0); fields gives the
// k-th batch of the step (k from 1).
type step struct {
	n      int
	every  time.Duration
	fields func(k int) string
}

func always(spec string) func(int) string { return func(int) string { return spec } }

// got is an event reduced to what a scenario checks, with the number of
// the batch that raised it.
type got struct {
	batch        int
	kind         Kind
	field        string
	expected     Type
	seen         Type
	absent       int
	detailPrefix string
}

func (g got) String() string {
	return fmt.Sprintf("batch %d %s %s exp=%q seen=%q absent=%d %q", g.batch, g.kind, g.field, g.expected, g.seen, g.absent, g.detailPrefix)
}

// run feeds the steps as whole batches into an enabled output and
// returns the events with their batch numbers, checking each At.
func run(t *testing.T, opts Options, steps []step) []got {
	t.Helper()
	d := New()
	opts.Enabled = true
	if err := d.SetOptions("mqtt", opts); err != nil {
		t.Fatal(err)
	}
	now, batch := t0, 0
	var out []got
	for _, s := range steps {
		every := s.every
		if every == 0 {
			every = 10 * time.Second
		}
		for k := 1; k <= s.n; k++ {
			now = now.Add(every)
			batch++
			events, err := d.ObserveBatch("mqtt", parse(s.fields(k)), now)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events {
				if e.At != now.UnixMilli() || e.Protocol != "mqtt" || e.ID == "" {
					t.Fatalf("batch %d: event %+v: want at %d, protocol mqtt, an id", batch, e, now.UnixMilli())
				}
				prefix, _, _ := strings.Cut(e.Detail, ":")
				if e.Kind != KindNewField {
					prefix = ""
				}
				out = append(out, got{batch, e.Kind, e.Field, e.ExpectedType, e.SeenType, e.BatchesAbsent, prefix})
			}
		}
	}
	return out
}

func TestRules(t *testing.T) {
	cases := []struct {
		name  string
		max   int // maxFieldCount; the default when 0
		steps []step
		want  []got
	}{
		{
			name: "nothing during warm-up, types and gaps included",
			steps: []step{
				{n: 5, fields: always("a:number b:number")},
				{n: 15, fields: always("a:string")},
				{n: 10, fields: always("a:string")},
			},
			// b was in 5 of 20 warm-up batches: not expected, never missing.
		},
		{
			name: "expected at 50 % of warm-up; missing counts absent warm-up batches",
			steps: []step{
				{n: 10, fields: always("a:number c:number")},
				{n: 10, fields: always("a:number")},
				{n: 1, fields: always("a:number")},
			},
			want: []got{{batch: 21, kind: KindMissingField, field: "c", expected: TypeNumber, absent: 11}},
		},
		{
			name: "present in 9 of 20 warm-up batches: not expected",
			steps: []step{
				{n: 9, fields: always("a:number c:number")},
				{n: 31, fields: always("a:number")},
			},
		},
		{
			name: "null carries no type: no change to or from it",
			steps: []step{
				{n: 20, fields: always("a:number n:null")},
				{n: 1, fields: always("a:null n:string")},
				{n: 1, fields: always("a:number n:number")},
			},
			want: []got{{batch: 22, kind: KindTypeChanged, field: "n", expected: TypeString, seen: TypeNumber}},
		},
		{
			name: "a retired field makes room under maxFieldCount and is new when back",
			max:  2,
			steps: []step{
				{n: 20, fields: always("a:number b:number")},
				{n: 250, fields: always("a:number c:number")}, // c over the limit of 2
				{n: 1, fields: always("a:number c:string d:bool")},
				{n: 1, fields: always("a:number b:number c:string")},
			},
			want: []got{
				{batch: 21, kind: KindFieldLimit, field: "c"},
				{batch: 30, kind: KindMissingField, field: "b", expected: TypeNumber, absent: 10},
				{batch: 210, kind: KindMissingField, field: "b", expected: TypeNumber, absent: 190},
				{batch: 270, kind: KindFieldRetired, field: "b", expected: TypeNumber, absent: 250},
				{batch: 271, kind: KindFieldLimit, field: "d"},
				{batch: 271, kind: KindNewField, field: "c", seen: TypeString, detailPrefix: DetailAppeared},
				// b is dropped at 272: the overflow was reported at 271.
			},
		},
		{
			name: "one alert, quiet for 30 minutes, again, then retired",
			steps: []step{
				{n: 20, fields: always("a:number b:bool")},
				{n: 260, fields: always("a:number")}, // 10 s apart: 30 min is 180 batches
			},
			want: []got{
				{batch: 30, kind: KindMissingField, field: "b", expected: TypeBool, absent: 10},
				{batch: 210, kind: KindMissingField, field: "b", expected: TypeBool, absent: 190},
				{batch: 270, kind: KindFieldRetired, field: "b", expected: TypeBool, absent: 250},
			},
		},
		{
			name: "nine absent batches at a time never alert",
			steps: []step{
				{n: 20, fields: always("a:number b:number")},
				{n: 100, fields: func(k int) string {
					if k%10 == 0 {
						return "a:number b:number"
					}
					return "a:number"
				}},
			},
		},
		{
			name: "promoted at 30 of 50, not at 29 of 50",
			steps: []step{
				{n: 20, fields: always("a:number")},
				{n: 150, fields: func(k int) string {
					s := "a:number"
					if (k-1)%5 >= 2 { // absent, absent, present x3: 30 of 50 at k=50
						s += " p:number"
					}
					if (k-1)%50 < 29 { // any 50 in a row hold 29
						s += " q:string"
					}
					return s
				}},
			},
			want: []got{
				{batch: 21, kind: KindNewField, field: "q", seen: TypeString, detailPrefix: DetailAppeared},
				{batch: 23, kind: KindNewField, field: "p", seen: TypeNumber, detailPrefix: DetailAppeared},
				{batch: 70, kind: KindNewField, field: "p", seen: TypeNumber, detailPrefix: DetailPromoted},
			},
		},
		{
			name: "new field reported once, not again when it comes back",
			steps: []step{
				{n: 20, fields: always("a:number")},
				{n: 1, fields: always("a:number n:null")},
				{n: 5, fields: always("a:number")},
				{n: 1, fields: always("a:number n:null")},
			},
			want: []got{{batch: 21, kind: KindNewField, field: "n", seen: TypeNull, detailPrefix: DetailAppeared}},
		},
		{
			name: "type change number to string, back suppressed, again after 30 minutes",
			steps: []step{
				{n: 20, fields: always("a:number b:number")},
				{n: 1, fields: always("a:string b:number")},
				{n: 1, fields: always("a:number b:number")},
				{n: 1, every: 30 * time.Minute, fields: always("a:string b:number")},
			},
			want: []got{
				{batch: 21, kind: KindTypeChanged, field: "a", expected: TypeNumber, seen: TypeString},
				{batch: 23, kind: KindTypeChanged, field: "a", expected: TypeNumber, seen: TypeString},
			},
		},
		{
			name: "a missing alert suppresses a type change of the same field",
			steps: []step{
				{n: 20, fields: always("a:number b:number")},
				{n: 10, fields: always("a:number")},
				{n: 1, fields: always("a:number b:string")},
			},
			want: []got{{batch: 30, kind: KindMissingField, field: "b", expected: TypeNumber, absent: 10}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			if tc.max > 0 {
				opts.MaxFieldCount = tc.max
			}
			events := run(t, opts, tc.steps)
			if fmt.Sprint(events) != fmt.Sprint(tc.want) {
				t.Errorf("events:\n got %v\nwant %v", events, tc.want)
			}
		})
	}
}

func TestWindowGroupsFrames(t *testing.T) {
	d := New()
	if err := d.SetOptions("mqtt", Options{Enabled: true, WindowMs: 1000, MaxFieldCount: 10}); err != nil {
		t.Fatal(err)
	}
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	frames := []struct {
		at   int
		json string
	}{
		{0, `{"a":1}`}, {400, `{"b":{"c":true}}`}, {999, `{"a":2}`}, // batch 1
		{1000, `{"a":3}`}, // batch 2 starts at 1000
	}
	for _, f := range frames {
		if _, err := d.ObserveJSON("mqtt", []byte(f.json), ms(f.at)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, batches uint64, presence map[string]float64) {
		t.Helper()
		s, ok := d.State("mqtt")
		if !ok || s.Batches != batches {
			t.Fatalf("%s: batches %d (ok %v), want %d", when, s.Batches, ok, batches)
		}
		gotP := map[string]float64{}
		for _, f := range s.Fields {
			gotP[f.Field] = f.Presence
		}
		if fmt.Sprint(gotP) != fmt.Sprint(presence) {
			t.Fatalf("%s: presence %v, want %v", when, gotP, presence)
		}
	}
	check("after the frame at 1000 ms", 1, map[string]float64{"a": 1, "b": 1, "b.c": 1})
	d.Flush(ms(1999))
	check("flush inside the window", 1, map[string]float64{"a": 1, "b": 1, "b.c": 1})
	d.Flush(ms(2000))
	check("flush at the window's end", 2, map[string]float64{"a": 1, "b": 0.5, "b.c": 0.5})
	if s, _ := d.State("mqtt"); s.Fields[0].LastSeen != ms(1000).UnixMilli() {
		t.Errorf("a last seen %d, want %d", s.Fields[0].LastSeen, ms(1000).UnixMilli())
	}
}

// A type change inside a window is reported even when a later frame of
// the same batch carries the known type again.
func TestWindowKeepsTypeChange(t *testing.T) {
	d := New()
	if err := d.SetOptions("mqtt", Options{Enabled: true, WindowMs: 1000, MaxFieldCount: 10}); err != nil {
		t.Fatal(err)
	}
	now := t0
	for range WarmupBatches {
		if _, err := d.ObserveBatch("mqtt", parse("a:number"), now); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	for _, spec := range []string{"a:string", "a:number"} {
		if _, err := d.Observe("mqtt", parse(spec), now); err != nil {
			t.Fatal(err)
		}
	}
	events := d.Flush(now.Add(time.Second))
	if len(events) != 1 || events[0].Kind != KindTypeChanged || events[0].SeenType != TypeString {
		t.Fatalf("events %+v, want one type_changed to string", events)
	}
}

func TestFieldLimit(t *testing.T) {
	d := New()
	if err := d.SetOptions("opcua", Options{Enabled: true, MaxFieldCount: 3}); err != nil {
		t.Fatal(err)
	}
	now := t0
	var limits []Event
	for i := range 25 {
		now = now.Add(time.Second)
		spec := "a:number b:number c:number d:number"
		if i == 22 {
			spec += " e:string"
		}
		events, err := d.ObserveBatch("opcua", parse(spec), now)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.Kind != KindFieldLimit {
				t.Fatalf("unexpected event %+v", e)
			}
			limits = append(limits, e)
		}
	}
	if len(limits) != 1 || limits[0].Field != "d" || limits[0].At != t0.Add(21*time.Second).UnixMilli() {
		t.Fatalf("field_limit events %+v, want one for d at the first batch after warm-up", limits)
	}
	s, _ := d.State("opcua")
	if len(s.Fields) != 3 || s.FieldsDropped != 26 {
		t.Fatalf("fields %d dropped %d, want 3 and 26 (d in 25 batches, e once)", len(s.Fields), s.FieldsDropped)
	}
	if st := d.Stats(); st.FieldsDropped != 26 || st.Fields != 3 || st.Events[KindFieldLimit] != 1 || st.Batches != 25 {
		t.Fatalf("stats %+v", st)
	}
}

func TestOptionsLifecycle(t *testing.T) {
	d := New()
	if ev, err := d.ObserveBatch("modbus", parse("a:number"), t0); err != nil || ev != nil {
		t.Fatalf("an output not enabled: events %v, err %v", ev, err)
	}
	if _, ok := d.State("modbus"); ok {
		t.Fatal("state of an output never enabled")
	}
	on := Options{Enabled: true, MaxFieldCount: 5}
	for _, c := range []struct {
		protocol string
		opts     Options
	}{{"", on}, {"modbus", Options{Enabled: true}}} {
		if err := d.SetOptions(c.protocol, c.opts); err == nil {
			t.Errorf("SetOptions(%q, %+v) accepted", c.protocol, c.opts)
		}
	}
	if err := d.SetOptions("modbus", on); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ObserveBatch("modbus", parse("a:number b:number c:number"), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ObserveBatch("modbus", parse("a:float"), t0); err == nil || !strings.Contains(err.Error(), `unknown type "float"`) {
		t.Fatalf("bad type: err %v", err)
	}
	on.WindowMs = 100 // keeps state
	if err := d.SetOptions("modbus", on); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.State("modbus"); s.Batches != 1 || len(s.Fields) != 3 {
		t.Fatalf("after a window change: %+v", s)
	}
	on.MaxFieldCount = 2 // below the 3 tracked: starts over
	if err := d.SetOptions("modbus", on); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.State("modbus"); s.Batches != 0 || len(s.Fields) != 0 {
		t.Fatalf("after lowering maxFieldCount: %+v", s)
	}
	if err := d.SetOptions("modbus", Options{MaxFieldCount: 2}); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.State("modbus"); ok {
		t.Fatal("state kept after disabling")
	}
}

// Concurrent callers on several outputs: run with -race.
func TestConcurrentUse(t *testing.T) {
	d := New()
	protocols := []string{"mqtt", "modbus", "opcua"}
	for _, p := range protocols {
		if err := d.SetOptions(p, Options{Enabled: true, WindowMs: 5, MaxFieldCount: 50}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, p := range protocols {
		wg.Go(func() {
			for i := range 200 {
				at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
				if _, err := d.ObserveJSON(p, []byte(`{"v":1,"s":"x"}`), at); err != nil {
					t.Error(err)
				}
				d.State(p)
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			d.Flush(t0)
			d.Stats()
		}
	})
	wg.Wait()
	d.Flush(t0.Add(time.Hour))
	if s := d.Stats(); s.Batches != 600 || s.Outputs != 3 || s.Fields != 6 {
		t.Fatalf("stats %+v, want 600 batches over 3 outputs and 6 fields", s)
	}
}

// TestEventBudget: at most EventBudget events per output per
// SuppressionDelay; the rest are counted, and the budget comes back.
func TestEventBudget(t *testing.T) {
	d := New()
	if err := d.SetOptions("mqtt", Options{Enabled: true, MaxFieldCount: 1000}); err != nil {
		t.Fatal(err)
	}
	fields := func(prefix string, n int) []Field {
		fs := parse("a:number")
		for i := range n {
			fs = append(fs, Field{Path: fmt.Sprintf("%s%03d", prefix, i), Type: TypeNumber})
		}
		return fs
	}
	now := t0
	for range WarmupBatches {
		now = now.Add(10 * time.Second)
		if _, err := d.ObserveBatch("mqtt", fields("", 0), now); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		after        time.Duration
		newFields    string
		n            int
		events, over int
	}{
		{10 * time.Second, "x", 150, 100, 50}, // the budget of the first window
		{time.Minute, "y", 1, 0, 51},          // none left in it
		{SuppressionDelay, "z", 10, 10, 51},   // a new window
	}
	var all []Field
	for i, s := range steps {
		now = now.Add(s.after)
		all = append(all, fields(s.newFields, s.n)[1:]...)
		events, err := d.ObserveBatch("mqtt", append(fields("", 0), all...), now)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := d.State("mqtt")
		if len(events) != s.events || st.EventsOverBudget != uint64(s.over) || d.Stats().EventsOverBudget != uint64(s.over) {
			t.Fatalf("step %d: %d events, %d over budget; want %d and %d", i, len(events), st.EventsOverBudget, s.events, s.over)
		}
	}
}
