package dashboards

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// TestGoldenLayouts decodes every example of testdata/valid and compares
// the stored form (defaults filled in) with its .golden file, and every
// example of testdata/invalid with the problems its .golden lists.
func TestGoldenLayouts(t *testing.T) {
	for _, dir := range []string{"valid", "invalid"} {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no examples in testdata/%s: %v", dir, err)
		}
		for _, f := range files {
			t.Run(dir+"/"+filepath.Base(f), func(t *testing.T) {
				in, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				l, err := DecodeLayout(in)
				var got []byte
				if dir == "valid" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if got, err = json.MarshalIndent(l, "", "  "); err != nil {
						t.Fatal(err)
					}
				} else {
					var ve *ValidationError
					if !errors.As(err, &ve) {
						t.Fatalf("accepted, or not a ValidationError: %v", err)
					}
					got = []byte(strings.ReplaceAll(err.Error(), "; ", "\n"))
				}
				got = append(got, '\n')
				golden := strings.TrimSuffix(f, ".json") + ".golden"
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to write it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("got\n%s\nwant\n%s", got, want)
				}
			})
		}
	}
}

// widgetJSON is a valid line widget with fields replaced by over.
func widgetJSON(over string) string {
	base := `"id":"w1","type":"line","x":0,"y":0,"w":6,"h":4,"source":{"deviceName":"plc","metric":"t"}`
	if over == "" {
		return "{" + base + "}"
	}
	return "{" + base + "," + over + "}"
}

