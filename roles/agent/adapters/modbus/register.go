package modbus

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Area is one of the four Modbus data tables.
type Area uint8

// The Modbus data tables. The zero Area is invalid so that a forgotten
// field never reads the coils by accident.
const (
	Coil Area = iota + 1
	Discrete
	Input
	Holding
)

// String is the canonical spelling used in diagnostics and by
// Register.String.
func (a Area) String() string {
	switch a {
	case Coil:
		return "coil"
	case Discrete:
		return "discrete"
	case Input:
		return "input"
	case Holding:
		return "holding"
	}
	return "area(" + strconv.Itoa(int(a)) + ")"
}

// IsBit reports whether the area holds single bits rather than 16-bit
// registers.
func (a Area) IsBit() bool { return a == Coil || a == Discrete }

// Writable reports whether a Modbus master may write the area.
func (a Area) Writable() bool { return a == Coil || a == Holding }

// areaNames are the accepted spellings, lower case. They cover the names
// found in device manuals and in other tools' configs (pymodbus, Telegraf,
// Node-RED), so a register list can usually be pasted in unchanged.
var areaNames = map[string]Area{
	"holding": Holding, "hr": Holding, "holding_register": Holding, "holding_registers": Holding, "h": Holding,
	"input": Input, "ir": Input, "input_register": Input, "input_registers": Input, "i": Input,
	"coil": Coil, "co": Coil, "coils": Coil, "c": Coil,
	"discrete": Discrete, "di": Discrete, "discrete_input": Discrete, "discrete_inputs": Discrete, "d": Discrete,
}

// MaxUnit is the highest unit id a Modbus slave may have; 248..255 are
// reserved by the serial line specification.
const MaxUnit = 247

// Register is a parsed data point address: "<area>:<index>" with an
// optional "@<unit>" that overrides the endpoint's unitId, so one endpoint
// can read several slaves behind a gateway.
type Register struct {
	Area  Area
	Index uint16
	// Unit is only meaningful when HasUnit is set.
	Unit    uint8
	HasUnit bool
}

// String formats r in the canonical form ParseRegister accepts.
func (r Register) String() string {
	s := r.Area.String() + ":" + strconv.Itoa(int(r.Index))
	if r.HasUnit {
		s += "@" + strconv.Itoa(int(r.Unit))
	}
	return s
}

var errEmptyRegister = errors.New("register is empty")

// ParseRegister parses "<area>:<index>[@<unit>]". The area is matched case
// insensitively against the spellings in areaNames, the index is a
// zero-based decimal 0..65535 (the PDU address, not the 40001-style
// reference number), and the unit a decimal 0..247.
func ParseRegister(s string) (Register, error) {
	if s == "" {
		return Register{}, errEmptyRegister
	}
	area, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Register{}, fmt.Errorf("register %q: want <area>:<index>, e.g. holding:100", s)
	}
	a, ok := areaNames[strings.ToLower(strings.TrimSpace(area))]
	if !ok {
		return Register{}, fmt.Errorf("register %q: unknown area %q (want holding, input, coil or discrete)", s, area)
	}
	r := Register{Area: a}
	idx, unit, hasUnit := strings.Cut(rest, "@")
	n, err := parseDecimal(strings.TrimSpace(idx), 65535)
	if err != nil {
		return Register{}, fmt.Errorf("register %q: index: %w", s, err)
	}
	r.Index = uint16(n)
	if hasUnit {
		u, err := parseDecimal(strings.TrimSpace(unit), MaxUnit)
		if err != nil {
			return Register{}, fmt.Errorf("register %q: unit: %w", s, err)
		}
		r.Unit, r.HasUnit = uint8(u), true
	}
	return r, nil
}

// parseDecimal accepts plain decimal digits only: strconv would also take
// a sign, and a "-1" or "+5" in a register list is a typo worth reporting.
func parseDecimal(s string, max uint64) (uint64, error) {
	if s == "" {
		return 0, errors.New("missing number")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("%s is out of range 0..%d", s, max)
	}
	return n, nil
}
