package ai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/anomaly"
	"github.com/edgeplat/edgeplat/roles/api/query"
	"github.com/edgeplat/edgeplat/roles/api/readings"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// Agents is the agent registry as the tools read it; registry.Store is
// one. Every method filters on tenant (a tenant UUID) and answers
// registry.ErrNotFound for another tenant's record.
type Agents interface {
	Agent(ctx context.Context, tenant, uuid string) (registry.Agent, error)
	Fleet(ctx context.Context, tenant, id string) (registry.Fleet, error)
	FleetMembers(ctx context.Context, tenant, fleetID string) ([]string, error)
}

// Readings are the telemetry reads; readings.Reader is one. tenant is
// the tenant as the readings table stores it.
type Readings interface {
	Latest(ctx context.Context, tenant, agent, metric string, limit int) ([]readings.Reading, bool, error)
	Catalog(ctx context.Context, tenant, agent string) ([]readings.CatalogEntry, error)
	Recent(ctx context.Context, tenant, agent, metric string, n int) ([]float64, error)
	Query(ctx context.Context, tenant, src string, rng query.Range) ([]query.Series, error)
}

// Incidents lists anomaly incidents; *anomaly.Anomaly is one.
type Incidents interface {
	Incidents(ctx context.Context, tenant string, q anomaly.IncidentQuery) ([]anomaly.Incident, error)
}

// Bounds of what one tool result carries, so that a result stays a small
// part of the model's context whatever the tenant stores.
const (
	maxToolReadings  = 50
	maxToolMetrics   = 100
	maxToolIncidents = 20
	maxToolEvents    = 20
	maxToolMembers   = 50
	maxToolSeries    = 10
	maxToolPoints    = 60
	maxToolResult    = 32 << 10
	maxQueryRange    = 7 * 24 * time.Hour
	defaultQueryStep = time.Minute
)

// Tool names; toolNames lists them for the metrics' bounded label.
const (
	toolAgentStatus = "get_agent_status"
	toolFleet       = "get_fleet"
	toolLatest      = "get_latest_readings"
	toolMetrics     = "list_metrics"
	toolQuery       = "query_readings"
	toolIncidents   = "list_anomaly_incidents"
	toolEvents      = "get_agent_events"
)

var toolNames = []string{toolAgentStatus, toolFleet, toolLatest, toolMetrics, toolQuery, toolIncidents, toolEvents}

const agentParam = `"agentUuid": {"type": "string", "format": "uuid", "description": "The agent's UUID."}`

// toolSpecs are the tools offered to the model: reads only. Nothing the
// model asks for can change a record.
var toolSpecs = []ToolSpec{
	spec(toolAgentStatus, "An agent's registry record: name, status (online, offline, inactive), lifecycle state, last seen, version, fleet, tags.",
		`{"type": "object", "properties": {`+agentParam+`}, "required": ["agentUuid"], "additionalProperties": false}`),
	spec(toolFleet, "A fleet: name, run state and its member agents with their status.",
		`{"type": "object", "properties": {"fleetId": {"type": "string", "format": "uuid"}}, "required": ["fleetId"], "additionalProperties": false}`),
	spec(toolLatest, "The newest reading of each metric of an agent (or of one metric): value, unit, quality, device, time.",
		`{"type": "object", "properties": {`+agentParam+`, "metric": {"type": "string"}}, "required": ["agentUuid"], "additionalProperties": false}`),
	spec(toolMetrics, "The metric catalogue of an agent: each metric with its device, unit, sample count, first and last time.",
		`{"type": "object", "properties": {`+agentParam+`}, "required": ["agentUuid"], "additionalProperties": false}`),
	spec(toolQuery, "Run a query of the platform's PromQL-like query language over the readings, e.g. avg_over_time(readings{agent_uuid=\"...\", metric_name=\"temp\"}[5m]). range is how far back from now (default 1h, at most 7d), step the point spacing (default 1m).",
		`{"type": "object", "properties": {"query": {"type": "string"}, "range": {"type": "string", "description": "Go duration, e.g. 6h"}, "step": {"type": "string", "description": "Go duration, e.g. 5m"}}, "required": ["query"], "additionalProperties": false}`),
	spec(toolIncidents, "Anomaly incidents, newest first, of one agent or all: rule, severity, status, metric, value, score, opened and closed times.",
		`{"type": "object", "properties": {`+agentParam+`, "status": {"type": "string", "enum": ["open", "closed"]}, "limit": {"type": "integer", "minimum": 1, "maximum": 20}}, "additionalProperties": false}`),
	spec(toolEvents, "An agent's recent events, newest first: what happened to it and who did it.",
		`{"type": "object", "properties": {`+agentParam+`, "limit": {"type": "integer", "minimum": 1, "maximum": 20}}, "required": ["agentUuid"], "additionalProperties": false}`),
}

