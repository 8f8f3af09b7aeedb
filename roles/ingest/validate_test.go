package ingest

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

func TestDecodeEntriesChecksBeforeInsert(t *testing.T) {
	const agent = "0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11"
	msg := func(device, readings string) string {
		return `{"agentUuid":"` + agent + `","deviceName":"` + device + `","timestamp":1763805600000,"readings":[` + readings + `]}`
	}
	long := strings.Repeat("n", maxMetricNameBytes)
	tests := []struct {
		name      string
		data      string
		dead      string // reason of a whole-entry dead letter
		kept      int    // readings written
		rejected  string // reason of the refused readings' dead letter
		rejectLen int    // readings in that dead letter
	}{
		{"valid", msg("d", `{"name":"a","value":1},{"name":"b","value":null}`), "", 2, "", 0},
		{"not JSON", `{"agentUuid":`, "invalid JSON", 0, "", 0},
		{"bad agent", `{"agentUuid":"x","deviceName":"d","readings":[{"name":"a","value":1}]}`, "agentUuid", 0, "", 0},
		{"empty device", msg(" ", `{"name":"a","value":1}`), "deviceName is empty", 0, "", 0},
		{"NUL in device", msg(`d\u0000`, `{"name":"a","value":1}`), "deviceName contains a NUL byte", 0, "", 0},
		{"NUL in protocol", `{"agentUuid":"` + agent + `","deviceName":"d","protocol":"m\u0000","readings":[{"name":"a","value":1}]}`, "protocol contains a NUL byte", 0, "", 0},
		{"no readings", msg("d", ``), "no readings", 0, "", 0},
		{"every reading invalid", msg("d", `{"name":"","value":1}`), "no valid reading; first: reading has no name", 0, "", 0},
		{"NUL in a reading name", msg("d", `{"name":"a","value":1},{"name":"b\u0000","value":2},{"name":"c","value":3}`), "", 2, "1 of 3 readings invalid, the others were written: reading 1: reading name", 1},
		{"NUL in unit and quality", msg("d", `{"name":"a","value":1,"unit":"\u0000"},{"name":"b","value":2,"quality":"\u0000"},{"name":"c","value":3}`), "", 1, "2 of 3 readings invalid", 2},
		{"metric name too long", msg("d", `{"name":"`+long+`","value":1},{"name":"c","value":3}`), "", 1, "metric name of 2050 bytes exceeds 2048", 1},
		{"malformed compact entry", telemetry.CompactPrefix + "\x05", "malformed compact entry", 0, "", 0},
	}
	// The same checks hold for the compact form the Cloud API writes.
	for _, tc := range tests {
		m, err := telemetry.DecodeMessage([]byte(tc.data))
		if err != nil {
			continue
		}
		if data, ok := m.AppendCompactEntry(nil); ok {
			tc.name, tc.data = "compact "+tc.name, string(data)
			tests = append(tests, tc)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, dead := decodeEntries([]streamstore.Entry{{ID: "1-0", Values: map[string]string{telemetry.StreamField: tc.data}}}, newBatchBuf())
			if tc.dead != "" {
				if len(dead) != 1 || len(msgs) != 0 || !strings.Contains(dead[0].reason, tc.dead) || dead[0].payload != tc.data {
					t.Fatalf("dead %+v, msgs %d; want one dead letter with the data and %q", dead, len(msgs), tc.dead)
				}
				return
			}
			if len(dead) != 0 || len(msgs) != 1 {
				t.Fatalf("dead %+v, msgs %d; want one message", dead, len(msgs))
			}
			if got := len(msgs[0].msg.Readings); got != tc.kept {
				t.Errorf("kept %d readings, want %d", got, tc.kept)
			}
			r := msgs[0].rejects
			if tc.rejected == "" {
				if r != nil {
					t.Errorf("rejects = %+v, want none", r)
				}
				return
			}
			if r == nil || r.id != "1-0" || !strings.Contains(r.reason, tc.rejected) {
				t.Fatalf("rejects = %+v, want id 1-0 and %q", r, tc.rejected)
			}
			part, err := telemetry.DecodeMessage([]byte(r.payload))
			if err != nil || len(part.Readings) != tc.rejectLen || part.DeviceName != "d" || part.Timestamp == nil {
				t.Errorf("rejects' data %q (%v): want the message with its %d refused readings", r.payload, err, tc.rejectLen)
			}
		})
	}
}

