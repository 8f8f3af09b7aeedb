package bacnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

func mustPoints(t *testing.T, dps ...adapters.DataPoint) []point {
	t.Helper()
	ps, err := resolvePoints(dps)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestPollObjects(t *testing.T) {
	ps := mustPoints(t,
		adapters.DataPoint{Name: "a", Register: "ai:1"},
		adapters.DataPoint{Name: "b", Register: "bv:2"},
		adapters.DataPoint{Name: "c", Register: "ai:1/object-name"},
		adapters.DataPoint{Name: "d", Register: "ai:1"},
		adapters.DataPoint{Name: "e", Register: "av:3/units"},
		adapters.DataPoint{Name: "f", Register: "av:4", Unit: "kW"},
	)
	sf, rel := wire.PropStatusFlags, wire.PropReliability
	want := []objectRead{
		{obj: wire.ObjectID{Type: wire.AnalogInput, Instance: 1}, props: []wire.PropertyID{wire.PropPresentValue, sf, rel, wire.PropObjectName}},
		{obj: wire.ObjectID{Type: wire.BinaryValue, Instance: 2}, props: []wire.PropertyID{wire.PropPresentValue, sf, rel}},
		{obj: wire.ObjectID{Type: wire.AnalogValue, Instance: 3}, props: []wire.PropertyID{wire.PropUnits}},
		{obj: wire.ObjectID{Type: wire.AnalogValue, Instance: 4}, props: []wire.PropertyID{wire.PropPresentValue, sf, rel}},
	}
	if got := pollObjects(ps); !reflect.DeepEqual(got, want) {
		t.Fatalf("pollObjects = %+v", got)
	}
	// Units only for analog present-values without a unit of their own.
	wantUnits := []objectRead{{obj: wire.ObjectID{Type: wire.AnalogInput, Instance: 1}, props: []wire.PropertyID{wire.PropUnits}}}
	if got := unitObjects(ps); !reflect.DeepEqual(got, wantUnits) {
		t.Fatalf("unitObjects = %+v", got)
	}
}

func TestPlanRequests(t *testing.T) {
	var dps []adapters.DataPoint
	for i := range 200 {
		dps = append(dps, adapters.DataPoint{Name: fmt.Sprint(i), Register: fmt.Sprintf("ai:%d", i)})
	}
	objs := pollObjects(mustPoints(t, dps...))
	for _, maxAPDU := range []int{50, 128, 206, 480, 1024, 1476} {
		plan := planRequests(objs, maxAPDU)
		n := 0
		for _, group := range plan {
			n += len(group)
			// Every request and its worst-case answer fit, unless one object
			// alone is too large (not the case for three small properties).
			req := requestHeader
			ans := complexAckHeader
			for _, o := range group {
				req += requestSize(o)
				ans += answerSize(o)
			}
			if req > maxAPDU || ans > maxAPDU {
				t.Errorf("maxAPDU %d: a request of %d bytes with an answer of %d", maxAPDU, req, ans)
			}
			// The encoded request is no larger than reckoned.
			specs := make([]wire.ReadAccessSpec, len(group))
			for i, o := range group {
				for _, p := range o.props {
					specs[i].Props = append(specs[i].Props, wire.PropertyRef{ID: p, Index: wire.ArrayAll})
				}
				specs[i].Object = o.obj
			}
			if enc := len(wire.AppendConfirmedRequest(nil, 0, wire.ServiceReadPropertyMultiple, maxAPDU, wire.AppendReadPropertyMultiple(nil, specs))); enc > req {
				t.Errorf("maxAPDU %d: encoded request %d bytes, reckoned %d", maxAPDU, enc, req)
			}
		}
		if n != len(objs) {
			t.Errorf("maxAPDU %d: %d objects planned of %d", maxAPDU, n, len(objs))
		}
		t.Logf("200 analog inputs, maxApdu %d: %d requests", maxAPDU, len(plan))
	}
	if got := planRequests(nil, 1476); len(got) != 0 {
		t.Errorf("empty plan = %v", got)
	}
	// One object larger than the limit still gets a request of its own.
	big := []objectRead{{obj: wire.ObjectID{}, props: []wire.PropertyID{wire.PropObjectList, wire.PropObjectName}}, {obj: wire.ObjectID{Instance: 1}, props: []wire.PropertyID{wire.PropObjectList}}}
	if got := planRequests(big, 50); len(got) != 2 {
		t.Errorf("oversized objects planned as %v", got)
	}
}

// The answer sizes reckoned for small properties hold for the largest
// values they can take, and for an error in their place.
func TestAnswerSizeBound(t *testing.T) {
	obj := wire.ObjectID{Type: wire.AnalogValue, Instance: wire.MaxInstance - 1}
	var payload []byte
	payload = wire.AppendContextObjectID(payload, 0, obj)
	payload = wire.AppendOpening(payload, 1)
	values := []any{uint64(1<<32 - 1), wire.BitString{Len: 4, Bytes: []byte{0xF0}}, wire.Enumerated(1<<16 - 1)}
	props := []wire.PropertyID{wire.PropPresentValue, wire.PropStatusFlags, wire.PropReliability}
	for i, v := range values {
		payload = wire.AppendContextUnsigned(payload, 2, uint64(props[i]))
		payload = wire.AppendOpening(payload, 4)
		payload, _ = wire.AppendApp(payload, v)
		payload = wire.AppendClosing(payload, 4)
	}
	// An error: class and code both above 255.
	payload = wire.AppendContextUnsigned(payload, 2, uint64(wire.PropEventState))
	payload = wire.AppendOpening(payload, 5)
	payload, _ = wire.AppendApp(payload, wire.Enumerated(300))
	payload, _ = wire.AppendApp(payload, wire.Enumerated(300))
	payload = wire.AppendClosing(payload, 5)
	payload = wire.AppendClosing(payload, 1)
	o := objectRead{obj: obj, props: append(props, wire.PropEventState)}
	if got, reckoned := len(payload), answerSize(o); got > reckoned {
		t.Fatalf("answer of %d bytes, reckoned %d", got, reckoned)
	}
}

func TestValueAndQuality(t *testing.T) {
	a := &Adapter{name: "d", id: "u", units: map[wire.ObjectID]string{{Type: wire.AnalogInput, Instance: 1}: "degC"}}
	ok := wire.BitString{Len: 4, Bytes: []byte{0x00}}
	fault := wire.BitString{Len: 4, Bytes: []byte{0x40}}
	oos := wire.BitString{Len: 4, Bytes: []byte{0x10}}
	tests := []struct {
		name     string
		register string
		scale    *float64
		pv       propResult
		sf, rel  propResult
		want     any
		code     string
		unit     string
	}{
		{"analog real", "ai:1", nil, propResult{vals: []any{float32(21.5)}}, propResult{vals: []any{ok}}, propResult{vals: []any{wire.Enumerated(0)}}, 21.5, "", "degC"},
		{"analog double scaled", "ai:1", f64(2), propResult{vals: []any{float64(1.25)}}, propResult{}, propResult{}, 2.5, "", "degC"},
		{"analog unsigned", "av:1", nil, propResult{vals: []any{uint64(7)}}, propResult{}, propResult{}, 7.0, "", ""},
		{"binary active", "bi:1", nil, propResult{vals: []any{wire.Enumerated(1)}}, propResult{vals: []any{ok}}, propResult{}, true, "", ""},
		{"binary boolean", "bv:1", nil, propResult{vals: []any{false}}, propResult{}, propResult{}, false, "", ""},
		{"multi-state", "msv:1", nil, propResult{vals: []any{uint64(3)}}, propResult{}, propResult{}, uint64(3), "", ""},
		{"fault flag", "ai:1", nil, propResult{vals: []any{float32(1)}}, propResult{vals: []any{fault}}, propResult{vals: []any{wire.Enumerated(0)}}, nil, adapters.CodeDeviceFault, ""},
		{"out of service", "bi:1", nil, propResult{vals: []any{wire.Enumerated(0)}}, propResult{vals: []any{oos}}, propResult{}, nil, adapters.CodeOutOfService, ""},
		{"unreliable", "ai:1", nil, propResult{vals: []any{float32(1)}}, propResult{vals: []any{ok}}, propResult{vals: []any{wire.Enumerated(2)}}, nil, adapters.CodeDeviceFault, ""},
		{"status unreadable", "ai:1", nil, propResult{vals: []any{float32(1)}}, propResult{err: &wire.Error{Class: 2, Code: 32}}, propResult{err: &wire.Error{Class: 2, Code: 32}}, 1.0, "", "degC"},
		{"unknown object", "ai:9", nil, propResult{err: &wire.Error{Class: 1, Code: 31}}, propResult{}, propResult{}, nil, adapters.CodeReadError, ""},
		{"bad data kept", "ai:9", nil, propResult{err: adapters.WithCode(adapters.CodeBadData, errors.New("x"))}, propResult{}, propResult{}, nil, adapters.CodeBadData, ""},
		{"analog string", "ai:1", nil, propResult{vals: []any{"x"}}, propResult{}, propResult{}, nil, adapters.CodeBadData, ""},
		{"binary real", "bi:1", nil, propResult{vals: []any{float32(1)}}, propResult{}, propResult{}, nil, adapters.CodeBadData, ""},
		{"multi-state enumerated", "msi:1", nil, propResult{vals: []any{wire.Enumerated(1)}}, propResult{}, propResult{}, nil, adapters.CodeBadData, ""},
		{"two values", "ai:1", nil, propResult{vals: []any{float32(1), float32(2)}}, propResult{}, propResult{}, nil, adapters.CodeBadData, ""},
		{"name", "ai:1/object-name", nil, propResult{vals: []any{"t1"}}, propResult{vals: []any{fault}}, propResult{}, "t1", "", ""},
		{"list", "ai:1/priority-array", nil, propResult{vals: []any{nil, float32(2)}}, propResult{}, propResult{}, []any{nil, 2.0}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPoints(t, adapters.DataPoint{Name: "m", Register: tt.register, Scale: tt.scale})[0]
			o := p.reg.Object
			res := map[propKey]propResult{{o, p.reg.Property}: tt.pv, {o, wire.PropStatusFlags}: tt.sf, {o, wire.PropReliability}: tt.rel}
			r := a.reading(p, res, timeZero)
			if r.QualityCode != tt.code || !reflect.DeepEqual(r.Value, tt.want) || r.Unit != tt.unit {
				t.Fatalf("reading = %+v (%T), want %v %q %q", r, r.Value, tt.want, tt.code, tt.unit)
			}
			if (tt.code == "") != (r.Quality == adapters.Good) {
				t.Fatalf("quality %s with code %q", r.Quality, r.QualityCode)
			}
		})
	}
}

