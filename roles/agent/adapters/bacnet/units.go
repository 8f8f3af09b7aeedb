package bacnet

import "strconv"

// unitNames maps the common BACnetEngineeringUnits to the short text a
// reading carries. A unit not in the table is reported as its number, so
// nothing is lost; no-units (95) is an empty unit.
var unitNames = map[uint32]string{
	2: "mA", 3: "A", 4: "ohm", 5: "V", 6: "kV", 7: "MV", 8: "VA", 9: "kVA", 10: "MVA",
	11: "var", 12: "kvar", 13: "Mvar", 14: "deg", 15: "PF", 16: "J", 17: "kJ", 18: "Wh", 19: "kWh",
	20: "BTU", 21: "therm", 22: "ton-h", 25: "1/h", 26: "1/min", 27: "Hz", 29: "%RH",
	30: "mm", 31: "m", 32: "in", 33: "ft", 35: "W/m2", 36: "lm", 37: "lx", 38: "fc",
	39: "kg", 40: "lb", 41: "t", 42: "kg/s", 43: "kg/min", 44: "kg/h", 47: "W", 48: "kW", 49: "MW",
	50: "BTU/h", 51: "hp", 52: "TR", 53: "Pa", 54: "kPa", 55: "bar", 56: "psi", 57: "cmH2O",
	58: "inH2O", 59: "mmHg", 60: "cmHg", 61: "inHg", 62: "degC", 63: "K", 64: "degF",
	67: "a", 68: "mo", 69: "wk", 70: "d", 71: "h", 72: "min", 73: "s", 74: "m/s", 75: "km/h",
	76: "ft/s", 77: "ft/min", 78: "mph", 79: "ft3", 80: "m3", 82: "l", 83: "gal",
	84: "cfm", 85: "m3/s", 87: "l/s", 88: "l/min", 89: "gpm", 90: "deg", 95: "",
	96: "ppm", 97: "ppb", 98: "percent", 99: "percent/s", 100: "1/min", 101: "1/s",
	103: "rad", 104: "rpm", 135: "m3/h", 136: "l/h", 159: "ms", 204: "kvarh",
}

// UnitName is the reading unit of an engineering unit enumeration value.
func UnitName(u uint32) string {
	if s, ok := unitNames[u]; ok {
		return s
	}
	return strconv.FormatUint(uint64(u), 10)
}
