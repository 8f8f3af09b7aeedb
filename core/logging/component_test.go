package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// topLevelKeys returns the keys of a JSON object in order, repeats
// included, which json.Unmarshal would hide.
func topLevelKeys(t *testing.T, line string) ([]string, map[string]any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %q", line)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
	}
	var vals map[string]any
	if err := json.Unmarshal([]byte(line), &vals); err != nil {
		t.Fatal(err)
	}
	return keys, vals
}

// TestOneComponentPerRecord parses JSON records for repeated keys, which
// json.Unmarshal would hide: component above all, any key in general.
func TestOneComponentPerRecord(t *testing.T) {
	tests := []struct {
		name  string
		log   func(l *slog.Logger)
		want  string         // the component of the record
		attrs map[string]any // other attributes that must survive
	}{
		{name: "nested With", want: "mqtt",
			log: func(l *slog.Logger) { l.With("component", "api").With("component", "mqtt").Info("m") }},
		{name: "other attributes kept", want: "publish", attrs: map[string]any{"role": "agent", "destination": "cloud"},
			log: func(l *slog.Logger) {
				l.With("role", "agent", "component", "agent").With("destination", "cloud").With("component", "publish").Info("m")
			}},
		{name: "twice in one With", want: "b",
			log: func(l *slog.Logger) { l.With("component", "a", "component", "b").Info("m") }},
		{name: "record over logger", want: "call", attrs: map[string]any{"n": 1.0},
			log: func(l *slog.Logger) { l.With("component", "db").Info("m", "n", 1, "component", "call") }},
		{name: "twice in the record", want: "y",
			log: func(l *slog.Logger) { l.Info("m", "component", "x", "component", "y") }},
		{name: "through AtLeast", want: "paho",
			log: func(l *slog.Logger) {
				AtLeast(l.With("component", "api"), slog.LevelInfo).With("component", "paho").Warn("m")
			}},
		{name: "any key: the innermost wins", want: "outbound",
			attrs: map[string]any{"destination": 1.0, "destination_id": 1.0, "name": "cloud", "from": "direct"},
			log: func(l *slog.Logger) {
				l.With("component", "publish").With("destination", "cloud", "destination_id", 1).
					With("component", "outbound", "destination", 1, "name", "cloud").Info("m", "from", "direct")
			}},
		{name: "record over logger, any key", want: "db", attrs: map[string]any{"table": "readings", "rows": 2.0},
			log: func(l *slog.Logger) {
				l.With("component", "db", "table", "x", "rows", 1).Info("m", "table", "readings", "rows", 2)
			}},
		{name: "inside a group is another key", want: "outer", attrs: map[string]any{"g": map[string]any{"component": "inner"}},
			log: func(l *slog.Logger) { l.With("component", "outer").WithGroup("g").With("component", "inner").Info("m") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := New(&buf, slog.LevelInfo, FormatJSON)
			if err != nil {
				t.Fatal(err)
			}
			tt.log(l)
			line := strings.TrimSpace(buf.String())
			if strings.Count(line, "\n") != 0 {
				t.Fatalf("want one record, got %q", line)
			}
			keys, vals := topLevelKeys(t, line)
			seen := map[string]bool{}
			for _, k := range keys {
				if seen[k] {
					t.Errorf("key %q repeated in %s", k, line)
				}
				seen[k] = true
			}
			if vals["component"] != tt.want {
				t.Errorf("component %v, want %q in %s", vals["component"], tt.want, line)
			}
			for k, v := range tt.attrs {
				got, _ := json.Marshal(vals[k])
				want, _ := json.Marshal(v)
				if !bytes.Equal(got, want) {
					t.Errorf("%s = %s, want %s in %s", k, got, want, line)
				}
			}
		})
	}
}
