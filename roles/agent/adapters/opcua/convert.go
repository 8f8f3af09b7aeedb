package opcua

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/gopcua/opcua/ua"
)

// errBadData marks a value that cannot become a JSON reading.
var errBadData = errors.New("value cannot be represented")

// builtinNames spells the built-in types as OPC-UA Part 6 does; gopcua's
// own names differ in case ("Uint16", "NodeID").
var builtinNames = map[ua.TypeID]string{
	ua.TypeIDNull: "Null", ua.TypeIDBoolean: "Boolean", ua.TypeIDSByte: "SByte", ua.TypeIDByte: "Byte",
	ua.TypeIDInt16: "Int16", ua.TypeIDUint16: "UInt16", ua.TypeIDInt32: "Int32", ua.TypeIDUint32: "UInt32",
	ua.TypeIDInt64: "Int64", ua.TypeIDUint64: "UInt64", ua.TypeIDFloat: "Float", ua.TypeIDDouble: "Double",
	ua.TypeIDString: "String", ua.TypeIDDateTime: "DateTime", ua.TypeIDGUID: "Guid", ua.TypeIDByteString: "ByteString",
	ua.TypeIDXMLElement: "XmlElement", ua.TypeIDNodeID: "NodeId", ua.TypeIDExpandedNodeID: "ExpandedNodeId",
	ua.TypeIDStatusCode: "StatusCode", ua.TypeIDQualifiedName: "QualifiedName", ua.TypeIDLocalizedText: "LocalizedText",
	ua.TypeIDExtensionObject: "ExtensionObject", ua.TypeIDDataValue: "DataValue", ua.TypeIDVariant: "Variant",
	ua.TypeIDDiagnosticInfo: "DiagnosticInfo",
}

// nodeType is the OPC-UA built-in type name of v ("Double", "Int32").
func nodeType(v *ua.Variant) string {
	if v == nil {
		return "Null"
	}
	if name, ok := builtinNames[v.Type()]; ok {
		return name
	}
	return strings.TrimPrefix(v.Type().String(), "TypeID")
}

// jsonValue turns a variant's Go value into one encoding/json can write:
// numbers, bools, strings, times and slices of those. NaN and infinities
// are BAD_DATA because JSON has no spelling for them.
func jsonValue(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool, string, int8, uint8, int16, uint16, int32, uint32, int64, uint64:
		return x, nil
	case float32:
		return finite(float64(x))
	case float64:
		return finite(x)
	case time.Time:
		return x.UTC(), nil
	case []byte:
		// ByteString and Byte[] both arrive as []byte; the JSON encoder
		// writes them as base64, which is what ByteString means.
		return x, nil
	case *ua.LocalizedText:
		if x == nil {
			return nil, nil
		}
		return x.Text, nil
	case *ua.QualifiedName:
		if x == nil {
			return nil, nil
		}
		return qualifiedName(x), nil
	case *ua.NodeID:
		return x.String(), nil
	case *ua.ExpandedNodeID:
		return x.String(), nil
	case *ua.GUID:
		return x.String(), nil
	case ua.StatusCode:
		return uint32(x), nil
	case *ua.ExtensionObject:
		if x == nil || x.Value == nil {
			return nil, fmt.Errorf("%w: extension object of unknown type", errBadData)
		}
		return x.Value, nil
	case *ua.DataValue, *ua.Variant, *ua.DiagnosticInfo, ua.XMLElement:
		return nil, fmt.Errorf("%w: %T", errBadData, v)
	}
	// Arrays arrive as typed slices, matrices as nested ones.
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice {
		out := make([]any, rv.Len())
		for i := range out {
			e, err := jsonValue(rv.Index(i).Interface())
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %T", errBadData, v)
}

func finite(f float64) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%w: %v", errBadData, f)
	}
	return f, nil
}

func qualifiedName(q *ua.QualifiedName) string {
	if q.NamespaceIndex == 0 {
		return q.Name
	}
	return strconv.Itoa(int(q.NamespaceIndex)) + ":" + q.Name
}

// toFloat returns a scalar number as float64.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int8:
		return float64(x), true
	case uint8:
		return float64(x), true
	case int16:
		return float64(x), true
	case uint16:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// shape applies the data point's scale and type to a JSON value. The
// scale multiplies numbers only (a scaled number becomes a float64); the
// type then coerces, and a value that cannot be coerced is BAD_DATA.
func shape(p point, v any) (any, error) {
	if p.Scale != nil && *p.Scale != 1 {
		if f, ok := toFloat(v); ok {
			scaled, err := finite(f * *p.Scale)
			if err != nil {
				return nil, err
			}
			v = scaled
		}
	}
	switch p.kind {
	case "":
		return v, nil
	case "float":
		if b, ok := v.(bool); ok {
			return boolNumber(b), nil
		}
		if f, ok := toFloat(v); ok {
			return f, nil
		}
		if s, ok := v.(string); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return finite(f)
			}
		}
	case "int":
		if b, ok := v.(bool); ok {
			return int64(boolNumber(b)), nil
		}
		if u, ok := v.(uint64); ok {
			return u, nil
		}
		if f, ok := toFloat(v); ok && f >= math.MinInt64 && f < math.MaxInt64 {
			return int64(math.Round(f)), nil
		}
		if s, ok := v.(string); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
				return n, nil
			}
		}
	case "bool":
		if b, ok := v.(bool); ok {
			return b, nil
		}
		if f, ok := toFloat(v); ok {
			return f != 0, nil
		}
		if s, ok := v.(string); ok {
			if b, err := strconv.ParseBool(strings.TrimSpace(s)); err == nil {
				return b, nil
			}
		}
	case "string":
		switch x := v.(type) {
		case string:
			return x, nil
		case time.Time:
			return x.Format(time.RFC3339Nano), nil
		case nil:
		default:
			if _, isSlice := x.([]any); !isSlice {
				return fmt.Sprint(x), nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %T does not convert to %s", errBadData, v, p.Type)
}

func boolNumber(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// reading turns one DataValue into the reading of p.
func (a *Adapter) reading(p point, dv *ua.DataValue, now time.Time) adapters.Reading {
	r := adapters.Reading{
		DeviceName: a.ep.Name, DeviceID: a.ep.UUID, Metric: p.Name, Unit: p.Unit,
		Timestamp: now, Protocol: Protocol,
	}
	if dv == nil {
		return a.bad(r, adapters.WithCode(adapters.CodeBadData, errors.New("server returned no value")))
	}
	switch {
	case !dv.SourceTimestamp.IsZero():
		r.Timestamp = dv.SourceTimestamp.UTC()
	case !dv.ServerTimestamp.IsZero():
		r.Timestamp = dv.ServerTimestamp.UTC()
	}
	r.NodeType = nodeType(dv.Value)
	if !isGood(dv.Status) {
		return a.bad(r, statusError(dv.Status))
	}
	var raw any
	if dv.Value != nil {
		raw = dv.Value.Value()
	}
	v, err := jsonValue(raw)
	if err == nil {
		v, err = shape(p, v)
	}
	if err != nil {
		return a.bad(r, adapters.WithCode(adapters.CodeBadData, fmt.Errorf("node %s: %w", p.Register, err)))
	}
	r.Value = v
	r.Quality = adapters.Good
	return r
}

func (a *Adapter) bad(r adapters.Reading, err error) adapters.Reading {
	r.Value = nil
	r.Quality = adapters.Bad
	r.QualityCode = adapters.Classify(err)
	a.stats.noteError(err)
	return r
}
