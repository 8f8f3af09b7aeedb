package anomaly

import (
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Rule types.
const (
	TypeThreshold    = "threshold"
	TypeZScore       = "zscore"
	TypeRate         = "rate_of_change"
	TypeCorrelation  = "correlation"
	SeverityCritical = "critical"
	SeverityWarning  = "warning"
	SeverityInfo     = "info"
)

// Limits of a rule.
const (
	MaxName       = 100
	MaxPattern    = 200
	MaxConditions = 8
	// MaxWindow bounds a window: the evaluator keeps a window's samples in
	// memory, so a day of one-second readings is already 86,400 of them
	// (and MaxWindowSamples cuts it shorter).
	MaxWindow = 24 * time.Hour
	// MaxWindowSamples bounds the samples a z-score or rate window keeps
	// per series, whatever the window's duration.
	MaxWindowSamples = 1000
	// DefaultRecoverAfter is how long a rule's condition must stay clear
	// before its incident closes, when the rule does not say.
	DefaultRecoverAfter = time.Minute
	// MaxRulesPerTenant bounds the rules the evaluator holds per tenant.
	MaxRulesPerTenant = 500
)

// Condition is one detection: the whole rule for a threshold, z-score or
// rate-of-change rule, one of its parts for a correlation rule. Which
// fields count depends on Type (docs/anomaly-cloud.md, section Rules).
type Condition struct {
	Type string `json:"type"`
	// Metric is a glob (path.Match) over the metric name
	// "<device>.<reading>" or the reading name alone: "temp*".
	Metric string `json:"metric,omitempty"`
	// Op is "above" or "below" for a threshold; "rising", "falling" or
	// "either" for a rate of change.
	Op        string   `json:"op,omitempty"`
	Threshold *float64 `json:"threshold,omitempty"`
	// K is the z-score's limit: |z| >= K fires.
	K *float64 `json:"k,omitempty"`
	// Window is a Go duration ("5m"): the z-score's sample window, the
	// rate's span, and for a correlation rule the span within which every
	// condition must have held.
	Window string `json:"window,omitempty"`
	// MinSamples is the z-score's warm-up: no score before the window
	// holds that many samples (default 10).
	MinSamples int `json:"minSamples,omitempty"`
	// Rate is the rate of change's limit, per Per ("second" or "minute").
	Rate *float64 `json:"rate,omitempty"`
	Per  string   `json:"per,omitempty"`
}

// Scope narrows a rule to a fleet or an agent of the tenant; empty is
// every agent of the tenant.
type Scope struct {
	FleetID   string `json:"fleetId,omitempty"`
	AgentUUID string `json:"agentUuid,omitempty"`
}

// Rule is a stored detection rule.
type Rule struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Severity string `json:"severity"`
	Enabled  bool   `json:"enabled"`
	Scope    Scope  `json:"scope"`
	Condition
	// Conditions are a correlation rule's parts; Condition.Window is then
	// the span in which all of them must hold.
	Conditions []Condition `json:"conditions,omitempty"`
	// RecoverAfter is how long the condition must stay clear before an
	// open incident closes.
	RecoverAfter string    `json:"recoverAfter"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`

	tenant string
}

// spec is what the spec column holds: the rule's detection parameters.
type spec struct {
	Condition
	Conditions   []Condition `json:"conditions,omitempty"`
	RecoverAfter string      `json:"recoverAfter"`
}

// RuleInput is the body of POST and PUT /anomaly/rules. A PUT replaces the
// rule: what it leaves out takes its default.
type RuleInput struct {
	Name     *string `json:"name"`
	Type     string  `json:"type"`
	Severity string  `json:"severity"`
	Enabled  *bool   `json:"enabled"`
	Scope    *Scope  `json:"scope"`
	Condition
	Conditions   []Condition `json:"conditions"`
	RecoverAfter string      `json:"recoverAfter"`
}

// ValidationError lists what is wrong with a request, each problem naming
// its field.
type ValidationError struct{ Problems []string }

func (e *ValidationError) Error() string { return strings.Join(e.Problems, "; ") }