func TestProcessBudgetGrowsWithTheData(t *testing.T) {
	entry := func(n int) streamstore.Entry {
		return streamstore.Entry{Values: map[string]string{telemetry.StreamField: strings.Repeat("x", n)}}
	}
	const to = 8 * time.Second
	tests := []struct {
		name    string
		entries []streamstore.Entry
		want    time.Duration
	}{
		{"empty", nil, to},
		{"a usual batch", []streamstore.Entry{entry(1 << 10), entry(1 << 10)}, to},
		{"just under one payload", []streamstore.Entry{entry(telemetry.MaxPayloadBytes - 1)}, to},
		{"two payloads' worth", []streamstore.Entry{entry(telemetry.MaxPayloadBytes), entry(telemetry.MaxPayloadBytes)}, 3 * to},
		{"the largest entry", []streamstore.Entry{entry(telemetry.MaxMessageBytes)}, (1 + telemetry.MaxEntryExpansion) * to},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := processBudget(to, tc.entries); got != tc.want {
				t.Errorf("processBudget = %s, want %s", got, tc.want)
			}
		})
	}
}

// validMessage is a message of n valid readings.
func validMessage(n int) telemetry.Message {
	m := telemetry.Message{AgentUUID: "0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11", DeviceName: "d", Protocol: "modbus"}
	for i := range n {
		v := float64(i)
		m.Readings = append(m.Readings, telemetry.Reading{Name: "r" + string(rune('a'+i%26)), Value: &v, Unit: "C", Quality: "GOOD"})
	}
	return m
}

// TestCheckMessageValidAllocatesNothing: a valid message keeps its
// readings as they are. Copying them for every message was one allocation
// per entry on the workers' hot path.
func TestCheckMessageValidAllocatesNothing(t *testing.T) {
	m := validMessage(10)
	allocs := testing.AllocsPerRun(100, func() {
		mm := m
		if bad, err := checkMessage(&mm); err != nil || len(bad) != 0 {
			t.Fatalf("bad %v, err %v", bad, err)
		}
	})
	if allocs != 0 {
		t.Errorf("checkMessage of a valid message: %v allocations, want 0", allocs)
	}
}

func BenchmarkCheckMessage(b *testing.B) {
	m := validMessage(10)
	b.ReportAllocs()
	for b.Loop() {
		mm := m
		if _, err := checkMessage(&mm); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadable: dead letters of compact entries are written as JSON that
// decodes to the same message; anything else is kept as it is.
func TestReadable(t *testing.T) {
	v := 1.5
	m := telemetry.Message{AgentUUID: "0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11", DeviceName: "d\x00",
		Timestamp: telemetry.TimestampOf(time.UnixMilli(1763805600000)), Readings: []telemetry.Reading{{Name: "a", Value: &v, Unit: "C"}}}
	compact, ok := m.AppendCompactEntry(nil)
	if !ok {
		t.Fatal("compact form declined")
	}
	json, err := m.AppendEntryJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, want string }{
		{"json", `{"x":1}`, `{"x":1}`},
		{"not json", "abc", "abc"},
		{"compact", string(compact), string(json)},
		{"malformed compact", telemetry.CompactPrefix + "\x05", telemetry.CompactPrefix + "\x05"},
		{"unknown version", "\x00\x09{}", "\x00\x09{}"},
	}
	for _, tc := range tests {
		if got := readable(tc.in); got != tc.want {
			t.Errorf("%s: readable(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}
