package bacnet

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

// point is a validated data point.
type point struct {
	dp    adapters.DataPoint
	reg   Register
	kind  kind
	scale float64
}

// isPresentValue reports whether the point reads the object's value, the
// only property status-flags and units qualify.
func (p point) isPresentValue() bool { return p.reg.Property == wire.PropPresentValue }

// resolvePoints validates every data point of an endpoint: names present
// and unique (a reading's metric is the name), a register that parses,
// and no Modbus-only fields. Every problem is returned, joined.
func resolvePoints(dps []adapters.DataPoint) ([]point, error) {
	var errs []error
	points := make([]point, 0, len(dps))
	seen := make(map[string]int, len(dps))
	for i, dp := range dps {
		field := fmt.Sprintf("data_points[%d]", i)
		fail := func(sub, format string, args ...any) {
			errs = append(errs, adapters.Fieldf(field+"."+sub, format, args...))
		}
		if strings.TrimSpace(dp.Name) == "" {
			fail("name", "required")
		} else if j, dup := seen[dp.Name]; dup {
			fail("name", "duplicate of data_points[%d].name %q", j, dp.Name)
		} else {
			seen[dp.Name] = i
		}
		p := point{dp: dp, scale: dp.ScaleOr1()}
		reg, err := ParseRegister(dp.Register)
		if err != nil {
			fail("register", "%v", err)
		} else {
			p.reg, p.kind = reg, kindOf(reg.Object.Type)
		}
		if dp.Type != "" {
			fail("type", "not used by bacnet: the object type decides the value type")
		}
		if dp.ByteOrder != "" || dp.WordOrder != "" {
			fail("byte_order", "byte_order and word_order are Modbus settings")
		}
		if dp.Scale != nil {
			s := *dp.Scale
			switch {
			case s == 0 || math.IsNaN(s) || math.IsInf(s, 0):
				fail("scale", "must be a non-zero finite number, got %v", s)
			case err == nil && (p.kind != analog || !p.isPresentValue()) && s != 1:
				fail("scale", "applies only to the present-value of analog objects")
			}
		}
		points = append(points, p)
	}
	return points, errors.Join(errs...)
}

// objectRead is one object and the properties to read from it.
type objectRead struct {
	obj   wire.ObjectID
	props []wire.PropertyID
}

// pollObjects lists the objects of points in first-seen order with each
// point's property and, for the quality of a present-value, status-flags
// and reliability.
func pollObjects(points []point) []objectRead {
	return groupObjects(points, func(p point) []wire.PropertyID {
		if !p.isPresentValue() {
			return []wire.PropertyID{p.reg.Property}
		}
		return []wire.PropertyID{p.reg.Property, wire.PropStatusFlags, wire.PropReliability}
	})
}

// unitObjects lists the analog objects whose present-value is read by a
// point without a unit of its own: their units property is read once at
// connect.
func unitObjects(points []point) []objectRead {
	return groupObjects(points, func(p point) []wire.PropertyID {
		if p.kind != analog || !p.isPresentValue() || p.dp.Unit != "" {
			return nil
		}
		return []wire.PropertyID{wire.PropUnits}
	})
}

func groupObjects(points []point, props func(point) []wire.PropertyID) []objectRead {
	var out []objectRead
	index := map[wire.ObjectID]int{}
	for _, p := range points {
		for _, prop := range props(p) {
			i, ok := index[p.reg.Object]
			if !ok {
				i = len(out)
				index[p.reg.Object] = i
				out = append(out, objectRead{obj: p.reg.Object})
			}
			if !containsProp(out[i].props, prop) {
				out[i].props = append(out[i].props, prop)
			}
		}
	}
	return out
}

func containsProp(ps []wire.PropertyID, p wire.PropertyID) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// Sizes, in bytes, the planner reckons with. An answer's property costs
// its reference, the brackets and the value; a small value (a real, an
// enumeration, status-flags) or an error fits in 7 bytes, a property of
// another kind (a name, a list) is reckoned at 64.
const (
	complexAckHeader  = 3
	requestHeader     = 4
	objectOverhead    = 7 // object id and the brackets of its list
	propertyRefSize   = 4
	smallValueSize    = 7
	unknownValueSize  = 64
	requestPropertyID = 4
)

var smallProps = map[wire.PropertyID]bool{
	wire.PropPresentValue: true, wire.PropStatusFlags: true, wire.PropReliability: true,
	wire.PropUnits: true, wire.PropOutOfService: true, wire.PropEventState: true,
	wire.PropObjectType: true, wire.PropNumberOfStates: true, wire.PropObjectIdentifier: true,
	wire.PropCOVIncrement: true, wire.PropMinPresValue: true, wire.PropMaxPresValue: true,
	wire.PropRelinquishDefault: true, wire.PropMaxAPDULength: true, wire.PropVendorIdentifier: true,
	wire.PropSegmentationSupport: true,
}

func answerSize(o objectRead) int {
	n := objectOverhead
	for _, p := range o.props {
		n += propertyRefSize + 2
		if smallProps[p] {
			n += smallValueSize
		} else {
			n += unknownValueSize
		}
	}
	return n
}

func requestSize(o objectRead) int { return objectOverhead + requestPropertyID*len(o.props) }

// planRequests packs objects, in order, into ReadPropertyMultiple requests
// whose request and expected answer both fit maxAPDU, so that no answer
// needs segmentation. An object too large on its own gets a request of its
// own.
func planRequests(objs []objectRead, maxAPDU int) [][]objectRead {
	var out [][]objectRead
	var cur []objectRead
	req, ans := requestHeader, complexAckHeader
	for _, o := range objs {
		r, a := requestSize(o), answerSize(o)
		if len(cur) > 0 && (req+r > maxAPDU || ans+a > maxAPDU) {
			out = append(out, cur)
			cur, req, ans = nil, requestHeader, complexAckHeader
		}
		cur = append(cur, o)
		req, ans = req+r, ans+a
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
