package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Device is one device a scan found: what an endpoint needs to reach it
// (connection, in the protocol's endpoint connection format) and what
// the scan learnt about it (details).
type Device struct {
	Protocol   string          `json:"protocol"`
	Name       string          `json:"name"`
	Connection json.RawMessage `json:"connection"`
	Validated  bool            `json:"validated"`
	// Identity names the device the same way across scans (per protocol:
	// docs/discovery.md, section Identity).
	Identity string         `json:"identity"`
	Details  map[string]any `json:"details,omitempty"`
}

// Scanner finds the devices of one protocol. A protocol is supported by
// adding one implementation to the Registry.
type Scanner interface {
	// Protocol is the endpoint protocol the scanner finds devices of.
	Protocol() string
	// Plan decodes options strictly (errors are *adapters.FieldError
	// named relative to the options object) and checks them against the
	// caps. known are the connection objects of the configured endpoints
	// of the protocol: options that name no target scan theirs.
	Plan(options json.RawMessage, known []json.RawMessage) (Plan, error)
	// Covers reports whether an endpoint with this connection object
	// reaches device d already.
	Covers(connection json.RawMessage, d Device) bool
}

// Plan is one checked scan of one protocol.
type Plan interface {
	// Scan probes the targets and returns the devices found, in a stable
	// order. It returns when ctx ends, with the devices found so far and
	// ctx's error.
	Scan(ctx context.Context) ([]Device, error)
	// Validate probes each device once more and sets its Validated.
	Validate(ctx context.Context, devs []Device)
}

// Registry is the scanners by protocol.
type Registry map[string]Scanner

// DefaultScanners are the scanners this build has.
func DefaultScanners() Registry {
	return NewRegistry(ModbusScanner{}, OPCUAScanner{}, MQTTScanner{}, BACnetScanner{})
}

// NewRegistry indexes scanners by protocol.
func NewRegistry(ss ...Scanner) Registry {
	r := Registry{}
	for _, s := range ss {
		r[s.Protocol()] = s
	}
	return r
}

// Protocols lists the protocols r scans, sorted.
func (r Registry) Protocols() []string {
	out := make([]string, 0, len(r))
	for p := range r {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// decodeOptions decodes raw (null or absent is {}) into dst strictly and
// names the offending key of a failure as a field error.
func decodeOptions(raw json.RawMessage, dst any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return namedDecodeError(httpx.DecodeStrict(raw, dst))
}

// namedDecodeError turns httpx.DecodeStrict's error into a field error
// naming the key, when it names one.
func namedDecodeError(err error) error {
	var fe *adapters.FieldError
	if err == nil || errors.As(err, &fe) {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), "body: ")
	if rest, ok := strings.CutPrefix(msg, `unknown field "`); ok {
		if name, _, ok := strings.Cut(rest, `"`); ok {
			return adapters.Fieldf(name, "unknown field")
		}
	}
	if field, rest, ok := strings.Cut(msg, " must be "); ok && !strings.Contains(field, " ") {
		return adapters.Fieldf(field, "must be %s", rest)
	}
	return &adapters.FieldError{Field: "", Msg: msg}
}

// prefixFields names every field error of err under prefix
// ("overrides.modbus" + "." + "network").
func prefixFields(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var errs []error
	var walk func(error)
	walk = func(e error) {
		var fe *adapters.FieldError
		switch j, ok := e.(interface{ Unwrap() []error }); {
		case ok:
			for _, x := range j.Unwrap() {
				walk(x)
			}
		case errors.As(e, &fe) && fe.Field == "":
			errs = append(errs, adapters.Fieldf(prefix, "%s", fe.Msg))
		case errors.As(e, &fe):
			errs = append(errs, adapters.Fieldf(prefix+"."+fe.Field, "%s", fe.Msg))
		default:
			errs = append(errs, fmt.Errorf("%s: %w", prefix, e))
		}
	}
	walk(err)
	return errors.Join(errs...)
}

// InputError is a request the client can fix: a 400 naming the field.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func invalid(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{Err: err}
}

// ConflictError is a request refused in the current state: a scan of the
// same protocols ran moments ago, or the rule is running already.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// Errors of the service.
var (
	// ErrDisabled: features.discovery is false.
	ErrDisabled = errors.New("discovery is off (setting features.discovery)")
	// ErrNotFound: no such rule.
	ErrNotFound = errors.New("no such discovery rule")
	// ErrNotRunning: the agent initialises; its store is not open.
	ErrNotRunning = errors.New("discovery is not running")
)
