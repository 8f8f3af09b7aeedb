package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// TargetSchemaVersion is the version of the target-state document this
// build reads and writes (docs/target-state.md).
const TargetSchemaVersion = 1

// Limits of a target-state document, so parsing and applying are bounded.
const (
	MaxTargetStateBytes = 1 << 20
	maxTargetEndpoints  = 1000
	maxTargetDests      = 100
	maxTargetSubs       = 1000
	maxTargetErrors     = 20
	maxItemNameLen      = 128
	maxSecretNameLen    = 64
)

// Run states of a document's runState.
const (
	RunRunning = "running"
	RunStopped = "stopped"
)

// SecretKeys are the keys of an endpoint's connection and of a
// destination's config_json that hold secrets. In a document a user reads
// they are references ({"secretRef": "name"}), never values.
var SecretKeys = []string{"password", "token", "sharedAccessKey", "deviceSecret"}

// TargetStateDoc is the target-state document, the `state` of the cloud's
// target state. A nil section is absent: the agent does not manage it. A
// present section, even empty, is managed (docs/target-state.md).
type TargetStateDoc struct {
	SchemaVersion int
	// RunState is RunStopped when the agent must stop its work (endpoints
	// stop polling) while keeping its definitions; "" and RunRunning run.
	// A fleet's stop sets it on every member (docs/fleets-and-jobs.md).
	RunState string
	// Settings maps a settings group to its partial settings object, as
	// PATCH /v1/settings takes them.
	Settings      map[string]json.RawMessage
	Endpoints     []TargetEndpoint
	Destinations  []TargetDestination
	Subscriptions []TargetSubscription
	// Apps are the applications the agent runs in containers
	// (docs/apps.md).
	Apps []TargetApp
}