// ErrInvalid marks a value that breaks a rule (422 validation_failed).
var ErrInvalid = errors.New("validation failed")

// Is makes a ValidationError an ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

type problems []string

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &ValidationError{Problems: p}
}

// normalize checks in and returns the rule it describes (without id and
// times). Checks that need the database (the scope's fleet or agent) are
// the store's.
func (in RuleInput) normalize() (Rule, error) {
	var p problems
	r := Rule{Enabled: in.Enabled == nil || *in.Enabled, Severity: in.Severity}
	switch {
	case in.Name == nil:
		p.add("name", "is required")
	default:
		n, err := checkName(*in.Name)
		if err != nil {
			p.add("name", "%v", err)
		}
		r.Name = n
	}
	if r.Severity == "" {
		r.Severity = SeverityWarning
	}
	if !validSeverity(r.Severity) {
		p.add("severity", "must be critical, warning or info, got %s", quote(in.Severity))
	}
	if in.Scope != nil {
		r.Scope = *in.Scope
		if r.Scope.FleetID != "" && r.Scope.AgentUUID != "" {
			p.add("scope", "give fleetId or agentUuid, not both")
		}
		if r.Scope.FleetID != "" {
			if u, err := codec.ParseUUID(r.Scope.FleetID); err != nil {
				p.add("scope.fleetId", "must be a hyphenated UUID, got %s", quote(r.Scope.FleetID))
			} else {
				r.Scope.FleetID = u.String()
			}
		}
		if r.Scope.AgentUUID != "" {
			if u, err := codec.ParseUUID(r.Scope.AgentUUID); err != nil {
				p.add("scope.agentUuid", "must be a hyphenated UUID, got %s", quote(r.Scope.AgentUUID))
			} else {
				r.Scope.AgentUUID = u.String()
			}
		}
	}
	r.RecoverAfter = in.RecoverAfter
	if r.RecoverAfter == "" {
		r.RecoverAfter = DefaultRecoverAfter.String()
	}
	if d, err := time.ParseDuration(r.RecoverAfter); err != nil || d < 0 || d > MaxWindow {
		p.add("recoverAfter", "must be a duration of 0s..%s such as \"1m\", got %s", MaxWindow, quote(in.RecoverAfter))
	}
	c := in.Condition
	c.Type = in.Type
	switch in.Type {
	case TypeCorrelation:
		if c.Metric != "" || c.Op != "" || c.Threshold != nil || c.K != nil || c.Rate != nil || c.Per != "" || c.MinSamples != 0 {
			p.add("type", "a correlation rule takes its metrics and limits in conditions; only window is its own")
		}
		if _, err := window(c.Window, true); err != nil {
			p.add("window", "%v", err)
		}
		if len(in.Conditions) < 2 || len(in.Conditions) > MaxConditions {
			p.add("conditions", "a correlation rule needs 2..%d conditions, got %d", MaxConditions, len(in.Conditions))
		}
		for i, sub := range in.Conditions {
			if sub.Type == TypeCorrelation {
				p.add(fmt.Sprintf("conditions[%d].type", i), "must be threshold, zscore or rate_of_change, got %s", quote(sub.Type))
				continue
			}
			n, sp := sub.check(fmt.Sprintf("conditions[%d].", i))
			p = append(p, sp...)
			in.Conditions[i] = n
		}
		r.Condition = Condition{Type: TypeCorrelation, Window: c.Window}
		r.Conditions = in.Conditions
	case "":
		p.add("type", "is required: threshold, zscore, rate_of_change or correlation")
	default:
		if len(in.Conditions) > 0 {
			p.add("conditions", "are for a correlation rule only")
		}
		n, sp := c.check("")
		p = append(p, sp...)
		r.Condition = n
	}
	return r, p.err()
}

