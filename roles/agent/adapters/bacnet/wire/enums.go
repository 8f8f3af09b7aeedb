package wire

import (
	"fmt"
	"strconv"
)

// ObjectType is a BACnetObjectType (clause 21).
type ObjectType uint16

// The object types the adapter addresses, and the device object.
const (
	AnalogInput      ObjectType = 0
	AnalogOutput     ObjectType = 1
	AnalogValue      ObjectType = 2
	BinaryInput      ObjectType = 3
	BinaryOutput     ObjectType = 4
	BinaryValue      ObjectType = 5
	Device           ObjectType = 8
	MultiStateInput  ObjectType = 13
	MultiStateOutput ObjectType = 14
	MultiStateValue  ObjectType = 19
)

// objectTypeNames are the standard names of the object types, spelled as
// BACnet's ASN.1 does.
var objectTypeNames = map[ObjectType]string{
	0: "analog-input", 1: "analog-output", 2: "analog-value", 3: "binary-input",
	4: "binary-output", 5: "binary-value", 6: "calendar", 7: "command", 8: "device",
	9: "event-enrollment", 10: "file", 11: "group", 12: "loop", 13: "multi-state-input",
	14: "multi-state-output", 15: "notification-class", 16: "program", 17: "schedule",
	18: "averaging", 19: "multi-state-value", 20: "trend-log", 21: "life-safety-point",
	22: "life-safety-zone", 23: "accumulator", 24: "pulse-converter", 25: "event-log",
	26: "global-group", 27: "trend-log-multiple", 28: "load-control", 29: "structured-view",
	30: "access-door", 31: "timer", 32: "access-credential", 33: "access-point",
	34: "access-rights", 35: "access-user", 36: "access-zone", 37: "credential-data-input",
	39: "bitstring-value", 40: "characterstring-value", 41: "date-pattern-value",
	42: "date-value", 43: "datetime-pattern-value", 44: "datetime-value", 45: "integer-value",
	46: "large-analog-value", 47: "octetstring-value", 48: "positive-integer-value",
	49: "time-pattern-value", 50: "time-value", 51: "notification-forwarder",
	52: "alert-enrollment", 53: "channel", 54: "lighting-output", 55: "binary-lighting-output",
	56: "network-port", 57: "elevator-group", 58: "escalator", 59: "lift",
}

func (t ObjectType) String() string {
	if s, ok := objectTypeNames[t]; ok {
		return s
	}
	return strconv.Itoa(int(t))
}

// ObjectID is a BACnetObjectIdentifier: a 10-bit type and a 22-bit
// instance.
type ObjectID struct {
	Type     ObjectType
	Instance uint32
}

// MaxInstance is the largest object instance; 4194303 itself is the
// wildcard "any instance" of a device.
const MaxInstance = 1<<22 - 1

func (o ObjectID) raw() uint32 { return uint32(o.Type&0x3FF)<<22 | o.Instance&MaxInstance }

func objectIDFromRaw(u uint32) ObjectID {
	return ObjectID{Type: ObjectType(u >> 22), Instance: u & MaxInstance}
}

func (o ObjectID) String() string { return fmt.Sprintf("%s:%d", o.Type, o.Instance) }

// PropertyID is a BACnetPropertyIdentifier.
type PropertyID uint32

// The properties the adapter reads and writes.
const (
	PropMaxAPDULength       PropertyID = 62
	PropModelName           PropertyID = 70
	PropObjectIdentifier    PropertyID = 75
	PropObjectList          PropertyID = 76
	PropObjectName          PropertyID = 77
	PropObjectType          PropertyID = 79
	PropOutOfService        PropertyID = 81
	PropPresentValue        PropertyID = 85
	PropPriorityArray       PropertyID = 87
	PropReliability         PropertyID = 103
	PropRelinquishDefault   PropertyID = 104
	PropSegmentationSupport PropertyID = 107
	PropStatusFlags         PropertyID = 111
	PropUnits               PropertyID = 117
	PropVendorIdentifier    PropertyID = 120
	PropVendorName          PropertyID = 121
	PropDescription         PropertyID = 28
	PropEventState          PropertyID = 36
	PropNumberOfStates      PropertyID = 74
	PropStateText           PropertyID = 110
	PropCOVIncrement        PropertyID = 22
	PropMinPresValue        PropertyID = 69
	PropMaxPresValue        PropertyID = 65
)