// TargetEndpoint is one protocol endpoint (device), in the shape of the
// agent's POST /v1/endpoints body. Unset fields take the agent's defaults.
type TargetEndpoint struct {
	Name              string          `json:"name"`
	Protocol          string          `json:"protocol"`
	Connection        json.RawMessage `json:"connection,omitempty"`
	PollInterval      *int            `json:"poll_interval,omitempty"`
	Enabled           *bool           `json:"enabled,omitempty"`
	DataPoints        json.RawMessage `json:"data_points,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	BufferSize        *int            `json:"buffer_size,omitempty"`
	BufferTimeMS      *int            `json:"buffer_time_ms,omitempty"`
	BufferCapacity    *int            `json:"buffer_capacity,omitempty"`
	MQTTTopic         *string         `json:"mqtt_topic,omitempty"`
	HeartbeatTopic    *string         `json:"heartbeat_topic,omitempty"`
	HeartbeatInterval *int            `json:"heartbeat_interval,omitempty"`
}

// TargetDestination is one publishing destination, in the shape of the
// agent's POST /v1/publish/destinations body.
type TargetDestination struct {
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Config  json.RawMessage `json:"config_json,omitempty"`
	Enabled *bool           `json:"enabled,omitempty"`
}

// TargetSubscription routes endpoint batches to a destination of the
// same document, named by Destination (the agent's local ids mean
// nothing to the cloud).
type TargetSubscription struct {
	Destination   string          `json:"destination"`
	Topics        []string        `json:"topics,omitempty"`
	PayloadFormat *string         `json:"payload_format,omitempty"`
	Compression   *string         `json:"compression,omitempty"`
	Enabled       *bool           `json:"enabled,omitempty"`
	Route         json.RawMessage `json:"route_json,omitempty"`
}

// SecretRef is the value of a secret key in a document a user writes or
// reads: the name of a secret kept on the cloud.
type SecretRef struct {
	SecretRef string `json:"secretRef"`
}

// PathError is a problem with one field of a document, named by its path
// ("endpoints[2].name").
type PathError struct {
	Path string
	Msg  string
}

func (e *PathError) Error() string { return e.Path + ": " + e.Msg }

// Empty reports whether the document is the cloud's idle state `{}`.
// A document with only a schemaVersion manages nothing either, but keeps
// its version when written back.
func (d TargetStateDoc) Empty() bool {
	return d.SchemaVersion == 0 && d.RunState == "" && d.Settings == nil && d.Endpoints == nil && d.Destinations == nil && d.Subscriptions == nil && d.Apps == nil
}

// MarshalJSON writes the document with its present sections only, so an
// empty managed list stays `[]` and an absent one stays absent.
func (d TargetStateDoc) MarshalJSON() ([]byte, error) {
	if d.Empty() {
		return []byte(`{}`), nil
	}
	type out struct {
		SchemaVersion int                        `json:"schemaVersion"`
		RunState      string                     `json:"runState,omitempty"`
		Settings      map[string]json.RawMessage `json:"settings,omitempty"`
		Endpoints     *[]TargetEndpoint          `json:"endpoints,omitempty"`
		Destinations  *[]TargetDestination       `json:"destinations,omitempty"`
		Subscriptions *[]TargetSubscription      `json:"subscriptions,omitempty"`
		Apps          *[]TargetApp               `json:"apps,omitempty"`
	}
	o := out{SchemaVersion: d.SchemaVersion, RunState: d.RunState, Settings: d.Settings}
	if d.Endpoints != nil {
		o.Endpoints = &d.Endpoints
	}
	if d.Destinations != nil {
		o.Destinations = &d.Destinations
	}
	if d.Subscriptions != nil {
		o.Subscriptions = &d.Subscriptions
	}
	if d.Apps != nil {
		o.Apps = &d.Apps
	}
	return json.Marshal(o)
}

// Secrets modes of the parser.
type secretMode int

const (
	// secretsByRef: a secret must be a reference (what users write).
	secretsByRef secretMode = iota
	// secretsResolved: a secret is a value (what the agent receives);
	// a reference left is one the cloud could not resolve.
	secretsResolved
)

// ParseTargetState parses a document as users write it: strictly (an
// unknown field is an error), with every secret a reference. Errors name
// the field's path; several are joined.
func ParseTargetState(b []byte) (TargetStateDoc, error) {
	return parseTargetState(b, secretsByRef, false)
}

// ParseTargetStatePart parses one part of a merged document, a fleet's
// template or a fleet member's own document, as ParseTargetState does,
// except that a subscription may name a destination the other part
// holds: only the merged document (MergeTargetState) must be whole.
func ParseTargetStatePart(b []byte) (TargetStateDoc, error) {
	return parseTargetState(b, secretsByRef, true)
}

// ParseResolvedTargetState parses a document as the agent receives it
// from GET /device/:uuid/state: the same rules, but secrets are values.
func ParseResolvedTargetState(b []byte) (TargetStateDoc, error) {
	return parseTargetState(b, secretsResolved, false)
}

type parser struct {
	errs []error
	mode secretMode
	// part skips the check that a subscription's destination is in the
	// same document (ParseTargetStatePart).
	part bool
}

func (p *parser) addf(path, format string, args ...any) {
	if len(p.errs) < maxTargetErrors {
		p.errs = append(p.errs, &PathError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
}

func parseTargetState(b []byte, mode secretMode, part bool) (TargetStateDoc, error) {
	var d TargetStateDoc
	if len(b) > MaxTargetStateBytes {
		return d, fmt.Errorf("target state of %d bytes is over the %d-byte limit", len(b), MaxTargetStateBytes)
	}
	p := &parser{mode: mode, part: part}
	top, ok := p.object("", b)
	if !ok {
		return d, errors.Join(p.errs...)
	}
	if len(top) == 0 {
		return d, nil
	}
	for _, k := range sortedKeys(top) {
		raw := top[k]
		switch k {
		case "schemaVersion":
			var v int
			if !p.decode(k, raw, &v) {
				continue
			}
			if v != TargetSchemaVersion {
				p.addf(k, "must be %d, got %d", TargetSchemaVersion, v)
			}
			d.SchemaVersion = v
		case "runState":
			var v string
			if !p.decode(k, raw, &v) {
				continue
			}
			if v != RunRunning && v != RunStopped {
				p.addf(k, "must be %q or %q, got %q", RunRunning, RunStopped, clip(v))
			}
			d.RunState = v
		case "settings":
			d.Settings = p.settings(k, raw)
		case "endpoints":
			d.Endpoints = p.endpoints(k, raw)
		case "destinations":
			d.Destinations = p.destinations(k, raw)
		case "subscriptions":
			d.Subscriptions = p.subscriptions(k, raw, d.Destinations)
		case "apps":
			d.Apps = p.apps(k, raw)
			if d.Apps == nil && len(p.errs) == 0 {
				d.Apps = []TargetApp{}
			}
		default:
			p.addf(k, "unknown field (a document has schemaVersion, runState, settings, endpoints, destinations, subscriptions, apps)")
		}
	}
	if _, ok := top["schemaVersion"]; !ok {
		p.addf("schemaVersion", "is required (%d)", TargetSchemaVersion)
	}
	if len(p.errs) > 0 {
		return TargetStateDoc{}, errors.Join(p.errs...)
	}
	return d, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	return slices.Sorted(maps.Keys(m))
}

// decode reads one JSON value strictly; null is refused, since a field
// that is sent must mean something.
func (p *parser) decode(path string, raw json.RawMessage, v any) bool {
	if string(bytes.TrimSpace(raw)) == "null" {
		p.addf(path, "must not be null")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			p.addf(path, "must be %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)
		} else {
			p.addf(path, "%v", err)
		}
		return false
	}
	if dec.More() {
		p.addf(path, "trailing data")
		return false
	}
	return true
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return goKind
}

// object reads a JSON object (not null, not an array).
func (p *parser) object(path string, raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	label := path
	if label == "" {
		label = "state"
	}
	if !p.decode(label, raw, &m) {
		return nil, false
	}
	return m, true
}

func (p *parser) array(path string, raw json.RawMessage, limit int) ([]json.RawMessage, bool) {
	var a []json.RawMessage
	if !p.decode(path, raw, &a) {
		return nil, false
	}
	if len(a) > limit {
		p.addf(path, "at most %d entries, got %d", limit, len(a))
		return nil, false
	}
	return a, true
}

func (p *parser) settings(path string, raw json.RawMessage) map[string]json.RawMessage {
	m, ok := p.object(path, raw)
	if !ok {
		return nil
	}
	for _, k := range sortedKeys(m) {
		// A group is an object of settings; the agent checks the keys
		// against the settings it has.
		p.object(path+"."+k, m[k])
	}
	return m
}

// field describes one field of a list entry: its decode target.
type field struct {
	name string
	dst  any
}

// entry decodes one list entry's fields, refusing unknown ones.
func (p *parser) entry(path string, raw json.RawMessage, fields []field) bool {
	m, ok := p.object(path, raw)
	if !ok {
		return false
	}
	okAll := true
	for _, k := range sortedKeys(m) {
		sub := k
		if path != "" {
			sub = path + "." + k
		}
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == k })
		if i < 0 {
			p.addf(sub, "unknown field")
			okAll = false
			continue
		}
		if !p.decode(sub, m[k], fields[i].dst) {
			okAll = false
		}
	}
	return okAll
}

func (p *parser) name(path, what, v string, seen map[string]int) {
	switch {
	case strings.TrimSpace(v) == "":
		p.addf(path, "is required")
	case v != strings.TrimSpace(v):
		p.addf(path, "must not start or end with spaces")
	case len(v) > maxItemNameLen:
		p.addf(path, "must be at most %d characters", maxItemNameLen)
	case strings.ContainsFunc(v, func(r rune) bool { return r == '/' || unicode.IsControl(r) }):
		p.addf(path, "must not contain '/' or control characters")
	default:
		if j, dup := seen[v]; dup {
			p.addf(path, "%s %q is named already at index %d", what, v, j)
		}
	}
}

func (p *parser) endpoints(path string, raw json.RawMessage) []TargetEndpoint {
	items, ok := p.array(path, raw, maxTargetEndpoints)
	if !ok {
		return nil
	}
	out := make([]TargetEndpoint, 0, len(items))
	seen := map[string]int{}
	for i, it := range items {
		at := fmt.Sprintf("%s[%d]", path, i)
		var e TargetEndpoint
		var conn, meta map[string]json.RawMessage
		var dpList []json.RawMessage
		okEntry := p.entry(at, it, []field{
			{"name", &e.Name}, {"protocol", &e.Protocol}, {"connection", &conn},
			{"poll_interval", &e.PollInterval}, {"enabled", &e.Enabled}, {"data_points", &dpList},
			{"metadata", &meta}, {"buffer_size", &e.BufferSize}, {"buffer_time_ms", &e.BufferTimeMS},
			{"buffer_capacity", &e.BufferCapacity}, {"mqtt_topic", &e.MQTTTopic},
			{"heartbeat_topic", &e.HeartbeatTopic}, {"heartbeat_interval", &e.HeartbeatInterval},
		})
		p.name(at+".name", "an endpoint", e.Name, seen)
		if e.Name != "" {
			if _, dup := seen[e.Name]; !dup {
				seen[e.Name] = i
			}
		}
		if strings.TrimSpace(e.Protocol) == "" {
			p.addf(at+".protocol", "is required")
		}
		if conn != nil {
			p.secrets(at+".connection", conn)
			e.Connection = mustCompact(conn)
		}
		for j, dp := range dpList {
			p.object(fmt.Sprintf("%s.data_points[%d]", at, j), dp)
		}
		if dpList != nil {
			e.DataPoints = mustCompact(dpList)
		}
		if meta != nil {
			e.Metadata = mustCompact(meta)
		}
		if okEntry {
			out = append(out, e)
		}
	}
	return out
}

func (p *parser) destinations(path string, raw json.RawMessage) []TargetDestination {
	items, ok := p.array(path, raw, maxTargetDests)
	if !ok {
		return nil
	}
	out := make([]TargetDestination, 0, len(items))
	seen := map[string]int{}
	for i, it := range items {
		at := fmt.Sprintf("%s[%d]", path, i)
		var d TargetDestination
		var cfg map[string]json.RawMessage
		okEntry := p.entry(at, it, []field{{"name", &d.Name}, {"type", &d.Type}, {"config_json", &cfg}, {"enabled", &d.Enabled}})
		p.name(at+".name", "a destination", d.Name, seen)
		if d.Name != "" {
			if _, dup := seen[d.Name]; !dup {
				seen[d.Name] = i
			}
		}
		if strings.TrimSpace(d.Type) == "" {
			p.addf(at+".type", "is required")
		}
		if cfg != nil {
			p.secrets(at+".config_json", cfg)
			d.Config = mustCompact(cfg)
		}
		if okEntry {
			out = append(out, d)
		}
	}
	return out
}

func (p *parser) subscriptions(path string, raw json.RawMessage, dests []TargetDestination) []TargetSubscription {
	items, ok := p.array(path, raw, maxTargetSubs)
	if !ok {
		return nil
	}
	out := make([]TargetSubscription, 0, len(items))
	for i, it := range items {
		at := fmt.Sprintf("%s[%d]", path, i)
		var s TargetSubscription
		var route map[string]json.RawMessage
		okEntry := p.entry(at, it, []field{
			{"destination", &s.Destination}, {"topics", &s.Topics}, {"payload_format", &s.PayloadFormat},
			{"compression", &s.Compression}, {"enabled", &s.Enabled}, {"route_json", &route},
		})
		switch {
		case s.Destination == "":
			p.addf(at+".destination", "is required (the name of a destination of this document)")
		case !p.part && !slices.ContainsFunc(dests, func(d TargetDestination) bool { return d.Name == s.Destination }):
			p.addf(at+".destination", "no destination %q in this document's destinations", s.Destination)
		}
		if route != nil {
			s.Route = mustCompact(route)
		}
		if okEntry {
			out = append(out, s)
		}
	}
	return out
}

var secretName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidSecretName reports whether name can name a secret.
func ValidSecretName(name string) bool {
	return len(name) <= maxSecretNameLen && secretName.MatchString(name)
}

// secrets checks the secret keys of a connection or config object.
func (p *parser) secrets(path string, m map[string]json.RawMessage) {
	for _, k := range SecretKeys {
		raw, ok := m[k]
		if !ok {
			continue
		}
		at := path + "." + k
		ref, isRef := secretRefOf(raw)
		switch {
		case isRef && !ValidSecretName(ref):
			p.addf(at+".secretRef", "must be 1..%d letters, digits, '.', '_' or '-', got %q", maxSecretNameLen, clip(ref))
		case isRef && p.mode == secretsResolved:
			p.addf(at, "secret %q is not set on the cloud", ref)
		case !isRef && p.mode == secretsByRef:
			p.addf(at, `a secret must be a reference {"secretRef": "name"}, never a value`)
		}
	}
}

// secretRefOf reports whether raw is a secret reference and its name.
func secretRefOf(raw json.RawMessage) (string, bool) {
	var r SecretRef
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) && dec.Decode(&r) == nil {
		return r.SecretRef, true
	}
	return "", false
}

// SecretRefs lists the names of the secrets a document refers to.
func (d TargetStateDoc) SecretRefs() []string {
	var names []string
	visit := func(obj json.RawMessage) {
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil {
			return
		}
		for _, k := range SecretKeys {
			if n, ok := secretRefOf(m[k]); ok && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	for _, e := range d.Endpoints {
		visit(e.Connection)
	}
	for _, x := range d.Destinations {
		visit(x.Config)
	}
	slices.Sort(names)
	return names
}

// ResolveSecrets returns doc (a document's JSON) with every secret
// reference replaced by lookup's value; a reference lookup does not know
// is left as it is, and the agent refuses the document naming it.
func ResolveSecrets(doc json.RawMessage, lookup func(name string) (string, bool)) (json.RawMessage, error) {
	d, err := ParseTargetState(doc)
	if err != nil {
		return nil, fmt.Errorf("resolve secrets: %w", err)
	}
	resolve := func(obj json.RawMessage) json.RawMessage {
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil || m == nil {
			return obj
		}
		for _, k := range SecretKeys {
			if n, ok := secretRefOf(m[k]); ok {
				if v, found := lookup(n); found {
					m[k] = mustCompact(v)
				}
			}
		}
		return mustCompact(m)
	}
	for i := range d.Endpoints {
		if d.Endpoints[i].Connection != nil {
			d.Endpoints[i].Connection = resolve(d.Endpoints[i].Connection)
		}
	}
	for i := range d.Destinations {
		if d.Destinations[i].Config != nil {
			d.Destinations[i].Config = resolve(d.Destinations[i].Config)
		}
	}
	return json.Marshal(d)
}

func mustCompact(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("BUG: marshal of decoded JSON: " + err.Error())
	}
	return b
}
