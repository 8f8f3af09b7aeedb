package simulation

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

func endpoint(conn string, dps ...adapters.DataPoint) adapters.Endpoint {
	return adapters.Endpoint{UUID: "u-1", Name: "sim", Protocol: Protocol, Connection: json.RawMessage(conn), DataPoints: dps}
}

func dp(name, register string) adapters.DataPoint {
	return adapters.DataPoint{Name: name, Register: register}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		ep     adapters.Endpoint
		fields []string
	}{
		{"valid", endpoint(`{"scenario":"fault","seed":3}`, dp("t", "temperature"), dp("p", "pressure")), nil},
		{"no data points", endpoint(`{"scenario":"steady"}`), nil},
		{"missing scenario", endpoint(`{}`), []string{"connection.scenario"}},
		{"empty connection", endpoint(``), []string{"connection.scenario"}},
		{"unknown scenario", endpoint(`{"scenario":"chaos"}`), []string{"connection.scenario"}},
		{"unknown key", endpoint(`{"scenario":"steady","host":"x"}`), []string{"connection.host"}},
		{"seed type", endpoint(`{"scenario":"steady","seed":-1}`), []string{"connection.seed"}},
		{"not an object", endpoint(`[1]`), []string{"connection"}},
		{"unknown signal", endpoint(`{"scenario":"steady"}`, dp("h", "humidity")), []string{"data_points[0].register"}},
		{"duplicate name", endpoint(`{"scenario":"steady"}`, dp("t", "temperature"), dp("t", "pressure")), []string{"data_points[1].name"}},
		{"every problem", endpoint(`{"scenario":"nope","port":1}`), []string{"connection.port", "connection.scenario"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := NewDriver(nil).Validate(tt.ep)
			if got := adapters.FieldsOf(err); !slices.Equal(got, tt.fields) {
				t.Errorf("fields %v, want %v (%v)", got, tt.fields, err)
			}
		})
	}
	ep := endpoint(`{"scenario":"steady"}`)
	ep.Protocol = "modbus"
	if got := adapters.FieldsOf(NewDriver(nil).Validate(ep)); !slices.Equal(got, []string{"protocol"}) {
		t.Errorf("another protocol: fields %v", got)
	}
}

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestOutageLooksLikeALostPeer: the outage device's poll fails with BAD
// DEVICE_OFFLINE readings, connections are refused (CONNECTION_REFUSED)
// for the outage, and afterwards it answers again.
func TestOutageLooksLikeALostPeer(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := NewDriver(c.now)
	a, err := d.New(endpoint(`{"scenario":"outage","seed":5}`, dp("t", "temperature"), dp("p", "pressure")), adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	var polls int
	for {
		rs, err := a.Poll(ctx)
		polls++
		if err != nil {
			if got := adapters.Classify(err); got != adapters.CodeDeviceOffline {
				t.Fatalf("lost poll classified %s (%v)", got, err)
			}
			if len(rs) != 2 || rs[0].Quality != adapters.Bad || rs[0].QualityCode != adapters.CodeDeviceOffline {
				t.Fatalf("lost poll readings %+v", rs)
			}
			break
		}
		if polls > outageUpMin+outageUpSpread {
			t.Fatalf("no outage in %d polls", polls)
		}
		c.t = c.t.Add(time.Second)
	}
	_ = a.Close()
	c.t = c.t.Add(outageDown - time.Millisecond)
	if err := a.Connect(ctx); adapters.Classify(err) != adapters.CodeConnectionRefused {
		t.Fatalf("connect during the outage: %v (%s)", err, adapters.Classify(err))
	}
	if _, err := a.Poll(ctx); err == nil {
		t.Fatal("poll without a connection succeeded")
	}
	c.t = c.t.Add(time.Millisecond)
	if err := a.Connect(ctx); err != nil {
		t.Fatalf("connect after the outage: %v", err)
	}
	rs, err := a.Poll(ctx)
	if err != nil || len(rs) != 2 || rs[0].Quality != adapters.Good {
		t.Fatalf("poll after the outage: %+v %v", rs, err)
	}
	if got, want := d.Produced("u-1"), int64(2*polls+2); got != want {
		t.Errorf("produced %d readings, want %d", got, want)
	}
}

// TestSchemaDriftFrames: the frames handed to Env.Frame, as MQTT's are,
// lose the humidity field after vanishAfter polls, and so do the
// readings; a fault's BAD sample is null in the frame and a BAD reading
// with its code.
func TestSchemaDriftFrames(t *testing.T) {
	ctx := context.Background()
	var got []map[string]any
	env := adapters.Env{Frame: func(b []byte, _ time.Time) {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("frame %s: %v", b, err)
		}
		got = append(got, m)
	}}
	a, err := NewDriver(nil).New(endpoint(`{"scenario":"schema-drift"}`, dp("t", "temperature"), dp("h", "humidity")), env)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range vanishAfter + 5 {
		rs, err := a.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, inFrame := got[i][vanishingField]
		hasReading := slices.ContainsFunc(rs, func(r adapters.Reading) bool { return r.Metric == "h" })
		if want := i < vanishAfter; inFrame != want || hasReading != want {
			t.Fatalf("poll %d: humidity in frame %v, reading %v; want %v", i, inFrame, hasReading, want)
		}
		if _, ok := got[i]["pressure"]; !ok {
			t.Fatalf("poll %d: frame %v lacks pressure, which no data point reads", i, got[i])
		}
	}

	got = nil
	f, err := NewDriver(nil).New(endpoint(`{"scenario":"fault"}`, dp("t", "temperature"), dp("p", "pressure")), env)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Connect(ctx)
	rs, _ := f.Poll(ctx) // the first poll has a BAD sample
	i := slices.IndexFunc(rs, func(r adapters.Reading) bool { return r.Quality == adapters.Bad })
	if i < 0 || rs[i].Value != nil || !slices.Contains(faultCodes, rs[i].QualityCode) {
		t.Fatalf("fault readings %+v: want a BAD one with a fault code", rs)
	}
	if v, ok := got[0][map[string]string{"t": "temperature", "p": "pressure"}[rs[i].Metric]]; !ok || v != nil {
		t.Errorf("frame %v: the BAD field should be null", got[0])
	}
	if !strings.HasPrefix(rs[i].DeviceName, "sim") {
		t.Errorf("device name %q", rs[i].DeviceName)
	}
}

// FuzzParseConfig: any connection object either parses to a known
// scenario or fails with field errors naming connection keys; it never
// panics.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{`{"scenario":"steady","seed":1}`, `{}`, `{"scenario":null}`, `{"seed":"x","a":1}`, `[`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, sc, err := ParseConfig(raw)
		if err == nil {
			if sc.Name != c.Scenario || sc.Name == "" {
				t.Fatalf("parsed %q to scenario %q", raw, sc.Name)
			}
			return
		}
		for _, f := range adapters.FieldsOf(err) {
			if !strings.HasPrefix(f, "connection") {
				t.Fatalf("%q: error field %q is no connection key", raw, f)
			}
		}
	})
}