func TestWriteValue(t *testing.T) {
	tests := []struct {
		register string
		scale    *float64
		value    any
		want     any
		prio     uint8
		err      bool
	}{
		{"av:1", nil, json.Number("21.5"), float32(21.5), 0, false},
		{"av:1", f64(0.5), 10.0, float32(20), 0, false},
		{"ao:1", nil, 3, float32(3), 0, false},
		{"av:1", nil, map[string]any{"value": 1.5, "priority": 3.0}, float32(1.5), 3, false},
		{"av:1", nil, map[string]any{"value": nil, "priority": json.Number("9")}, nil, 9, false},
		{"av:1", nil, map[string]any{"value": nil}, nil, 0, false},
		{"bv:1", nil, true, wire.Enumerated(1), 0, false},
		{"bo:1", nil, false, wire.Enumerated(0), 0, false},
		{"msv:1", nil, json.Number("4"), uint64(4), 0, false},
		{"msv:1", nil, uint64(4294967295), uint64(4294967295), 0, false},
		{"av:1", nil, true, nil, 0, true},
		{"av:1", nil, json.Number("1e400"), nil, 0, true},
		{"av:1", nil, 4e38, nil, 0, true},
		{"bv:1", nil, 1.0, nil, 0, true},
		{"bv:1", nil, "true", nil, 0, true},
		{"msv:1", nil, 0.0, nil, 0, true},
		{"msv:1", nil, 2.5, nil, 0, true},
		{"msv:1", nil, 4294967296.0, nil, 0, true},
		{"av:1", nil, map[string]any{"priority": 1.0}, nil, 0, true},
		{"av:1", nil, map[string]any{"value": 1.0, "priority": 0.0}, nil, 0, true},
		{"av:1", nil, map[string]any{"value": 1.0, "priority": 2.5}, nil, 0, true},
		{"av:1", nil, map[string]any{"value": 1.0, "extra": 1}, nil, 0, true},
		{"av:1", nil, []any{1.0}, nil, 0, true},
	}
	for _, tt := range tests {
		p := mustPoints(t, adapters.DataPoint{Name: "m", Register: tt.register, Scale: tt.scale})[0]
		got, prio, err := writeValue(p, tt.value)
		var fe *adapters.FieldError
		switch {
		case tt.err && (!errors.As(err, &fe) || fe.Field != "value"):
			t.Errorf("writeValue(%s, %v) = %v, %v; want a field error on value", tt.register, tt.value, got, err)
		case !tt.err && (err != nil || got != tt.want || prio != tt.prio):
			t.Errorf("writeValue(%s, %v) = %v (%T), %d, %v; want %v %d", tt.register, tt.value, got, got, prio, err, tt.want, tt.prio)
		}
	}
}

var timeZero = time.Time{}
