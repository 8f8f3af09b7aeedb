package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Rule bounds and defaults (docs/discovery.md, section Rules).
const (
	DefaultIntervalSeconds = 3600
	MinIntervalSeconds     = 60
	MaxIntervalSeconds     = 7 * 24 * 3600
	// RunsKept is how many runs of a rule are kept; older ones are
	// pruned as new ones finish.
	RunsKept        = 50
	maxRuleNameLen  = 128
	maxTemplateSize = 64 << 10
)

// Run states.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
)

// Rule is a scheduled discovery: what to scan (protocol, params_json),
// how often, and whether to create an endpoint (from target_json) for
// each new device found.
type Rule struct {
	UUID            string          `json:"uuid"`
	Name            string          `json:"name"`
	Protocol        string          `json:"protocol"`
	IntervalSeconds int             `json:"interval_seconds"`
	Enabled         bool            `json:"enabled"`
	AutoEnable      bool            `json:"auto_enable"`
	Params          json.RawMessage `json:"params_json"`
	Target          json.RawMessage `json:"target_json"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
}

// Run is one run of a rule.
type Run struct {
	UUID             string     `json:"uuid"`
	RuleUUID         string     `json:"rule_uuid"`
	StartedAt        time.Time  `json:"started_at"`
	FinishedAt       *time.Time `json:"finished_at"`
	Status           string     `json:"status"`
	DevicesFound     int        `json:"devices_found"`
	EndpointsCreated int        `json:"endpoints_created"`
	Error            string     `json:"error,omitempty"`
	Devices          []Device   `json:"devices"`
}

// ruleInput is the body of POST and PATCH /v1/discovery-rules; pointers
// tell a field that was sent from one that was not.
type ruleInput struct {
	Name            *string         `json:"name"`
	Protocol        *string         `json:"protocol"`
	IntervalSeconds *int            `json:"interval_seconds"`
	Enabled         *bool           `json:"enabled"`
	AutoEnable      *bool           `json:"auto_enable"`
	Params          json.RawMessage `json:"params_json"`
	Target          json.RawMessage `json:"target_json"`
}

func decodeRuleInput(body []byte) (ruleInput, error) {
	var in ruleInput
	if len(bytes.TrimSpace(body)) == 0 || string(bytes.TrimSpace(body)) == "null" {
		return in, adapters.Fieldf("body", "must be a JSON object")
	}
	if err := decodeOptions(body, &in); err != nil {
		return in, err
	}
	return in, nil
}

// apply copies the fields of in that were sent onto r.
func (in ruleInput) apply(r *Rule) {
	if in.Name != nil {
		r.Name = strings.TrimSpace(*in.Name)
	}
	if in.Protocol != nil {
		r.Protocol = strings.ToLower(strings.TrimSpace(*in.Protocol))
	}
	if in.IntervalSeconds != nil {
		r.IntervalSeconds = *in.IntervalSeconds
	}
	if in.Enabled != nil {
		r.Enabled = *in.Enabled
	}
	if in.AutoEnable != nil {
		r.AutoEnable = *in.AutoEnable
	}
	if in.Params != nil {
		r.Params = nullable(in.Params)
	}
	if in.Target != nil {
		r.Target = nullable(in.Target)
	}
}

// nullable keeps JSON null as a nil RawMessage, stored as NULL.
func nullable(raw json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil
	}
	return raw
}

// check validates r: its own fields, its params through the protocol's
// scanner and its template through the endpoints' checks.
func (s *Service) check(r Rule, known map[string][]json.RawMessage) error {
	var errs []error
	switch {
	case r.Name == "":
		errs = append(errs, adapters.Fieldf("name", "is required"))
	case len(r.Name) > maxRuleNameLen:
		errs = append(errs, adapters.Fieldf("name", "must be at most %d characters", maxRuleNameLen))
	}
	if r.IntervalSeconds < MinIntervalSeconds || r.IntervalSeconds > MaxIntervalSeconds {
		errs = append(errs, adapters.Fieldf("interval_seconds", "must be %d..%d, got %d", MinIntervalSeconds, MaxIntervalSeconds, r.IntervalSeconds))
	}
	sc, ok := s.scanners[r.Protocol]
	switch {
	case r.Protocol == "":
		errs = append(errs, adapters.Fieldf("protocol", "is required (scanners: %s)", strings.Join(s.scanners.Protocols(), ", ")))
	case !ok:
		errs = append(errs, s.unknownProtocol("protocol", r.Protocol))
	default:
		if r.Params != nil && !isObject(r.Params) {
			errs = append(errs, adapters.Fieldf("params_json", "must be an object or null"))
		} else if _, err := sc.Plan(r.Params, known[r.Protocol]); err != nil {
			errs = append(errs, prefixFields("params_json", err))
		}
	}
	switch {
	case r.Target == nil:
	case !isObject(r.Target):
		errs = append(errs, adapters.Fieldf("target_json", "must be an object or null"))
	case len(r.Target) > maxTemplateSize:
		errs = append(errs, adapters.Fieldf("target_json", "must be at most %d bytes", maxTemplateSize))
	default:
		if err := s.endpoints.CheckTemplate(r.Target); err != nil {
			errs = append(errs, prefixFields("target_json", namedDecodeError(err)))
		}
	}
	return errors.Join(errs...)
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// endpointDef is the endpoint target_json makes for d: the template with
// the rule's protocol, the device's name (after the template's name, a
// prefix, when it has one) and the device's connection merged over the
// template's.
func endpointDef(target json.RawMessage, d Device) (json.RawMessage, error) {
	def := map[string]json.RawMessage{}
	if target != nil {
		if err := json.Unmarshal(target, &def); err != nil {
			return nil, err
		}
	}
	name := d.Name
	var prefix string
	if json.Unmarshal(def["name"], &prefix) == nil && prefix != "" {
		name = prefix + d.Name
	}
	conn := map[string]json.RawMessage{}
	if c := def["connection"]; c != nil && string(c) != "null" {
		if err := json.Unmarshal(c, &conn); err != nil {
			return nil, adapters.Fieldf("target_json.connection", "must be an object")
		}
	}
	var found map[string]json.RawMessage
	if err := json.Unmarshal(d.Connection, &found); err != nil {
		return nil, err
	}
	for k, v := range found {
		conn[k] = v
	}
	var err error
	if def["connection"], err = json.Marshal(conn); err != nil {
		return nil, err
	}
	def["name"], _ = json.Marshal(name)
	def["protocol"], _ = json.Marshal(d.Protocol)
	if _, ok := def["enabled"]; !ok {
		def["enabled"] = json.RawMessage("true")
	}
	return json.Marshal(def)
}
