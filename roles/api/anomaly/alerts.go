package anomaly

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
)

// Notification target types.
const (
	TargetWebhook = "webhook"
	TargetEmail   = "email"
	TargetLive    = "live"
)

// Alert rule limits.
const (
	MaxAlertRulesPerTenant = 100
	maxRuleIDs             = 50
	minSecret              = 16
	maxSecret              = 256
	maxURL                 = 2048
)

// Target is where an alert rule's notifications go: a webhook URL, an
// e-mail address, or the tenant's live stream (GET /agents/events).
type Target struct {
	Type string `json:"type"`
	URL  string `json:"url,omitempty"`
	To   string `json:"to,omitempty"`
}

// AlertCondition is which incidents an alert rule notifies about: those of
// the listed rules (any rule when empty), at least MinSeverity, with at
// least MinScore; IncludeEdgeAlerts adds the agents' own anomaly alerts
// (agent events of kind anomaly_alert) that meet MinSeverity.
type AlertCondition struct {
	RuleIDs           []string `json:"ruleIds"`
	MinSeverity       string   `json:"minSeverity,omitempty"`
	MinScore          *float64 `json:"minScore,omitempty"`
	IncludeEdgeAlerts bool     `json:"includeEdgeAlerts,omitempty"`
}

// Delivery is the outcome of an alert rule's latest notification.
type Delivery struct {
	// Status is "delivered", "retrying" or "failed"; "" before the first.
	Status   string     `json:"status"`
	Error    string     `json:"error,omitempty"`
	Attempts int        `json:"attempts"`
	At       *time.Time `json:"at"`
}

// AlertRule ties a condition to a target.
type AlertRule struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Enabled   bool           `json:"enabled"`
	Condition AlertCondition `json:"condition"`
	Target    Target         `json:"target"`
	// HasSecret tells a webhook's secret is set; the secret itself is
	// answered once, by the POST that made it.
	HasSecret    bool      `json:"hasSecret"`
	Secret       string    `json:"secret,omitempty"`
	LastDelivery Delivery  `json:"lastDelivery"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`

	secret string
	tenant string
}

// AlertRuleInput is the body of POST and PUT /anomaly/alerts. A PUT
// replaces the alert rule; a webhook that leaves out secret keeps its
// own.
type AlertRuleInput struct {
	Name      *string         `json:"name"`
	Enabled   *bool           `json:"enabled"`
	Condition *AlertCondition `json:"condition"`
	Target    *Target         `json:"target"`
	Secret    *string         `json:"secret"`
}