// check validates one condition; prefix names its place in the body.
func (c Condition) check(prefix string) (Condition, problems) {
	var p problems
	switch c.Metric {
	case "":
		p.add(prefix+"metric", "is required: a metric name or glob such as \"temp*\"")
	default:
		if err := checkPattern(c.Metric); err != nil {
			p.add(prefix+"metric", "%v", err)
		}
	}
	switch c.Type {
	case TypeThreshold:
		if c.Op != "above" && c.Op != "below" {
			p.add(prefix+"op", "must be above or below, got %s", quote(c.Op))
		}
		if c.Threshold == nil || !finite(*c.Threshold) {
			p.add(prefix+"threshold", "is required: a finite number")
		}
		if c.K != nil || c.Rate != nil || c.Per != "" || c.Window != "" || c.MinSamples != 0 {
			p.add(prefix+"type", "a threshold takes op and threshold only")
		}
	case TypeZScore:
		if c.K == nil || !finite(*c.K) || *c.K <= 0 {
			p.add(prefix+"k", "is required: a positive number such as 3")
		}
		if _, err := window(c.Window, true); err != nil {
			p.add(prefix+"window", "%v", err)
		}
		if c.MinSamples == 0 {
			c.MinSamples = 10
		}
		if c.MinSamples < 2 || c.MinSamples > MaxWindowSamples {
			p.add(prefix+"minSamples", "must be 2..%d, got %d", MaxWindowSamples, c.MinSamples)
		}
		if c.Op != "" || c.Threshold != nil || c.Rate != nil || c.Per != "" {
			p.add(prefix+"type", "a z-score takes k, window and minSamples only")
		}
	case TypeRate:
		if c.Op == "" {
			c.Op = "either"
		}
		if c.Op != "rising" && c.Op != "falling" && c.Op != "either" {
			p.add(prefix+"op", "must be rising, falling or either, got %s", quote(c.Op))
		}
		if c.Rate == nil || !finite(*c.Rate) || *c.Rate <= 0 {
			p.add(prefix+"rate", "is required: a positive number (change per second or minute)")
		}
		if c.Per != "second" && c.Per != "minute" {
			p.add(prefix+"per", "must be second or minute, got %s", quote(c.Per))
		}
		if _, err := window(c.Window, true); err != nil {
			p.add(prefix+"window", "%v", err)
		}
		if c.K != nil || c.Threshold != nil || c.MinSamples != 0 {
			p.add(prefix+"type", "a rate of change takes op, rate, per and window only")
		}
	default:
		p.add(prefix+"type", "must be threshold, zscore, rate_of_change or correlation, got %s", quote(c.Type))
	}
	return c, p
}

// window parses a window: a Go duration of 1s..MaxWindow.
func window(s string, required bool) (time.Duration, error) {
	if s == "" && !required {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d > MaxWindow {
		return 0, fmt.Errorf("must be a duration of 1s..%s such as \"5m\", got %s", MaxWindow, quote(s))
	}
	return d, nil
}

func checkName(name string) (string, error) {
	n := strings.TrimSpace(name)
	if n == "" || utf8.RuneCountInString(n) > MaxName || strings.ContainsFunc(n, isControl) {
		return "", fmt.Errorf("must be 1..%d characters without control characters", MaxName)
	}
	return n, nil
}

func checkPattern(p string) error {
	if len(p) > MaxPattern || strings.ContainsFunc(p, isControl) {
		return fmt.Errorf("must be at most %d characters without control characters", MaxPattern)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("%s is not a valid glob: %v", quote(p), err)
	}
	return nil
}

// matchMetric reports whether pattern matches the metric "<device>.<reading>"
// or its reading name alone, so "temp*" finds every device's temperature.
func matchMetric(pattern, metric, reading string) bool {
	if ok, _ := path.Match(pattern, metric); ok {
		return true
	}
	ok, _ := path.Match(pattern, reading)
	return ok
}

func validSeverity(s string) bool {
	return s == SeverityCritical || s == SeverityWarning || s == SeverityInfo
}

// severityRank orders severities: info < warning < critical; 0 for none.
func severityRank(s string) int {
	switch s {
	case SeverityInfo:
		return 1
	case SeverityWarning:
		return 2
	case SeverityCritical:
		return 3
	}
	return 0
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// quote quotes a value for a message, cut to a readable length.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}