func spec(name, desc, params string) ToolSpec {
	if !json.Valid([]byte(params)) {
		panic("BUG: tool " + name + " has invalid parameters schema")
	}
	return ToolSpec{Type: "function", Function: FunctionSpec{Name: name, Description: desc, Parameters: json.RawMessage(params)}}
}

// toolbox runs tool calls for one request. The tenant is the caller's,
// fixed when the toolbox is made: no argument of the model's names one,
// and every read below filters on it.
type toolbox struct {
	d      *Deps
	tenant string // tenant UUID
	key    string // the tenant as the readings table stores it
	now    time.Time
}

func newToolbox(d *Deps, tenantUUID string, now time.Time) (*toolbox, error) {
	u, err := codec.ParseUUID(tenantUUID)
	if err != nil {
		return nil, fmt.Errorf("caller's tenant %q: %w", tenantUUID, err)
	}
	return &toolbox{d: d, tenant: u.String(), key: codec.EncodeID(u), now: now}, nil
}

// toolError is an outcome the model is told about in the tool's result
// rather than a failure of the request: a bad argument, a record that is
// not the tenant's, a query the language refuses.
type toolError struct {
	Code string `json:"error"`
	Msg  string `json:"message"`
}

func (e *toolError) Error() string { return e.Code + ": " + e.Msg }

func invalid(format string, args ...any) error {
	return &toolError{Code: "invalid_arguments", Msg: fmt.Sprintf(format, args...)}
}

// notFound is the one answer for a record of another tenant and for none:
// it names no id, so a result never echoes another tenant's record.
func notFound(what string) error {
	return &toolError{Code: "not_found", Msg: "no " + what + " with that id in this tenant"}
}

// run executes call and returns the tool message's content and its
// outcome ("ok" or a toolError code). An error is a failure of the
// platform (a database down, the client gone) that ends the request.
func (t *toolbox) run(ctx context.Context, call ToolCall) (string, string, error) {
	result, err := t.dispatch(ctx, call.Function.Name, []byte(call.Function.Arguments))
	var te *toolError
	if errors.As(err, &te) {
		b, _ := json.Marshal(te)
		return string(b), te.Code, nil
	}
	if err != nil {
		return "", "", fmt.Errorf("tool %s: %w", call.Function.Name, err)
	}
	b, err := json.Marshal(result)
	if err != nil {
		return "", "", fmt.Errorf("encode %s result: %w", call.Function.Name, err)
	}
	if len(b) > maxToolResult {
		b, _ = json.Marshal(&toolError{Code: "too_large", Msg: "the result is too large; ask for less (one metric, a shorter range, a larger step)"})
		return string(b), "too_large", nil
	}
	return string(b), "ok", nil
}