func TestDecodeLayout(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		// want are substrings the error must hold; none means valid.
		want []string
	}{
		{"minimal", `{"schemaVersion":1}`, nil},
		{"no version", `{"columns":12}`, []string{"schemaVersion: is required"}},
		{"version 2", `{"schemaVersion":2}`, []string{"schemaVersion: unsupported version 2 (supported: 1)"}},
		{"version as text", `{"schemaVersion":"1"}`, []string{"schemaVersion: must be an integer, got string"}},
		{"not an object", `[1]`, []string{": must be an object"}},
		{"null", `null`, []string{": must not be null"}},
		{"not JSON", `{"schemaVersion":`, []string{"unexpected end of JSON input"}},
		{"columns 0", `{"schemaVersion":1,"columns":0}`, []string{"columns: must be 1..24, got 0"}},
		{"columns 25", `{"schemaVersion":1,"columns":25}`, []string{"columns: must be 1..24, got 25"}},
		{"columns null", `{"schemaVersion":1,"columns":null}`, []string{"columns: must not be null"}},
		{"unknown top key", `{"schemaVersion":1,"title":"x"}`, []string{"title: unknown key (a layout has schemaVersion, columns, widgets)"}},
		{"widgets not a list", `{"schemaVersion":1,"widgets":{}}`, []string{"widgets: must be an array"}},
		{"valid widget", `{"schemaVersion":1,"widgets":[` + widgetJSON("") + `]}`, nil},
		{"widget id chars", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"id":"a b"`) + `]}`, []string{`widgets[0].id: must be 1..40 characters`}},
		{"widget id long", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"id":"`+strings.Repeat("a", 41)+`"`) + `]}`, []string{`widgets[0].id: must be 1..40`}},
		{"widget missing", `{"schemaVersion":1,"widgets":[{"id":"a","type":"line"}]}`, []string{"widgets[0].x: is required", "widgets[0].h: is required", "widgets[0].source: is required"}},
		{"w past columns", `{"schemaVersion":1,"columns":6,"widgets":[` + widgetJSON(`"x":2`) + `]}`, []string{"widgets[0].w: x + w is 8, past the grid's 6 columns"}},
		{"w too wide", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"w":13`) + `]}`, []string{"widgets[0].w: must be 1..12, got 13"}},
		{"h 0", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"h":0`) + `]}`, []string{"widgets[0].h: must be 1..24, got 0"}},
		{"fractional x", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"x":1.5`) + `]}`, []string{"widgets[0].x: must be an integer, got number 1.5"}},
		{"title long", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"title":"`+strings.Repeat("é", 101)+`"`) + `]}`, []string{"widgets[0].title: at most 100 characters"}},
		{"title 100", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"title":"`+strings.Repeat("é", 100)+`"`) + `]}`, nil},
		{"window 7 days", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"options":{"window":"168h"}`) + `]}`, nil},
		{"window over 7 days", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"options":{"window":"169h"}`) + `]}`, []string{"widgets[0].options.window: must be a Go duration from 1m to 168h"}},
		{"window empty", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"options":{"window":""}`) + `]}`, []string{"widgets[0].options.window: must be a Go duration"}},
		{"step", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"options":{"step":"1s"}`) + `]}`, nil},
		{"option of another type", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"options":{"rows":3}`) + `]}`, []string{"widgets[0].options.rows: unknown key (a line widget's options has unit, window, step)"}},
		{"gauge without range", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"type":"gauge"`) + `]}`, []string{"widgets[0].options.min: is required for a gauge widget", "widgets[0].options.max: is required"}},
		{"gauge min above max", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"type":"gauge","options":{"min":2,"max":1}`) + `]}`, []string{"widgets[0].options.max: must be above min (2), got 1"}},
		{"gauge ok", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"type":"gauge","options":{"min":-1,"max":1,"decimals":6}`) + `]}`, nil},
		{"stat decimals", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"type":"stat","options":{"decimals":-1}`) + `]}`, []string{"widgets[0].options.decimals: must be 0..6, got -1"}},
		{"table metrics", `{"schemaVersion":1,"widgets":[{"id":"t","type":"table","x":0,"y":0,"w":6,"h":4,"source":{"deviceName":"d","metrics":["a","b"]},"options":{"rows":100}}]}`, nil},
		{"table metrics twice", `{"schemaVersion":1,"widgets":[{"id":"t","type":"table","x":0,"y":0,"w":6,"h":4,"source":{"deviceName":"d","metrics":["a","a"]}}]}`, []string{`widgets[0].source.metrics[1]: "a" is listed twice`}},
		{"table too many", `{"schemaVersion":1,"widgets":[{"id":"t","type":"table","x":0,"y":0,"w":6,"h":4,"source":{"deviceName":"d","metrics":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t","u"]}}]}`, []string{"widgets[0].source.metrics: must list 1..20 metric names, got 21"}},
		{"table rows 101", `{"schemaVersion":1,"widgets":[{"id":"t","type":"table","x":0,"y":0,"w":6,"h":4,"source":{"deviceName":"d","metric":"a"},"options":{"rows":101}}]}`, []string{"widgets[0].options.rows: must be 1..100, got 101"}},
		{"metrics on line", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"source":{"deviceName":"d","metrics":["a"]}`) + `]}`, []string{"widgets[0].source.metrics: only a table widget takes metrics"}},
		{"no metric", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"source":{"deviceName":"d"}`) + `]}`, []string{"widgets[0].source.metric: a metric name must be 1..200"}},
		{"device name long", `{"schemaVersion":1,"widgets":[` + widgetJSON(`"source":{"deviceName":"`+strings.Repeat("d", 201)+`","metric":"m"}`) + `]}`, []string{"widgets[0].source.deviceName: a device name must be 1..200"}},
		{"overlap", `{"schemaVersion":1,"widgets":[` + widgetJSON("") + `,` + widgetJSON(`"id":"w2","x":5`) + `]}`, []string{`widgets[1]: widget "w2" overlaps widget "w1" (widgets[0])`}},
		{"side by side", `{"schemaVersion":1,"widgets":[` + widgetJSON("") + `,` + widgetJSON(`"id":"w2","x":6`) + `]}`, nil},
		{"duplicate id", `{"schemaVersion":1,"widgets":[` + widgetJSON("") + `,` + widgetJSON(`"x":6`) + `]}`, []string{`widgets[1].id: "w1" is also the id of widgets[0]`}},
		{"too big", `{"schemaVersion":1,"pad":"` + strings.Repeat(" ", MaxLayoutBytes) + `"}`, []string{"over the 65536-byte limit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := DecodeLayout([]byte(tc.doc))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if err := l.Validate(); err != nil {
					t.Errorf("decoded layout fails Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %s", tc.doc)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestProblemsBounded: a document breaking every rule in every widget
// gets a bounded answer.
func TestProblemsBounded(t *testing.T) {
	var ws []string
	for range MaxWidgets {
		ws = append(ws, `{"id":"","type":"x","x":-1,"y":-1,"w":0,"h":0,"source":{"deviceName":""},"options":{"decimals":9}}`)
	}
	_, err := DecodeLayout([]byte(`{"schemaVersion":1,"widgets":[` + strings.Join(ws, ",") + `]}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != maxProblems {
		t.Fatalf("got %v, want %d problems", err, maxProblems)
	}
}

func TestValidateBuiltLayout(t *testing.T) {
	l := NewLayout()
	if err := l.Validate(); err != nil {
		t.Fatalf("empty layout: %v", err)
	}
	l.Widgets = append(l.Widgets, Widget{ID: "a", Type: TypeLine, W: 6, H: 4, Source: Source{DeviceName: "d", Metric: "m"}})
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "widgets[0].options.window") {
		t.Errorf("a line widget without a window: %v", err)
	}
	l.Widgets[0].Options.Window = "15m"
	l.Widgets[0].Options.Rows = new(int)
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "widgets[0].options.rows: not an option of a line widget") {
		t.Errorf("rows on a line widget: %v", err)
	}
}

func TestGeneratedLayout(t *testing.T) {
	found := []series{
		{metric: "temp", device: "plc-01", unit: "°C"},
		{metric: "bad\x01name", device: "plc-01"},
		{metric: "flow", unit: strings.Repeat("u", MaxUnit+1)},
		{metric: strings.Repeat("m", MaxSourceName+1), device: "x"},
		{metric: "a"}, {metric: "b"}, {metric: "c"}, {metric: "d"}, {metric: "e"},
	}
	l := generatedLayout(found, "agent-1")
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(l.Widgets) != MaxGeneratedWidgets {
		t.Fatalf("%d widgets, want %d", len(l.Widgets), MaxGeneratedWidgets)
	}
	w0, w1, w5 := l.Widgets[0], l.Widgets[1], l.Widgets[5]
	if w0.Source.DeviceName != "plc-01" || w0.Source.Metric != "temp" || w0.Options.Unit != "°C" || w0.Options.Window != DefaultWindow {
		t.Errorf("first widget %+v", w0)
	}
	if w1.Source.DeviceName != "agent-1" || w1.Options.Unit != "" || w1.X != 6 || w1.Y != 0 {
		t.Errorf("second widget %+v: the agent's name, no unit, beside the first", w1)
	}
	if w5.Source.Metric != "d" || w5.X != 6 || w5.Y != 8 {
		t.Errorf("last widget %+v", w5)
	}
	if l := generatedLayout(nil, "agent-1"); len(l.Widgets) != 0 || l.Validate() != nil {
		t.Errorf("no readings: %+v", l)
	}
}

func TestIfMatch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{{"", 0, false}, {"*", 0, false}, {`"3"`, 3, false}, {`W/"12"`, 12, false}, {"3", 0, true}, {`"x"`, 0, true}, {`"0"`, 0, true}} {
		got, err := ifMatch(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		if !tc.bad && ((got == nil) != (tc.want == 0) || got != nil && *got != tc.want) {
			t.Errorf("%q: %v, want %d", tc.in, got, tc.want)
		}
	}
}

func TestCursor(t *testing.T) {
	c := encodeCursor("a1000000-0000-4000-8000-000000000001", "Line 3 / \"hot\"")
	got, err := decodeCursor(c)
	if err != nil || got[0] != "a1000000-0000-4000-8000-000000000001" || got[1] != "Line 3 / \"hot\"" {
		t.Errorf("round trip: %v %v", got, err)
	}
	for _, bad := range []string{"!", "e30", "WzFd"} {
		if _, err := decodeCursor(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzDecodeLayout: no input panics the decoder; what it accepts passes
// Validate and comes back the same from its stored form.
func FuzzDecodeLayout(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"schemaVersion":1,"widgets":[{"id":"a","type":"gauge","x":0,"y":0,"w":1,"h":1,"source":{"deviceName":"d","metric":"m"},"options":{"min":0,"max":1}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeLayout(b)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 || len(ve.Problems) > maxProblems {
				t.Fatalf("error %v is not a bounded ValidationError", err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("accepted layout fails Validate: %v", err)
		}
		stored, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeLayout(stored)
		if err != nil {
			t.Fatalf("stored form %s refused: %v", stored, err)
		}
		if !reflect.DeepEqual(l, again) {
			t.Fatalf("stored form changes the layout:\n%+v\n%+v", l, again)
		}
	})
}
