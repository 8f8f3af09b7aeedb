package drift

import "github.com/edgeplat/edgeplat/core/control"

// Type is the JSON type of a field: the six kinds a JSON value can take.
// A polled data point is given the type its value encodes as.
type Type string

// The field types.
const (
	TypeNumber Type = "number"
	TypeString Type = "string"
	TypeBool   Type = "bool"
	TypeObject Type = "object"
	TypeArray  Type = "array"
	TypeNull   Type = "null"
)

func (t Type) valid() bool {
	switch t {
	case TypeNumber, TypeString, TypeBool, TypeObject, TypeArray, TypeNull:
		return true
	}
	return false
}

// Field is one field of a payload: its flattened path and its type.
type Field struct {
	Path string `json:"path"`
	Type Type   `json:"type"`
}

// Kind says what an Event reports.
type Kind string

// The event kinds (docs/drift.md, section Events).
const (
	KindMissingField Kind = "missing_field"
	KindNewField     Kind = "new_field"
	KindTypeChanged  Kind = "type_changed"
	KindFieldRetired Kind = "field_retired"
	KindFieldLimit   Kind = "field_limit"
)

// Severity is the severity the kind's events carry to the cloud
// (docs/control-channel.md, section Events): what may break a consumer
// of the data is a warning, what only widens it is info.
func (k Kind) Severity() string {
	switch k {
	case KindMissingField, KindTypeChanged, KindFieldLimit:
		return control.SeverityWarning
	}
	return control.SeverityInfo
}

// The two new_field events differ in their Detail's first word, so a
// reader can tell a field never seen before from one that became
// expected.
const (
	DetailAppeared = "appeared"
	DetailPromoted = "promoted"
)

// Event is one finding of the detector, returned for the caller to store
// and publish. Every key is always present so the shape is one; a key
// that does not apply to the kind holds "" or 0.
type Event struct {
	ID            string `json:"id"`
	Protocol      string `json:"protocol"`
	Kind          Kind   `json:"kind"`
	Field         string `json:"field"`
	ExpectedType  Type   `json:"expected_type"`
	SeenType      Type   `json:"seen_type"`
	BatchesAbsent int    `json:"batches_absent"`
	At            int64  `json:"at"` // Unix milliseconds of the batch
	Detail        string `json:"detail"`
}
