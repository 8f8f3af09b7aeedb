package telemetry

import (
	"strings"
	"testing"
)

func TestReadingArena(t *testing.T) {
	full := `{"agentUuid":"` + agent + `","deviceName":"d","readings":[` +
		`{"name":"a","value":1,"unit":"C","quality":"GOOD","anomalyScore":0.5},` +
		`{"name":"b","value":2,"unit":"C","quality":"GOOD","timestamp":1}]}`
	bare := `{"agentUuid":"` + agent + `","deviceName":"d","readings":[{"name":"x"},{"name":"y"}]}`
	a := NewReadingArena(100)

	// First round: nothing to lend yet; the arena learns what it needs.
	m, err := a.Decode(full)
	if err != nil || len(m.Readings) != 2 {
		t.Fatalf("decode: %v, %d readings", err, len(m.Readings))
	}
	a.Reset()
	if a.Cap() != 2 {
		t.Fatalf("after a round of 2 readings the arena holds %d", a.Cap())
	}

	tests := []struct {
		name string
		data string
		want []Reading
	}{
		{"full readings", full, nil},
		// The round before filled every field: none of it may show here.
		{"bare readings after full ones", bare, []Reading{{Name: "x"}, {Name: "y"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "bare readings after full ones" {
				m, err := a.Decode(full)
				if err != nil {
					t.Fatal(err)
				}
				first := &m.Readings[0]
				a.Reset()
				if *first != (Reading{}) {
					t.Fatalf("Reset left the lent reading %+v", *first)
				}
			}
			m, err := a.Decode(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if a.Len() != 2 {
				t.Fatalf("arena lent %d readings, want the 2 of the message", a.Len())
			}
			if tt.want != nil {
				for i := range tt.want {
					if m.Readings[i] != tt.want[i] {
						t.Errorf("reading %d = %+v, want %+v", i, m.Readings[i], tt.want[i])
					}
				}
			}
			if cap(m.Readings) != len(m.Readings) {
				t.Errorf("lent slice has room %d past its %d readings", cap(m.Readings), len(m.Readings))
			}
			a.Reset()
		})
	}
}

func TestReadingArenaOverflowAndKeep(t *testing.T) {
	msg := func(n int) string {
		return `{"readings":[` + strings.TrimSuffix(strings.Repeat(`{"name":"r","unit":"U"},`, n), ",") + `]}`
	}
	a := NewReadingArena(5)
	m1, _ := a.Decode(msg(3))
	a.Reset()
	if a.Cap() != 3 {
		t.Fatalf("cap %d, want 3", a.Cap())
	}
	// Two messages of 3 in an arena of 3: the second is moved out and
	// the first keeps its readings.
	m1, _ = a.Decode(msg(3))
	m2, _ := a.Decode(msg(3))
	m1.Readings = append(m1.Readings, Reading{Name: "appended"})
	if len(m2.Readings) != 3 || m2.Readings[0].Name != "r" {
		t.Fatalf("second message %+v", m2.Readings)
	}
	a.Reset()
	if a.Cap() != 3 {
		t.Fatalf("a round of 6 readings over the keep bound 5 grew the arena to %d", a.Cap())
	}
	// A round bigger than keep makes the arena drop its array.
	_, _ = a.Decode(msg(3))
	a.buf = append(a.buf, make([]Reading, 3)...)
	a.Reset()
	if a.Cap() != 0 {
		t.Fatalf("arena kept %d readings past its bound of 5", a.Cap())
	}
}

func TestReadingArenaMatchesDecodeMessage(t *testing.T) {
	a := dirtyArena(t)
	for _, s := range []string{
		`{"agentUuid":"` + agent + `","deviceName":"plc1","timestamp":1763805600000,"readings":[{"name":"temp","value":1}]}`,
		`{"readings":[{"name":"a","value":1},{"name":"b"},{"name":"c"}],"readings":[{"value":2}],"readings":[{},{},{}]}`,
		`{"readings":null}`, `{"readings":[]}`, `{"readings":[{"value":"x"}]}`,
	} {
		want, werr := DecodeMessage([]byte(s))
		got, gerr := a.Decode(s)
		if (werr == nil) != (gerr == nil) || (werr == nil && !equalMessages(want, got)) {
			t.Errorf("%s: DecodeMessage %+v, %v; arena %+v, %v", s, want, werr, got, gerr)
		}
	}
}

func equalMessages(a, b Message) bool {
	ja, _ := a.AppendJSON(nil)
	jb, _ := b.AppendJSON(nil)
	return string(ja) == string(jb) && len(a.Readings) == len(b.Readings)
}