func (t *toolbox) dispatch(ctx context.Context, name string, args []byte) (any, error) {
	switch name {
	case toolAgentStatus:
		var a agentArgs
		ag, err := t.agentOf(ctx, args, &a)
		if err != nil {
			return nil, err
		}
		return agentView(ag), nil
	case toolFleet:
		var a struct {
			FleetID string `json:"fleetId"`
		}
		if err := decodeArgs(args, &a); err != nil {
			return nil, err
		}
		return t.fleet(ctx, a.FleetID)
	case toolLatest:
		var a struct {
			agentArgs
			Metric string `json:"metric"`
		}
		ag, err := t.agentOf(ctx, args, &a)
		if err != nil {
			return nil, err
		}
		rows, more, err := t.d.Readings.Latest(ctx, t.key, ag.UUID, a.Metric, maxToolReadings)
		if err != nil {
			return nil, err
		}
		return map[string]any{"agentUuid": ag.UUID, "readings": rows, "truncated": more}, nil
	case toolMetrics:
		var a agentArgs
		ag, err := t.agentOf(ctx, args, &a)
		if err != nil {
			return nil, err
		}
		list, err := t.d.Readings.Catalog(ctx, t.key, ag.UUID)
		if err != nil {
			return nil, err
		}
		more := len(list) > maxToolMetrics
		return map[string]any{"agentUuid": ag.UUID, "metrics": list[:min(len(list), maxToolMetrics)], "truncated": more}, nil
	case toolQuery:
		return t.query(ctx, args)
	case toolIncidents:
		var a struct {
			AgentUUID string `json:"agentUuid"`
			Status    string `json:"status"`
			Limit     int    `json:"limit"`
		}
		if err := decodeArgs(args, &a); err != nil {
			return nil, err
		}
		if a.Status != "" && a.Status != "open" && a.Status != "closed" {
			return nil, invalid("status must be open or closed, got %q", clip(a.Status, 40))
		}
		q := anomaly.IncidentQuery{Status: a.Status, Limit: limitArg(a.Limit, maxToolIncidents)}
		if a.AgentUUID != "" {
			ag, err := t.agent(ctx, a.AgentUUID)
			if err != nil {
				return nil, err
			}
			q.Agent = ag.UUID
		}
		list, err := t.d.Incidents.Incidents(ctx, t.tenant, q)
		if err != nil {
			return nil, err
		}
		return map[string]any{"incidents": list}, nil
	case toolEvents:
		var a struct {
			agentArgs
			Limit int `json:"limit"`
		}
		ag, err := t.agentOf(ctx, args, &a)
		if err != nil {
			return nil, err
		}
		list, err := t.d.Events.AgentEvents(ctx, t.tenant, ag.UUID, limitArg(a.Limit, maxToolEvents))
		if err != nil {
			return nil, err
		}
		return map[string]any{"agentUuid": ag.UUID, "events": list}, nil
	}
	return nil, &toolError{Code: "unknown_tool", Msg: fmt.Sprintf("no tool %q; the tools are %s", clip(name, 70), strings.Join(toolNames, ", "))}
}

func limitArg(n, most int) int {
	if n < 1 || n > most {
		return most
	}
	return n
}