func (in AlertRuleInput) normalize(mailer bool) (AlertRule, error) {
	var p problems
	a := AlertRule{Enabled: in.Enabled == nil || *in.Enabled}
	if in.Name == nil {
		p.add("name", "is required")
	} else if n, err := checkName(*in.Name); err != nil {
		p.add("name", "%v", err)
	} else {
		a.Name = n
	}
	if in.Condition != nil {
		a.Condition = *in.Condition
	}
	if a.Condition.RuleIDs == nil {
		a.Condition.RuleIDs = []string{}
	}
	if len(a.Condition.RuleIDs) > maxRuleIDs {
		p.add("condition.ruleIds", "at most %d, got %d", maxRuleIDs, len(a.Condition.RuleIDs))
	}
	for i, id := range a.Condition.RuleIDs {
		u, err := codec.ParseUUID(id)
		if err != nil {
			p.add(fmt.Sprintf("condition.ruleIds[%d]", i), "must be a rule id (a hyphenated UUID), got %s", quote(id))
			continue
		}
		a.Condition.RuleIDs[i] = u.String()
	}
	if s := a.Condition.MinSeverity; s != "" && !validSeverity(s) {
		p.add("condition.minSeverity", "must be critical, warning or info, got %s", quote(s))
	}
	if m := a.Condition.MinScore; m != nil && (!finite(*m) || *m < 0) {
		p.add("condition.minScore", "must be a number of 0 or more")
	}
	if in.Target == nil {
		p.add("target", "is required: {\"type\": \"webhook\", \"url\": ...}, {\"type\": \"email\", \"to\": ...} or {\"type\": \"live\"}")
		return a, p.err()
	}
	a.Target = *in.Target
	switch a.Target.Type {
	case TargetWebhook:
		u, err := url.Parse(a.Target.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(a.Target.URL) > maxURL || u.User != nil {
			p.add("target.url", "must be an http or https URL without credentials, at most %d characters", maxURL)
		}
		if a.Target.To != "" {
			p.add("target.to", "is for an email target")
		}
	case TargetEmail:
		addr, err := mail.ParseAddress(a.Target.To)
		if err != nil || strings.ContainsAny(a.Target.To, "\r\n") {
			p.add("target.to", "must be an e-mail address, got %s", quote(a.Target.To))
		} else {
			a.Target.To = addr.Address
		}
		if !mailer {
			p.add("target.type", "email needs a mail server (auth.smtp_host, SMTP_HOST), and none is configured")
		}
		if a.Target.URL != "" {
			p.add("target.url", "is for a webhook target")
		}
	case TargetLive:
		if a.Target.URL != "" || a.Target.To != "" {
			p.add("target", "a live target takes no url or to")
		}
	default:
		p.add("target.type", "must be webhook, email or live, got %s", quote(a.Target.Type))
	}
	if in.Secret != nil {
		if a.Target.Type != TargetWebhook {
			p.add("secret", "is for a webhook target")
		} else if n := len(*in.Secret); n < minSecret || n > maxSecret || strings.ContainsFunc(*in.Secret, isControl) {
			p.add("secret", "must be %d..%d characters without control characters", minSecret, maxSecret)
		} else {
			a.secret = *in.Secret
		}
	}
	return a, p.err()
}

// newSecret makes a webhook secret: 32 random bytes in hex.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// matches reports whether an incident of rule, severity and score is one
// the alert rule notifies about.
func (a *AlertRule) matches(rule, severity string, score float64) bool {
	if len(a.Condition.RuleIDs) > 0 && !slices.Contains(a.Condition.RuleIDs, rule) {
		return false
	}
	if severityRank(severity) < severityRank(a.Condition.MinSeverity) {
		return false
	}
	return a.Condition.MinScore == nil || score >= *a.Condition.MinScore
}

// --- store ---

const alertColumns = `id, tenant_uuid, name, enabled, spec, target_type, target, secret, last_status, last_error, last_attempts, last_attempt_at,
created_at, updated_at`

// alertSpec is what the spec column holds.
type alertSpec struct {
	Condition AlertCondition `json:"condition"`
}

func scanAlert(r scanner) (AlertRule, error) {
	var (
		a                AlertRule
		enabled, last    any
		doc, target      string
		created, updated db.Timestamp
	)
	if err := r.Scan(&a.ID, &a.tenant, &a.Name, &enabled, &doc, &a.Target.Type, &target, &a.secret, &a.LastDelivery.Status,
		&a.LastDelivery.Error, &a.LastDelivery.Attempts, &last, &created, &updated); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return AlertRule{}, ErrNotFound
		}
		return AlertRule{}, fmt.Errorf("read alert rule: %w", err)
	}
	var sp alertSpec
	if err := json.Unmarshal([]byte(doc), &sp); err != nil {
		return AlertRule{}, fmt.Errorf("read alert rule %s: %w", a.ID, err)
	}
	a.Condition = sp.Condition
	switch a.Target.Type {
	case TargetWebhook:
		a.Target.URL = target
	case TargetEmail:
		a.Target.To = target
	}
	if last != nil {
		var ts db.Timestamp
		if err := ts.Scan(last); err != nil {
			return AlertRule{}, fmt.Errorf("read alert rule %s: %w", a.ID, err)
		}
		a.LastDelivery.At = &ts.Time
	}
	a.Enabled, a.HasSecret = boolOf(enabled), a.secret != ""
	a.CreatedAt, a.UpdatedAt = created.Time, updated.Time
	return a, nil
}

func (s *store) alertRules(ctx context.Context, tenant string, enabledOnly bool) ([]AlertRule, error) {
	q := `SELECT ` + alertColumns + ` FROM anomaly_alert_rules WHERE tenant_uuid = $1`
	args := []any{tenant}
	if enabledOnly {
		q += ` AND enabled = $2`
		args = append(args, true)
	}
	rows, err := s.db.ReadSQL().QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list alert rules: %w", err)
	}
	defer rows.Close()
	out := []AlertRule{}
	for rows.Next() {
		a, err := scanAlert(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list alert rules: %w", err)
	}
	return out, nil
}

func (s *store) alertRule(ctx context.Context, tenant, id string) (AlertRule, error) {
	u, err := codec.ParseUUID(id)
	if err != nil {
		return AlertRule{}, fmt.Errorf("%w: alert rule %s", ErrNotFound, quote(id))
	}
	a, err := scanAlert(s.db.ReadSQL().QueryRowContext(ctx, `SELECT `+alertColumns+` FROM anomaly_alert_rules WHERE id = $1 AND tenant_uuid = $2`,
		u.String(), tenant))
	if errors.Is(err, ErrNotFound) {
		return AlertRule{}, fmt.Errorf("%w: alert rule %s", ErrNotFound, u.String())
	}
	return a, err
}

// checkRuleIDs refuses rule ids that are not the tenant's rules.
func (s *store) checkRuleIDs(ctx context.Context, tenant string, ids []string) error {
	var p problems
	for i, id := range ids {
		if _, err := s.rule(ctx, tenant, id); errors.Is(err, ErrNotFound) {
			p.add(fmt.Sprintf("condition.ruleIds[%d]", i), "no such rule in this tenant: %s", id)
		} else if err != nil {
			return err
		}
	}
	return p.err()
}

func targetText(t Target) string {
	switch t.Type {
	case TargetWebhook:
		return t.URL
	case TargetEmail:
		return t.To
	}
	return ""
}

