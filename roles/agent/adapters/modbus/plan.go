package modbus

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// point is a validated data point with everything Poll and Write need
// precomputed.
type point struct {
	dp     adapters.DataPoint
	reg    Register
	unit   uint8
	typ    Type
	layout layout
	scale  float64
}

// length is how many registers (bits for coils and discrete inputs) the
// point occupies.
func (p point) length() int {
	if p.reg.Area.IsBit() {
		return 1
	}
	return p.typ.Words()
}

func (p point) end() int { return int(p.reg.Index) + p.length() }

// resolvePoint checks one data point against the connection and returns
// its point. field is the JSON path prefix used in errors
// ("data_points[2]"). Every problem is returned, joined.
func resolvePoint(dp adapters.DataPoint, c Config, field string) (point, error) {
	var errs []error
	fail := func(sub, format string, args ...any) {
		errs = append(errs, adapters.Fieldf(field+"."+sub, format, args...))
	}
	p := point{dp: dp, scale: dp.ScaleOr1()}
	reg, err := ParseRegister(dp.Register)
	if err != nil {
		fail("register", "%v", err)
		return p, errors.Join(errs...)
	}
	p.reg = reg
	p.unit = uint8(c.UnitID)
	if reg.HasUnit {
		p.unit = reg.Unit
	}
	switch {
	case dp.Type != "":
		t, err := ParseType(dp.Type)
		if err != nil {
			fail("type", "%v", err)
		}
		p.typ = t
	case reg.Area.IsBit():
		p.typ = Bool
	default:
		p.typ = Uint16
	}
	if p.typ != 0 {
		if reg.Area.IsBit() && p.typ != Bool {
			fail("type", "%s cannot be read from a %s; bits are bool", p.typ, reg.Area)
		}
		if !reg.Area.IsBit() && p.typ.Words() > c.MaxCount {
			fail("type", "%s needs %d registers but connection.maxCount is %d", p.typ, p.typ.Words(), c.MaxCount)
		}
		if p.end() > 65536 {
			fail("register", "%s of %d registers starting at %d runs past register 65535", p.typ, p.length(), reg.Index)
		}
	}
	if dp.Scale != nil {
		s := *dp.Scale
		switch {
		case s == 0 || math.IsNaN(s) || math.IsInf(s, 0):
			fail("scale", "must be a non-zero finite number, got %v", s)
		case p.typ == Bool && s != 1:
			fail("scale", "does not apply to a bool")
		}
	}
	bo, err := parseOrder(orDefault(dp.ByteOrder, c.ByteOrder))
	if err != nil {
		fail("byte_order", "%v", err)
	}
	wo, err := parseOrder(orDefault(dp.WordOrder, c.WordOrder))
	if err != nil {
		fail("word_order", "%v", err)
	}
	p.layout = layout{littleBytes: bo == "little", littleWords: wo == "little"}
	return p, errors.Join(errs...)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// resolvePoints validates every data point of an endpoint, including that
// names are present and unique (a reading's metric is the name, so two
// points of one name could not be told apart downstream).
func resolvePoints(dps []adapters.DataPoint, c Config) ([]point, error) {
	var errs []error
	points := make([]point, 0, len(dps))
	seen := make(map[string]int, len(dps))
	for i, dp := range dps {
		field := fmt.Sprintf("data_points[%d]", i)
		if strings.TrimSpace(dp.Name) == "" {
			errs = append(errs, adapters.Fieldf(field+".name", "required"))
		} else if j, dup := seen[dp.Name]; dup {
			errs = append(errs, adapters.Fieldf(field+".name", "duplicate of data_points[%d].name %q", j, dp.Name))
		} else {
			seen[dp.Name] = i
		}
		p, err := resolvePoint(dp, c, field)
		if err != nil {
			errs = append(errs, err)
		}
		points = append(points, p)
	}
	return points, errors.Join(errs...)
}

// block is one read request: a contiguous run of registers or bits of one
// area of one unit covering one or more points.
type block struct {
	area  Area
	unit  uint8
	start uint16
	count uint16
	// points are indexes into the adapter's points, in address order.
	points []int
}

// planBlocks groups points by unit and area, sorts them by address and
// merges neighbours into one request while the hole between them is at
// most maxGap and the request stays within the area's count limit. Reading
// a few unused registers is far cheaper than another round trip, which is
// what dominates a poll on a serial line or a gateway.
func planBlocks(points []point, maxGap, maxRegs, maxBits int) []block {
	order := make([]int, len(points))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := points[order[i]], points[order[j]]
		if a.unit != b.unit {
			return a.unit < b.unit
		}
		if a.reg.Area != b.reg.Area {
			return a.reg.Area < b.reg.Area
		}
		if a.reg.Index != b.reg.Index {
			return a.reg.Index < b.reg.Index
		}
		return a.end() < b.end()
	})
	var blocks []block
	var cur *block
	curEnd := 0
	for _, i := range order {
		p := points[i]
		limit := maxRegs
		if p.reg.Area.IsBit() {
			limit = maxBits
		}
		start, end := int(p.reg.Index), p.end()
		if cur != nil && cur.area == p.reg.Area && cur.unit == p.unit &&
			start-curEnd <= maxGap && max(end, curEnd)-int(cur.start) <= limit {
			cur.points = append(cur.points, i)
			curEnd = max(curEnd, end)
			cur.count = uint16(curEnd - int(cur.start))
			continue
		}
		blocks = append(blocks, block{area: p.reg.Area, unit: p.unit, start: p.reg.Index, count: uint16(end - start), points: []int{i}})
		cur = &blocks[len(blocks)-1]
		curEnd = end
	}
	return blocks
}
