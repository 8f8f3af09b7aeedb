package envelope

import (
	"reflect"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/telemetry"
)

func TestGuardClock(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *telemetry.Timestamp { return telemetry.TimestampOf(now.Add(d)) }
	r := func(name string, ts *telemetry.Timestamp) telemetry.Reading {
		return telemetry.Reading{Name: name, Timestamp: ts}
	}
	w := ClockWindow{MaxFuture: 5 * time.Minute, MaxPast: 24 * time.Hour}
	tests := []struct {
		name string
		in   []telemetry.Message
		w    ClockWindow
		want []telemetry.Message // nil: none left
		skew Skew
	}{
		{"within the window", []telemetry.Message{{DeviceName: "a", Readings: []telemetry.Reading{
			r("x", at(-time.Hour)), r("y", at(5*time.Minute)), r("z", nil)}}},
			w, []telemetry.Message{{DeviceName: "a", Readings: []telemetry.Reading{
				r("x", at(-time.Hour)), r("y", at(5*time.Minute)), r("z", nil)}}}, Skew{}},
		{"a day ahead is removed", []telemetry.Message{{DeviceName: "a", Readings: []telemetry.Reading{
			r("x", at(24*time.Hour)), r("y", at(time.Minute))}}},
			w, []telemetry.Message{{DeviceName: "a", Readings: []telemetry.Reading{r("y", at(time.Minute))}}},
			Skew{Future: 1, Ahead: 24 * time.Hour}},
		{"a day behind is kept and counted", []telemetry.Message{{DeviceName: "a", Readings: []telemetry.Reading{
			r("x", at(-25*time.Hour)), r("y", at(-48*time.Hour))}}},
			w, []telemetry.Message{{DeviceName: "a", Readings: []telemetry.Reading{r("x", at(-25*time.Hour)), r("y", at(-48*time.Hour))}}},
			Skew{Past: 2, Behind: 48 * time.Hour}},
		{"the message's time applies to readings without one", []telemetry.Message{
			{DeviceName: "a", Timestamp: at(time.Hour), Readings: []telemetry.Reading{r("x", nil), r("y", at(0))}},
			{DeviceName: "b", Timestamp: at(time.Hour), Readings: []telemetry.Reading{r("x", nil)}},
			{DeviceName: "c", Readings: []telemetry.Reading{r("x", nil)}}},
			w, []telemetry.Message{
				{DeviceName: "a", Timestamp: at(time.Hour), Readings: []telemetry.Reading{r("y", at(0))}},
				{DeviceName: "c", Readings: []telemetry.Reading{r("x", nil)}}},
			Skew{Future: 2, Ahead: time.Hour}},
		{"everything ahead leaves nothing", []telemetry.Message{{DeviceName: "a", Readings: []telemetry.Reading{r("x", at(time.Hour))}}},
			w, nil, Skew{Future: 1, Ahead: time.Hour}},
		{"a zero window bounds nothing", []telemetry.Message{{DeviceName: "a", Readings: []telemetry.Reading{
			r("x", at(1000*time.Hour)), r("y", at(-1000*time.Hour))}}},
			ClockWindow{}, []telemetry.Message{{DeviceName: "a", Readings: []telemetry.Reading{
				r("x", at(1000*time.Hour)), r("y", at(-1000*time.Hour))}}}, Skew{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Batch{Messages: tt.in}
			skew := GuardClock(&b, now, tt.w)
			if skew != tt.skew {
				t.Errorf("skew = %+v, want %+v", skew, tt.skew)
			}
			if len(b.Messages) == 0 && tt.want == nil {
				return
			}
			if !reflect.DeepEqual(b.Messages, tt.want) {
				t.Errorf("messages = %+v, want %+v", b.Messages, tt.want)
			}
		})
	}
}
