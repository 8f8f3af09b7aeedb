package bacnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

// defaultPriority is the write priority when neither the data point nor
// the write names one: 16, the lowest, as BACnet tools default to.
const defaultPriority = 16

// Write writes the present-value of a configured data point, named by
// register, or of an "<object-type>:<instance>[@<priority>]" address. value
// is a JSON value of the object's type (a number for analog objects, a
// boolean for binary ones, an integer from 1 for multi-state ones), or an
// object {"value": v, "priority": 1..16} whose value may be null to
// relinquish that priority. It returns the present-value read back after
// the write, which differs from the value written while a higher priority
// commands the object.
func (a *Adapter) Write(ctx context.Context, register string, value any) (any, error) {
	p, err := a.writeTarget(register)
	if err != nil {
		return nil, err
	}
	v, prio, err := writeValue(p, value)
	if err != nil {
		return nil, err
	}
	if prio == 0 {
		prio = p.reg.Priority
	}
	if prio == 0 {
		prio = defaultPriority
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.c == nil {
		return nil, adapters.WithCode(adapters.CodeDeviceOffline, errNotConnected)
	}
	s := a.sess
	ref := wire.PropertyRef{ID: wire.PropPresentValue, Index: wire.ArrayAll}
	payload, err := wire.AppendWriteProperty(nil, p.reg.Object, ref, v, prio)
	if err != nil {
		return nil, fmt.Errorf("bacnet: encode write of %s: %w", p.reg, err)
	}
	_, err = s.c.request(ctx, s.peer, wire.ServiceWriteProperty, payload, s.timeout)
	at := time.Now()
	if err != nil {
		err = fmt.Errorf("bacnet: write-property %s priority %d: %w", p.reg.Object, prio, err)
		if deviceAnswer(err) {
			var qe *adapters.QualityError
			if !errors.As(err, &qe) {
				err = adapters.WithCode(adapters.CodeReadError, err)
			}
		}
		a.recordWrite(1, err, at)
		return nil, err
	}
	a.log.Info("wrote value", "object", p.reg.Object.String(), "priority", prio, "value", v)
	s.rp = 0
	vals, rerr := s.readProperty(ctx, p.reg.Object, ref)
	a.recordWrite(1+s.rp, nil, at)
	if rerr != nil {
		a.log.Debug("read back after write", "object", p.reg.Object.String(), "err", rerr)
		return plain(v), nil
	}
	now, err := a.value(p, map[propKey]propResult{{p.reg.Object, wire.PropPresentValue}: {vals: vals}})
	if err != nil {
		return plain(v), nil
	}
	return now, nil
}

// writeTarget finds the point a write goes to.
func (a *Adapter) writeTarget(register string) (point, error) {
	if i, ok := a.byName[register]; ok {
		p := a.points[i]
		if !p.isPresentValue() {
			return p, adapters.Fieldf("register", "%s reads %s; only present-value is writable", register, p.reg.Property)
		}
		return p, nil
	}
	reg, err := ParseRegister(register)
	if err != nil {
		return point{}, adapters.Fieldf("register", "neither a data point name nor an address: %v", err)
	}
	if reg.Property != wire.PropPresentValue {
		return point{}, adapters.Fieldf("register", "%s: only present-value is writable", register)
	}
	return point{dp: adapters.DataPoint{Name: register, Register: register}, reg: reg, kind: kindOf(reg.Object.Type), scale: 1}, nil
}

// writeValue checks value against the point's object type and returns
// the value to encode and the priority the write body asks for (0: none).
// Problems are a *adapters.FieldError on "value".
func writeValue(p point, value any) (any, uint8, error) {
	var prio uint8
	if obj, ok := value.(map[string]any); ok {
		for k := range obj {
			if k != "value" && k != "priority" {
				return nil, 0, adapters.Fieldf("value", "unknown key %q; want {\"value\": ..., \"priority\": 1..16}", k)
			}
		}
		v, ok := obj["value"]
		if !ok {
			return nil, 0, adapters.Fieldf("value", "object form needs a \"value\" (null relinquishes the priority)")
		}
		if raw, ok := obj["priority"]; ok {
			n, err := toFloat(raw)
			if err != nil || n != math.Trunc(n) || n < 1 || n > 16 {
				return nil, 0, adapters.Fieldf("value", "priority must be an integer 1..16, got %v", raw)
			}
			prio = uint8(n)
		}
		if v == nil {
			return nil, prio, nil // relinquish: a Null at this priority
		}
		value = v
	}
	bad := func(format string, args ...any) (any, uint8, error) {
		return nil, 0, adapters.Fieldf("value", format, args...)
	}
	switch p.kind {
	case binary:
		b, ok := value.(bool)
		if !ok {
			return bad("%s is binary: want true or false, got %T %v", p.reg.Object, value, value)
		}
		if b {
			return wire.Enumerated(1), prio, nil
		}
		return wire.Enumerated(0), prio, nil
	case analog:
		f, err := toFloat(value)
		if err != nil {
			return bad("%s is analog: %v", p.reg.Object, err)
		}
		f /= p.scale
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > math.MaxFloat32 {
			return bad("%v is out of the real range", value)
		}
		return float32(f), prio, nil
	case multiState:
		f, err := toFloat(value)
		if err != nil {
			return bad("%s is multi-state: %v", p.reg.Object, err)
		}
		if f != math.Trunc(f) || f < 1 || f > math.MaxUint32 {
			return bad("%s is multi-state: want a state number 1..%d, got %v", p.reg.Object, uint32(math.MaxUint32), value)
		}
		return uint64(f), prio, nil
	}
	return bad("%s cannot be written", p.reg.Object)
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", string(x))
		}
		return f, nil
	}
	return 0, fmt.Errorf("want a number, got %T %v", v, v)
}
