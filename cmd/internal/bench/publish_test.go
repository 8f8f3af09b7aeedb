package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/edgeplat/edgeplat/core/codec"
)

// TestPublishLoadInflux: the line protocol load carries exactly the
// readings of the JSON envelopes bench pipeline sends, one line each, and
// every (agent, metric, time) key once.
func TestPublishLoadInflux(t *testing.T) {
	const pubs, msgs, readings = 2, 9, 10
	lp := newPublishLoad(pubs, msgs, readings, FormatInflux, 0)
	if err := lp.encode(io.Discard); err != nil {
		t.Fatal(err)
	}
	js := newPublishLoad(pubs, msgs, readings, string(codec.FormatJSON), 0)
	js.agents = lp.agents
	if err := js.encode(io.Discard); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for pub := range pubs {
		for i := range msgs {
			var env map[string]any
			err := json.Unmarshal(js.payloads[pub][i], &env)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{}
			for _, r := range env["messages"].([]any)[0].(map[string]any)["readings"].([]any) {
				m := r.(map[string]any)
				at := time.UnixMilli(int64(m["timestamp"].(float64))).UnixNano()
				want[fmt.Sprintf("%s|%s.%s|%d", pipelineUUID(lp.agents[pub]), m["deviceName"], m["metric"], at)] = m["value"].(float64)
			}
			got := decodeLines(t, lp.payloads[pub][i])
			if len(got) != readings || len(want) != readings {
				t.Fatalf("publisher %d message %d: %d lines, %d readings, want %d each", pub, i, len(got), len(want), readings)
			}
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("publisher %d message %d: %s = %v (present %v), want %v", pub, i, k, g, ok, v)
				}
				if keys[k] {
					t.Errorf("key %s twice in the load", k)
				}
				keys[k] = true
			}
		}
	}
}

// decodeLines parses line protocol into agent|metric|ns -> value.
func decodeLines(t *testing.T, data []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	dec := lineprotocol.NewDecoderWithBytes(data)
	for dec.Next() {
		m, err := dec.Measurement()
		if err != nil || string(m) != lpMeasurement {
			t.Fatalf("measurement %q: %v", m, err)
		}
		tags := map[string]string{}
		for {
			k, v, err := dec.NextTag()
			if err != nil {
				t.Fatal(err)
			}
			if k == nil {
				break
			}
			tags[string(k)] = string(v)
		}
		var val float64
		var fields int
		for {
			k, v, err := dec.NextField()
			if err != nil {
				t.Fatal(err)
			}
			if k == nil {
				break
			}
			if string(k) != "value" || v.Kind() != lineprotocol.Float {
				t.Fatalf("field %s of kind %v", k, v.Kind())
			}
			val, fields = v.FloatV(), fields+1
		}
		at, err := dec.Time(lineprotocol.Nanosecond, time.Time{})
		if err != nil || fields != 1 || len(tags) != 2 {
			t.Fatalf("line with tags %v, %d fields, time error %v", tags, fields, err)
		}
		out[fmt.Sprintf("%s|%s|%d", tags["agent"], tags["metric"], at.UnixNano())] = val
	}
	return out
}

func TestPublishOptionsValidate(t *testing.T) {
	ok := PublishOptions{Publishers: 4, Messages: 10, Readings: 50, Format: FormatInflux, Timeout: time.Minute}
	for _, tc := range []struct {
		name string
		edit func(*PublishOptions)
		want string // part of the error; "" for none
	}{
		{"influx", func(*PublishOptions) {}, ""},
		{"edgeplat format", func(o *PublishOptions) { o.Format = string(codec.FormatMsgpackDeflate) }, ""},
		{"unknown format", func(o *PublishOptions) { o.Format = "csv" }, "--format"},
		{"no publishers", func(o *PublishOptions) { o.Publishers = 0 }, "--publishers"},
		{"no messages", func(o *PublishOptions) { o.Messages = 0 }, "--messages"},
		{"too many readings", func(o *PublishOptions) { o.Readings = 10_001 }, "--readings"},
		{"negative rate", func(o *PublishOptions) { o.Rate = -1 }, "--rate"},
		{"no timeout", func(o *PublishOptions) { o.Timeout = 0 }, "--timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			err := o.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("validate() = %v, want an error about %s", err, tc.want)
			}
		})
	}
}
