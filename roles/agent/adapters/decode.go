package adapters

import (
	"bytes"
	"encoding/json"
	"slices"
)

// DecodeObject decodes the JSON object raw into fields (key -> pointer),
// key by key rather than with DisallowUnknownFields, so that every bad key
// gets its own *FieldError named prefix.key instead of the first error
// hiding the rest: "unknown field", or "wrong type". A null value keeps
// the default. Keys are visited in order, so the errors are stable. An
// empty raw is an empty object. When raw is not a JSON object, the one
// error names prefix and object is false: the caller decides whether to
// go on with its defaults.
func DecodeObject(raw json.RawMessage, prefix string, fields map[string]any) (errs []error, object bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, true
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return []error{Fieldf(prefix, "must be a JSON object: %v", err)}, false
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst, ok := fields[k]
		switch {
		case !ok:
			errs = append(errs, Fieldf(prefix+"."+k, "unknown field"))
		case string(bytes.TrimSpace(obj[k])) == "null":
		default:
			if err := json.Unmarshal(obj[k], dst); err != nil {
				errs = append(errs, Fieldf(prefix+"."+k, "wrong type: %v", err))
			}
		}
	}
	return errs, true
}
