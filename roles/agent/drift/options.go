package drift

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Option bounds and defaults (docs/drift.md, section Options).
const (
	DefaultMaxFieldCount = 500
	MaxMaxFieldCount     = 10000
	MaxWindowMs          = 3_600_000 // one hour: a longer batch would make the 50-batch window span days
)

// Options are one protocol output's drift options, the agent API's
// drift_options object.
type Options struct {
	// Enabled turns tracking on; the zero Options is off, so drift is
	// opt-in per output.
	Enabled bool `json:"enabled"`
	// WindowMs groups single frames into one batch: frames arriving
	// within WindowMs of a batch's first frame join it. 0 makes every
	// frame a batch.
	WindowMs int64 `json:"windowMs"`
	// MaxFieldCount is the most fields tracked for the output.
	MaxFieldCount int `json:"maxFieldCount"`
}

// DefaultOptions are the options of an output whose drift_options leave
// keys out: off, every frame a batch, 500 fields.
func DefaultOptions() Options {
	return Options{WindowMs: 0, MaxFieldCount: DefaultMaxFieldCount}
}

// Validate reports every wrong option as an *adapters.FieldError naming
// its JSON key, joined, as the agent's other validations do.
func (o Options) Validate() error {
	var errs []error
	if o.WindowMs < 0 || o.WindowMs > MaxWindowMs {
		errs = append(errs, adapters.Fieldf("windowMs", "must be 0..%d, got %d", MaxWindowMs, o.WindowMs))
	}
	if o.MaxFieldCount < 1 || o.MaxFieldCount > MaxMaxFieldCount {
		errs = append(errs, adapters.Fieldf("maxFieldCount", "must be 1..%d, got %d", MaxMaxFieldCount, o.MaxFieldCount))
	}
	return errors.Join(errs...)
}

// ParseOptions decodes a drift_options object over DefaultOptions and
// validates it. Absent or null input gives the defaults; an unknown key
// or a value of the wrong JSON type is an *adapters.FieldError naming
// the key ("drift_options" when the whole value is wrong).
func ParseOptions(raw []byte) (Options, error) {
	o := DefaultOptions()
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return Options{}, optionDecodeError(err)
	}
	if dec.More() {
		return Options{}, adapters.Fieldf("drift_options", "must be one JSON object")
	}
	if err := o.Validate(); err != nil {
		return Options{}, err
	}
	return o, nil
}

// optionDecodeError names the key a decode error is about, so the API can
// point at it.
func optionDecodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return adapters.Fieldf("drift_options", "must be a JSON object")
		}
		want := map[string]string{"enabled": "a boolean", "windowMs": "an integer", "maxFieldCount": "an integer"}[typeErr.Field]
		if want == "" {
			want = "of type " + typeErr.Type.String()
		}
		return adapters.Fieldf(typeErr.Field, "must be %s, got %s", want, typeErr.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return adapters.Fieldf(strings.Trim(name, `"`), "is not a drift option (enabled, windowMs, maxFieldCount)")
	}
	return adapters.Fieldf("drift_options", "is not valid JSON: %v", err)
}
