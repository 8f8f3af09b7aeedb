package modbus

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Write writes value to a configured data point, named by register, or to
// a "<area>:<index>[@<unit>]" address; an address that is no data point
// is written as a uint16 register or a coil. Only holding registers and
// coils are writable. It returns the value now held by the device, in the
// data point's units: with a scale, value/scale is rounded to the nearest
// integer (halves away from zero) for the integer types, so the returned
// value may differ from the one asked for.
func (a *Adapter) Write(ctx context.Context, register string, value any) (any, error) {
	p, err := a.writeTarget(register)
	if err != nil {
		return nil, err
	}
	raw, written, err := checkValue(p, value)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn == nil {
		return nil, adapters.WithCode(adapters.CodeDeviceOffline, errNotConnected)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("modbus: write %s: %w", p.reg, err)
	}
	a.conn.setUnit(p.unit)
	a.conn.setTimeout(requestTimeout(ctx, a.cfg.Timeout()))
	err = a.send(p, raw)
	at := time.Now()
	if err != nil {
		err = fmt.Errorf("modbus: write %s of unit %d: %w", p.reg, p.unit, err)
		qerr, transportErr := classifyRequestError(err)
		if transportErr {
			// The connection is broken; goburrow dials again on the next
			// request, so the runner's next poll finds out by itself.
			_ = a.conn.Close()
		} else {
			a.resyncIfNeeded(qerr)
		}
		a.recordWrite(qerr, at)
		return nil, qerr
	}
	a.recordWrite(nil, at)
	a.log.Info("wrote value", "register", p.reg.String(), "unit", p.unit, "value", written)
	return written, nil
}

func (a *Adapter) send(p point, raw any) error {
	if p.reg.Area == Coil {
		var v uint16
		if raw.(bool) {
			v = 0xFF00 // the only ON value the protocol allows
		}
		_, err := a.conn.WriteSingleCoil(p.reg.Index, v)
		return err
	}
	regs, err := encodeRegisters(raw, p.typ, p.layout)
	if err != nil {
		return adapters.WithCode(adapters.CodeBadData, err)
	}
	if len(regs) == 2 {
		_, err = a.conn.WriteSingleRegister(p.reg.Index, binary.BigEndian.Uint16(regs))
		return err
	}
	_, err = a.conn.WriteMultipleRegisters(p.reg.Index, uint16(len(regs)/2), regs)
	return err
}

// writeTarget finds the point a write goes to.
func (a *Adapter) writeTarget(register string) (point, error) {
	var p point
	if i, ok := a.byName[register]; ok {
		p = a.points[i]
	} else {
		reg, err := ParseRegister(register)
		if err != nil {
			return p, adapters.Fieldf("register", "neither a data point name nor an address: %v", err)
		}
		p = point{
			dp: adapters.DataPoint{Name: register, Register: register}, reg: reg, unit: uint8(a.cfg.UnitID),
			typ: Uint16, scale: 1,
			layout: layout{littleBytes: a.cfg.ByteOrder == "little", littleWords: a.cfg.WordOrder == "little"},
		}
		if reg.HasUnit {
			p.unit = reg.Unit
		}
		if reg.Area.IsBit() {
			p.typ = Bool
		}
	}
	if !p.reg.Area.Writable() {
		return p, adapters.Fieldf("register", "%s is a %s; only holding registers and coils are writable", register, p.reg.Area)
	}
	return p, nil
}

// number is a JSON or Go number kept exact where it can be: a uint64
// counter near its maximum would lose its low bits in a float64.
type number struct {
	f     float64
	i     int64
	u     uint64
	exact int // 0: only f; 1: i is exact; 2: u is exact (and > MaxInt64)
}

func toNumber(v any) (number, error) {
	switch x := v.(type) {
	case float64:
		return number{f: x}, nil
	case float32:
		return number{f: float64(x)}, nil
	case int:
		return number{f: float64(x), i: int64(x), exact: 1}, nil
	case int8:
		return number{f: float64(x), i: int64(x), exact: 1}, nil
	case int16:
		return number{f: float64(x), i: int64(x), exact: 1}, nil
	case int32:
		return number{f: float64(x), i: int64(x), exact: 1}, nil
	case int64:
		return number{f: float64(x), i: x, exact: 1}, nil
	case uint8:
		return number{f: float64(x), i: int64(x), exact: 1}, nil
	case uint16:
		return number{f: float64(x), i: int64(x), exact: 1}, nil
	case uint32:
		return number{f: float64(x), i: int64(x), exact: 1}, nil
	case uint:
		return fromUint(uint64(x)), nil
	case uint64:
		return fromUint(x), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return number{f: float64(i), i: i, exact: 1}, nil
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return fromUint(u), nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return number{}, fmt.Errorf("%q is not a number", string(x))
		}
		return number{f: f}, nil
	}
	return number{}, fmt.Errorf("want a number, got %T", v)
}