var propertyNames = map[PropertyID]string{
	PropMaxAPDULength: "max-apdu-length-accepted", PropModelName: "model-name",
	PropObjectIdentifier: "object-identifier", PropObjectList: "object-list",
	PropObjectName: "object-name", PropObjectType: "object-type",
	PropOutOfService: "out-of-service", PropPresentValue: "present-value",
	PropPriorityArray: "priority-array", PropReliability: "reliability",
	PropRelinquishDefault: "relinquish-default", PropSegmentationSupport: "segmentation-supported",
	PropStatusFlags: "status-flags", PropUnits: "units", PropVendorIdentifier: "vendor-identifier",
	PropVendorName: "vendor-name", PropDescription: "description", PropEventState: "event-state",
	PropNumberOfStates: "number-of-states", PropStateText: "state-text",
	PropCOVIncrement: "cov-increment", PropMinPresValue: "min-pres-value", PropMaxPresValue: "max-pres-value",
}

var propertyByName = func() map[string]PropertyID {
	m := make(map[string]PropertyID, len(propertyNames))
	for id, s := range propertyNames {
		m[s] = id
	}
	return m
}()

// ParsePropertyID accepts a property's standard name (present-value) or
// its number.
func ParsePropertyID(s string) (PropertyID, error) {
	if id, ok := propertyByName[s]; ok {
		return id, nil
	}
	n, err := strconv.ParseUint(s, 10, 22)
	if err != nil {
		return 0, fmt.Errorf("unknown property %q: give a name such as present-value or a number", s)
	}
	return PropertyID(n), nil
}

func (p PropertyID) String() string {
	if s, ok := propertyNames[p]; ok {
		return s
	}
	return strconv.FormatUint(uint64(p), 10)
}

// Segmentation is BACnetSegmentation, as an I-Am announces it.
type Segmentation uint8

func (s Segmentation) String() string {
	switch s {
	case 0:
		return "segmented-both"
	case 1:
		return "segmented-transmit"
	case 2:
		return "segmented-receive"
	case 3:
		return "no-segmentation"
	}
	return strconv.Itoa(int(s))
}

// Error classes and the error codes the adapter acts on (clause 18).
const (
	ErrorClassDevice   = 0
	ErrorClassObject   = 1
	ErrorClassProperty = 2
	ErrorClassServices = 5

	ErrorCodeOptionalFunctionalityNotSupported = 45
	ErrorCodeUnknownObject                     = 31
	ErrorCodeUnknownProperty                   = 32
	ErrorCodeRejectUnrecognizedService         = 67
)

var errorClassNames = []string{"device", "object", "property", "resources", "security", "services", "vt", "communication"}

var errorCodeNames = map[uint32]string{
	0: "other", 2: "configuration-in-progress", 3: "device-busy", 5: "dynamic-creation-not-supported",
	9: "invalid-data-type", 25: "operational-problem", 27: "read-access-denied",
	29: "service-request-denied", 30: "timeout", 31: "unknown-object", 32: "unknown-property",
	37: "value-out-of-range", 40: "write-access-denied", 42: "invalid-array-index",
	44: "not-cov-property", 45: "optional-functionality-not-supported", 47: "datatype-not-supported",
	50: "property-is-not-an-array", 67: "reject-unrecognized-service",
}

// RejectReason and AbortReason values the adapter names.
const (
	RejectUnrecognizedService   = 9
	AbortSegmentationNotSupport = 4
	AbortBufferOverflow         = 1
)

var rejectNames = []string{
	"other", "buffer-overflow", "inconsistent-parameters", "invalid-parameter-data-type",
	"invalid-tag", "missing-required-parameter", "parameter-out-of-range",
	"too-many-arguments", "undefined-enumeration", "unrecognized-service",
}

var abortNames = []string{
	"other", "buffer-overflow", "invalid-apdu-in-this-state", "preempted-by-higher-priority-task",
	"segmentation-not-supported", "security-error", "insufficient-security",
	"window-size-out-of-range", "application-exceeded-reply-time", "out-of-resources",
	"tsm-timeout", "apdu-too-long",
}

func nameOr(names []string, v uint32) string {
	if int(v) < len(names) && v < 1<<16 {
		return names[v]
	}
	return strconv.FormatUint(uint64(v), 10)
}