func (s *store) saveAlertRule(ctx context.Context, tenant, id string, a AlertRule) (AlertRule, error) {
	doc, err := json.Marshal(alertSpec{Condition: a.Condition})
	if err != nil {
		return AlertRule{}, fmt.Errorf("encode alert rule: %w", err)
	}
	now := s.stamp()
	if id == "" {
		var n int
		if err := s.db.ReadSQL().QueryRowContext(ctx, `SELECT count(*) FROM anomaly_alert_rules WHERE tenant_uuid = $1`, tenant).Scan(&n); err != nil {
			return AlertRule{}, fmt.Errorf("count alert rules: %w", err)
		}
		if n >= MaxAlertRulesPerTenant {
			return AlertRule{}, &ValidationError{Problems: []string{fmt.Sprintf("alert rules: a tenant has at most %d; delete one first", MaxAlertRulesPerTenant)}}
		}
		a.ID, a.CreatedAt = codec.NewUUID().String(), now
		if a.Target.Type == TargetWebhook && a.secret == "" {
			a.secret = newSecret()
		}
		_, err = s.db.SQL().ExecContext(ctx, `INSERT INTO anomaly_alert_rules (id, tenant_uuid, name, enabled, spec, target_type, target, secret,
created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
			a.ID, tenant, a.Name, a.Enabled, string(doc), a.Target.Type, targetText(a.Target), a.secret, s.t(now))
		if err != nil {
			return AlertRule{}, fmt.Errorf("insert alert rule: %w", err)
		}
		a.UpdatedAt, a.HasSecret = now, a.secret != ""
		// The one answer that shows the secret: the caller keeps it to
		// verify signatures.
		a.Secret = a.secret
		return a, nil
	}
	old, err := s.alertRule(ctx, tenant, id)
	if err != nil {
		return AlertRule{}, err
	}
	switch {
	case a.Target.Type != TargetWebhook:
		a.secret = ""
	case a.secret == "" && old.secret != "":
		a.secret = old.secret
	case a.secret == "":
		a.secret = newSecret()
		a.Secret = a.secret
	default:
		a.Secret = a.secret
	}
	_, err = s.db.SQL().ExecContext(ctx, `UPDATE anomaly_alert_rules SET name = $1, enabled = $2, spec = $3, target_type = $4, target = $5,
secret = $6, updated_at = $7 WHERE id = $8 AND tenant_uuid = $9`,
		a.Name, a.Enabled, string(doc), a.Target.Type, targetText(a.Target), a.secret, s.t(now), old.ID, tenant)
	if err != nil {
		return AlertRule{}, fmt.Errorf("update alert rule: %w", err)
	}
	a.ID, a.CreatedAt, a.UpdatedAt, a.LastDelivery, a.HasSecret = old.ID, old.CreatedAt, now, old.LastDelivery, a.secret != ""
	return a, nil
}

// recordDelivery keeps the outcome of an alert rule's latest delivery.
func (s *store) recordDelivery(ctx context.Context, id string, d Delivery) error {
	_, err := s.db.SQL().ExecContext(ctx, `UPDATE anomaly_alert_rules SET last_status = $1, last_error = $2, last_attempts = $3, last_attempt_at = $4
WHERE id = $5`, d.Status, db.StorableText(d.Error), d.Attempts, s.t(*d.At), id)
	if err != nil {
		return fmt.Errorf("record delivery: %w", err)
	}
	return nil
}

// --- routes ---

func (h *handler) listAlerts(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	list, err := h.s.alertRules(c.Request.Context(), who.TenantUUID, false)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"alerts": list})
}

func (h *handler) createAlert(c *gin.Context) { h.saveAlert(c, "") }

func (h *handler) updateAlert(c *gin.Context) { h.saveAlert(c, c.Param("id")) }

func (h *handler) saveAlert(c *gin.Context, id string) {
	who, _ := h.Caller(c)
	var in AlertRuleInput
	if !httpx.BindStrict(c, maxBody, &in, h.WriteError) {
		return
	}
	ctx := c.Request.Context()
	if id != "" {
		// An unknown id is a 404 before the body's problems.
		if _, err := h.s.alertRule(ctx, who.TenantUUID, id); err != nil {
			h.fail(c, err)
			return
		}
	}
	a, err := in.normalize(h.Mailer != nil)
	if err == nil {
		err = h.s.checkRuleIDs(ctx, who.TenantUUID, a.Condition.RuleIDs)
	}
	if err == nil {
		a, err = h.s.saveAlertRule(ctx, who.TenantUUID, id, a)
	}
	if err != nil {
		h.fail(c, err)
		return
	}
	kind, status := AuditAlertCreated, http.StatusCreated
	if id != "" {
		kind, status = AuditAlertUpdated, http.StatusOK
	}
	h.audit(c, who, kind, a.ID, map[string]any{"name": a.Name, "target": a.Target.Type})
	c.JSON(status, a)
}