func fromUint(u uint64) number {
	if u <= math.MaxInt64 {
		return number{f: float64(u), i: int64(u), exact: 1}
	}
	return number{f: float64(u), u: u, exact: 2}
}

// Integer ranges of the register types.
var (
	intMin = map[Type]int64{Int16: math.MinInt16, Int32: math.MinInt32, Int64: math.MinInt64}
	intMax = map[Type]int64{Int16: math.MaxInt16, Int32: math.MaxInt32, Int64: math.MaxInt64}
	uinMax = map[Type]uint64{Uint16: math.MaxUint16, Uint32: math.MaxUint32, Uint64: math.MaxUint64}
)

// checkValue checks value against the point's type and returns the raw
// value to encode (bool, int64, uint64 or float64) and the value the
// device will hold afterwards in engineering units. Problems are a
// *adapters.FieldError on "value".
func checkValue(p point, value any) (raw, written any, err error) {
	bad := func(format string, args ...any) (any, any, error) {
		return nil, nil, adapters.Fieldf("value", format, args...)
	}
	if p.typ == Bool {
		b, ok := value.(bool)
		if !ok {
			return bad("%s is a bool, got %T %v", p.dp.Name, value, value)
		}
		return b, b, nil
	}
	n, err := toNumber(value)
	if err != nil {
		return bad("%s is a %s: %v", p.dp.Name, p.typ, err)
	}
	if math.IsNaN(n.f) || math.IsInf(n.f, 0) {
		return bad("%v is not a finite number", n.f)
	}
	if p.scale != 1 {
		// The scale is a float anyway; exactness is gone.
		n = number{f: n.f / p.scale}
		if p.typ.isInt() || p.typ.isUint() {
			n.f = math.Round(n.f)
		}
	}
	switch {
	case p.typ == Float32:
		if math.Abs(n.f) > math.MaxFloat32 {
			return bad("%v is out of the float32 range", n.f)
		}
		return n.f, float64(float32(n.f)) * p.scale, nil
	case p.typ == Float64:
		if math.IsInf(n.f, 0) {
			return bad("%v is out of the float64 range", n.f)
		}
		return n.f, n.f * p.scale, nil
	case p.typ.isInt():
		lo, hi := intMin[p.typ], intMax[p.typ]
		var i int64
		switch n.exact {
		case 1:
			i = n.i
		case 2:
			return bad("%d is out of the %s range %d..%d", n.u, p.typ, lo, hi)
		default:
			if n.f != math.Trunc(n.f) {
				return bad("%s is an integer, got %v", p.typ, n.f)
			}
			// 2^63 as a float64 is one past MaxInt64.
			if n.f < float64(lo) || n.f >= -float64(math.MinInt64) || n.f > float64(hi) {
				return bad("%v is out of the %s range %d..%d", n.f, p.typ, lo, hi)
			}
			i = int64(n.f)
		}
		if i < lo || i > hi {
			return bad("%d is out of the %s range %d..%d", i, p.typ, lo, hi)
		}
		return i, scaled(float64(i), i, p.scale), nil
	case p.typ.isUint():
		hi := uinMax[p.typ]
		var u uint64
		switch n.exact {
		case 1:
			if n.i < 0 {
				return bad("%d is out of the %s range 0..%d", n.i, p.typ, hi)
			}
			u = uint64(n.i)
		case 2:
			u = n.u
		default:
			if n.f != math.Trunc(n.f) {
				return bad("%s is an integer, got %v", p.typ, n.f)
			}
			if n.f < 0 || n.f >= 2*float64(1<<63) || n.f > float64(hi) {
				return bad("%v is out of the %s range 0..%d", n.f, p.typ, hi)
			}
			u = uint64(n.f)
		}
		if u > hi {
			return bad("%d is out of the %s range 0..%d", u, p.typ, hi)
		}
		return u, scaled(float64(u), u, p.scale), nil
	}
	return nil, nil, errors.New("modbus: unsupported type " + p.typ.String())
}

// scaled returns what a poll would report for the raw value: the natural
// type unscaled, a float64 when scaled.
func scaled[T int64 | uint64](f float64, natural T, scale float64) any {
	if scale == 1 {
		return natural
	}
	return f * scale
}