// decodeArgs reads a call's arguments strictly, as the API reads bodies.
func decodeArgs(b []byte, dst any) error {
	if err := httpx.DecodeStrict(b, dst); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// agentArgs are the arguments of the tools about one agent.
type agentArgs struct {
	AgentUUID string `json:"agentUuid"`
}

func (a *agentArgs) agentID() string { return a.AgentUUID }

// agentOf decodes a tool's arguments into dst and returns the agent they
// name.
func (t *toolbox) agentOf(ctx context.Context, args []byte, dst interface{ agentID() string }) (registry.Agent, error) {
	if err := decodeArgs(args, dst); err != nil {
		return registry.Agent{}, err
	}
	return t.agent(ctx, dst.agentID())
}

// agent is the tenant's agent id names, or not_found.
func (t *toolbox) agent(ctx context.Context, id string) (registry.Agent, error) {
	if id == "" {
		return registry.Agent{}, invalid("agentUuid is required")
	}
	u, err := codec.ParseUUID(id)
	if err != nil {
		return registry.Agent{}, invalid("agentUuid must be a hyphenated UUID")
	}
	a, err := t.d.Agents.Agent(ctx, t.tenant, u.String())
	if errors.Is(err, registry.ErrNotFound) {
		return registry.Agent{}, notFound("agent")
	}
	return a, err
}

// agentSummary is what the tools tell of an agent.
type agentSummary struct {
	UUID     string            `json:"uuid"`
	Name     string            `json:"name"`
	Status   string            `json:"status"`
	State    string            `json:"state,omitempty"`
	Active   bool              `json:"active"`
	LastSeen *time.Time        `json:"lastSeen"`
	Version  string            `json:"version,omitempty"`
	Fleet    string            `json:"fleet,omitempty"`
	FleetID  string            `json:"fleetId,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`
}

func agentView(a registry.Agent) agentSummary {
	return agentSummary{UUID: a.UUID, Name: a.Name, Status: a.Status, State: a.State, Active: a.Active, LastSeen: a.LastSeen,
		Version: a.Version, Fleet: a.Fleet, FleetID: a.FleetID, Tags: a.Tags}
}

func (t *toolbox) fleet(ctx context.Context, id string) (any, error) {
	if id == "" {
		return nil, invalid("fleetId is required")
	}
	u, err := codec.ParseUUID(id)
	if err != nil {
		return nil, invalid("fleetId must be a hyphenated UUID")
	}
	f, err := t.d.Agents.Fleet(ctx, t.tenant, u.String())
	if err == nil {
		var ids []string
		ids, err = t.d.Agents.FleetMembers(ctx, t.tenant, f.ID)
		if err == nil {
			members := []agentSummary{}
			byStatus := map[string]int{}
			for i, m := range ids {
				a, err := t.d.Agents.Agent(ctx, t.tenant, m)
				if errors.Is(err, registry.ErrNotFound) {
					continue // left the fleet meanwhile
				}
				if err != nil {
					return nil, err
				}
				byStatus[a.Status]++
				if i < maxToolMembers {
					members = append(members, agentView(a))
				}
			}
			return map[string]any{"id": f.ID, "name": f.Name, "description": f.Description, "runState": f.RunState,
				"memberCount": len(ids), "membersByStatus": byStatus, "members": members, "truncated": len(ids) > maxToolMembers}, nil
		}
	}
	if errors.Is(err, registry.ErrNotFound) {
		return nil, notFound("fleet")
	}
	return nil, err
}

// query runs the query language over the tenant's readings: the query
// package adds the tenant to every statement it builds.
func (t *toolbox) query(ctx context.Context, args []byte) (any, error) {
	var a struct {
		Query string `json:"query"`
		Range string `json:"range"`
		Step  string `json:"step"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Query) == "" {
		return nil, invalid("query is required")
	}
	span, step := time.Hour, defaultQueryStep
	var err error
	if a.Range != "" {
		if span, err = time.ParseDuration(a.Range); err != nil || span <= 0 || span > maxQueryRange {
			return nil, invalid("range must be a Go duration from 1s to 168h, got %q", clip(a.Range, 40))
		}
	}
	if a.Step != "" {
		if step, err = time.ParseDuration(a.Step); err != nil || step < time.Second || step > span {
			return nil, invalid("step must be a Go duration from 1s to the range, got %q", clip(a.Step, 40))
		}
	}
	end := t.now.UTC().Truncate(time.Microsecond)
	series, err := t.d.Readings.Query(ctx, t.key, a.Query, query.Range{Start: end.Add(-span), End: end, Step: step})
	var pe *query.ParseError
	var pa *query.ParamError
	var le *query.LimitError
	switch {
	case errors.As(err, &pe), errors.As(err, &pa), errors.As(err, &le):
		return nil, &toolError{Code: "invalid_query", Msg: err.Error()}
	case err != nil:
		return nil, err
	}
	truncated := len(series) > maxToolSeries
	series = series[:min(len(series), maxToolSeries)]
	for i := range series {
		if p := series[i].Points; len(p) > maxToolPoints {
			series[i].Points, truncated = p[len(p)-maxToolPoints:], true
		}
	}
	return map[string]any{"start": end.Add(-span), "end": end, "step": step.String(), "series": series, "truncated": truncated}, nil
}
