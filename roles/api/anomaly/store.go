package anomaly

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// ErrNotFound is a record that is not the caller's tenant's (404).
var ErrNotFound = errors.New("not found")

// ErrConflict is a move the record's state does not allow (409).
var ErrConflict = errors.New("conflict")

// store keeps rules, incidents, alert rules and agent events; every
// statement a request makes filters on the caller's tenant.
type store struct {
	db  *db.DB
	now func() time.Time
}

func (s *store) t(t time.Time) any { return s.db.Dialect().TimeArg(t) }

// stamp is the clock at the databases' precision.
func (s *store) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

type scanner interface{ Scan(...any) error }

func boolOf(v any) bool { return v == true || v == int64(1) }

// --- rules ---

const ruleColumns = `id, tenant_uuid, name, type, severity, enabled, fleet_id, agent_uuid, spec, created_at, updated_at`

func scanRule(r scanner) (Rule, error) {
	var (
		x                Rule
		enabled          any
		fleet, agent     sql.NullString
		doc              string
		created, updated db.Timestamp
	)
	if err := r.Scan(&x.ID, &x.tenant, &x.Name, &x.Type, &x.Severity, &enabled, &fleet, &agent, &doc, &created, &updated); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Rule{}, ErrNotFound
		}
		return Rule{}, fmt.Errorf("read rule: %w", err)
	}
	var sp spec
	if err := json.Unmarshal([]byte(doc), &sp); err != nil {
		return Rule{}, fmt.Errorf("read rule %s: %w", x.ID, err)
	}
	typ := x.Type
	x.Condition, x.Conditions, x.RecoverAfter = sp.Condition, sp.Conditions, sp.RecoverAfter
	x.Type = typ
	x.Enabled = boolOf(enabled)
	x.Scope = Scope{FleetID: fleet.String, AgentUUID: agent.String}
	x.CreatedAt, x.UpdatedAt = created.Time, updated.Time
	return x, nil
}

func (s *store) rules(ctx context.Context, tenant string) ([]Rule, error) {
	return s.queryRules(ctx, `SELECT `+ruleColumns+` FROM anomaly_rules WHERE tenant_uuid = $1 ORDER BY created_at, id`, tenant)
}

// enabledRules are every tenant's enabled rules, for the evaluator.
func (s *store) enabledRules(ctx context.Context) ([]Rule, error) {
	return s.queryRules(ctx, `SELECT `+ruleColumns+` FROM anomaly_rules WHERE enabled = $1 ORDER BY tenant_uuid, created_at, id`, true)
}

func (s *store) queryRules(ctx context.Context, q string, args ...any) ([]Rule, error) {
	rows, err := s.db.ReadSQL().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	defer rows.Close()
	out := []Rule{}
	for rows.Next() {
		r, err := scanRule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	return out, nil
}

func (s *store) rule(ctx context.Context, tenant, id string) (Rule, error) {
	u, err := codec.ParseUUID(id)
	if err != nil {
		return Rule{}, fmt.Errorf("%w: rule %s", ErrNotFound, quote(id))
	}
	r, err := scanRule(s.db.ReadSQL().QueryRowContext(ctx, `SELECT `+ruleColumns+` FROM anomaly_rules WHERE id = $1 AND tenant_uuid = $2`, u.String(), tenant))
	if errors.Is(err, ErrNotFound) {
		return Rule{}, fmt.Errorf("%w: rule %s", ErrNotFound, u.String())
	}
	return r, err
}

// checkScope refuses a fleet or agent that is not the tenant's, naming
// the field (422: the body refers to what does not exist).
func (s *store) checkScope(ctx context.Context, tenant string, sc Scope) error {
	check := func(field, q, id string) error {
		var one int
		err := s.db.ReadSQL().QueryRowContext(ctx, q, id, tenant).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return &ValidationError{Problems: []string{field + ": no such " + map[string]string{"scope.fleetId": "fleet", "scope.agentUuid": "agent"}[field] + " in this tenant: " + id}}
		}
		if err != nil {
			return fmt.Errorf("look up %s: %w", field, err)
		}
		return nil
	}
	if sc.FleetID != "" {
		if err := check("scope.fleetId", `SELECT 1 FROM fleets WHERE id = $1 AND tenant_uuid = $2`, sc.FleetID); err != nil {
			return err
		}
	}
	if sc.AgentUUID != "" {
		if err := check("scope.agentUuid", `SELECT 1 FROM agents WHERE uuid = $1 AND tenant_uuid = $2`, sc.AgentUUID); err != nil {
			return err
		}
	}
	return nil
}

func (s *store) countRules(ctx context.Context, tenant string) (int, error) {
	var n int
	if err := s.db.ReadSQL().QueryRowContext(ctx, `SELECT count(*) FROM anomaly_rules WHERE tenant_uuid = $1`, tenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rules: %w", err)
	}
	return n, nil
}

func (s *store) createRule(ctx context.Context, tenant string, r Rule) (Rule, error) {
	doc, err := ruleSpec(r)
	if err != nil {
		return Rule{}, err
	}
	n, err := s.countRules(ctx, tenant)
	if err != nil {
		return Rule{}, err
	}
	if n >= MaxRulesPerTenant {
		return Rule{}, &ValidationError{Problems: []string{fmt.Sprintf("rules: a tenant has at most %d; delete one first", MaxRulesPerTenant)}}
	}
	r.ID, r.tenant = codec.NewUUID().String(), tenant
	r.CreatedAt = s.stamp()
	r.UpdatedAt = r.CreatedAt
	_, err = s.db.SQL().ExecContext(ctx, `INSERT INTO anomaly_rules (`+ruleColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
		r.ID, tenant, r.Name, r.Type, r.Severity, r.Enabled, db.UUIDArg(r.Scope.FleetID), db.UUIDArg(r.Scope.AgentUUID), string(doc), s.t(r.CreatedAt))
	if err != nil {
		return Rule{}, fmt.Errorf("insert rule: %w", err)
	}
	return r, nil
}

func (s *store) updateRule(ctx context.Context, tenant, id string, r Rule) (Rule, error) {
	old, err := s.rule(ctx, tenant, id)
	if err != nil {
		return Rule{}, err
	}
	doc, err := ruleSpec(r)
	if err != nil {
		return Rule{}, err
	}
	r.ID, r.tenant, r.CreatedAt = old.ID, tenant, old.CreatedAt
	r.UpdatedAt = s.stamp()
	if !r.UpdatedAt.After(old.UpdatedAt) {
		// The evaluator keys a rule's series by its update time.
		r.UpdatedAt = old.UpdatedAt.Add(time.Microsecond)
	}
	res, err := s.db.SQL().ExecContext(ctx, `UPDATE anomaly_rules SET name = $1, type = $2, severity = $3, enabled = $4, fleet_id = $5,
agent_uuid = $6, spec = $7, updated_at = $8 WHERE id = $9 AND tenant_uuid = $10`,
		r.Name, r.Type, r.Severity, r.Enabled, db.UUIDArg(r.Scope.FleetID), db.UUIDArg(r.Scope.AgentUUID), string(doc), s.t(r.UpdatedAt), r.ID, tenant)
	if err != nil {
		return Rule{}, fmt.Errorf("update rule: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Rule{}, fmt.Errorf("%w: rule %s", ErrNotFound, r.ID)
	}
	return r, nil
}

func (s *store) deleteRule(ctx context.Context, tenant, id string) error {
	u, err := codec.ParseUUID(id)
	if err != nil {
		return fmt.Errorf("%w: rule %s", ErrNotFound, quote(id))
	}
	res, err := s.db.SQL().ExecContext(ctx, `DELETE FROM anomaly_rules WHERE id = $1 AND tenant_uuid = $2`, u.String(), tenant)
	if err != nil {
		return fmt.Errorf("delete rule: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: rule %s", ErrNotFound, u.String())
	}
	return nil
}

// fleetMembers maps each fleet to its agents, for fleet-scoped rules.
func (s *store) fleetMembers(ctx context.Context) (map[string][]string, error) {
	rows, err := s.db.ReadSQL().QueryContext(ctx, `SELECT fleet_id, uuid FROM agents WHERE fleet_id IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("list fleet members: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var fleet, agent string
		if err := rows.Scan(&fleet, &agent); err != nil {
			return nil, fmt.Errorf("list fleet members: %w", err)
		}
		out[fleet] = append(out[fleet], agent)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list fleet members: %w", err)
	}
	return out, nil
}

// --- incidents ---

// Sensor is where an incident happened.
type Sensor struct {
	AgentUUID  string `json:"agentUuid"`
	DeviceName string `json:"deviceName"`
	Metric     string `json:"metric"`
}

// Incident is one firing of a rule on one series, from open to close.
type Incident struct {
	ID        string     `json:"id"`
	RuleID    string     `json:"ruleId"`
	RuleName  string     `json:"ruleName"`
	RuleType  string     `json:"ruleType"`
	Severity  string     `json:"severity"`
	Status    string     `json:"status"`
	Sensor    Sensor     `json:"sensor"`
	Value     float64    `json:"value"`
	Score     float64    `json:"score"`
	PeakScore float64    `json:"peakScore"`
	OpenedAt  time.Time  `json:"openedAt"`
	ClosedAt  *time.Time `json:"closedAt"`
	// DurationSeconds is closed (or now, while open) less opened.
	DurationSeconds float64 `json:"durationSeconds"`
	CloseReason     string  `json:"closeReason,omitempty"`
	ResolvedBy      string  `json:"resolvedBy,omitempty"`

	TenantUUID string `json:"-"`
	AgentUUID  string `json:"-"`
	DeviceName string `json:"-"`
	Metric     string `json:"-"`
}

const incidentColumns = `id, tenant_uuid, rule_key, rule_name, rule_type, severity, agent_uuid, device_name, metric, value, score, peak_score,
opened_at, closed_at, close_reason, resolved_by`

func scanIncident(r scanner, now time.Time) (Incident, error) {
	var (
		x        Incident
		opened   db.Timestamp
		closed   db.Timestamp
		isClosed any
		reason   sql.NullString
	)
	if err := r.Scan(&x.ID, &x.TenantUUID, &x.RuleID, &x.RuleName, &x.RuleType, &x.Severity, &x.AgentUUID, &x.DeviceName, &x.Metric,
		&x.Value, &x.Score, &x.PeakScore, &opened, &isClosed, &reason, &x.ResolvedBy); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Incident{}, ErrNotFound
		}
		return Incident{}, fmt.Errorf("read incident: %w", err)
	}
	x.OpenedAt = opened.Time
	x.Status = "open"
	end := now
	if isClosed != nil {
		if err := closed.Scan(isClosed); err != nil {
			return Incident{}, fmt.Errorf("read incident %s: %w", x.ID, err)
		}
		x.ClosedAt, x.Status, end = &closed.Time, "closed", closed.Time
	}
	x.CloseReason = reason.String
	x.DurationSeconds = max(end.Sub(x.OpenedAt).Seconds(), 0)
	x.Sensor = Sensor{AgentUUID: x.AgentUUID, DeviceName: x.DeviceName, Metric: x.Metric}
	return x, nil
}

// openIncident inserts inc unless its series has one open; it reports
// whether it did.
func (s *store) openIncident(ctx context.Context, inc *Incident) (bool, error) {
	inc.ID = codec.NewUUID().String()
	inc.OpenedAt = inc.OpenedAt.UTC().Truncate(time.Microsecond)
	res, err := s.db.SQL().ExecContext(ctx, `INSERT INTO anomaly_incidents (id, tenant_uuid, rule_id, rule_key, rule_name, rule_type, severity,
agent_uuid, device_name, metric, value, score, peak_score, opened_at)
VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12) ON CONFLICT DO NOTHING`,
		inc.ID, inc.TenantUUID, inc.RuleID, inc.RuleName, inc.RuleType, inc.Severity, inc.AgentUUID, inc.DeviceName, inc.Metric, inc.Value, inc.Score,
		s.t(inc.OpenedAt))
	if err != nil {
		return false, fmt.Errorf("insert incident: %w", err)
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		return false, nil
	}
	inc.Status, inc.PeakScore = "open", inc.Score
	inc.Sensor = Sensor{AgentUUID: inc.AgentUUID, DeviceName: inc.DeviceName, Metric: inc.Metric}
	return true, nil
}

// recoverIncident closes the series' open incident at t.
func (s *store) recoverIncident(ctx context.Context, rule, agent, metric string, t time.Time, peak float64) (Incident, bool, error) {
	return s.closeWhere(ctx, `rule_key = $5 AND agent_uuid = $6 AND metric = $7 AND closed_at IS NULL`, t, "recovered", "", peak, rule, agent, metric)
}

// resolveIncident closes an open incident of tenant by hand.
func (s *store) resolveIncident(ctx context.Context, tenant, id, by string) (Incident, error) {
	u, err := codec.ParseUUID(id)
	if err != nil {
		return Incident{}, fmt.Errorf("%w: incident %s", ErrNotFound, quote(id))
	}
	inc, closed, err := s.closeWhere(ctx, `id = $5 AND tenant_uuid = $6 AND closed_at IS NULL`, s.stamp(), "resolved", by, 0, u.String(), tenant)
	if err != nil {
		return Incident{}, err
	}
	if !closed {
		cur, err := s.incident(ctx, tenant, u.String())
		if err != nil {
			return Incident{}, err
		}
		return cur, fmt.Errorf("%w: incident %s is already closed", ErrConflict, cur.ID)
	}
	return inc, nil
}

func (s *store) closeWhere(ctx context.Context, where string, t time.Time, reason, by string, peak float64, args ...any) (Incident, bool, error) {
	t = t.UTC().Truncate(time.Microsecond)
	// The where clause's arguments start at $5.
	q := `UPDATE anomaly_incidents SET closed_at = $1, close_reason = $2, resolved_by = $3,
peak_score = CASE WHEN peak_score < $4 THEN $4 ELSE peak_score END WHERE ` + where + ` RETURNING ` + incidentColumns
	inc, err := scanIncident(s.db.SQL().QueryRowContext(ctx, q, append([]any{s.t(t), reason, by, peak}, args...)...), t)
	if errors.Is(err, ErrNotFound) {
		return Incident{}, false, nil
	}
	if err != nil {
		return Incident{}, false, fmt.Errorf("close incident: %w", err)
	}
	return inc, true, nil
}

func (s *store) incident(ctx context.Context, tenant, id string) (Incident, error) {
	u, err := codec.ParseUUID(id)
	if err != nil {
		return Incident{}, fmt.Errorf("%w: incident %s", ErrNotFound, quote(id))
	}
	inc, err := scanIncident(s.db.ReadSQL().QueryRowContext(ctx, `SELECT `+incidentColumns+` FROM anomaly_incidents WHERE id = $1 AND tenant_uuid = $2`,
		u.String(), tenant), s.now())
	if errors.Is(err, ErrNotFound) {
		return Incident{}, fmt.Errorf("%w: incident %s", ErrNotFound, u.String())
	}
	return inc, err
}

// incidentFilter selects incidents of a tenant.
type incidentFilter struct {
	tenant, status, rule, agent string
	since                       time.Time
	limit                       int
}

func (s *store) incidents(ctx context.Context, f incidentFilter) ([]Incident, error) {
	q := `SELECT ` + incidentColumns + ` FROM anomaly_incidents WHERE tenant_uuid = $1`
	args := []any{f.tenant}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	switch f.status {
	case "open":
		q += ` AND closed_at IS NULL`
	case "closed":
		q += ` AND closed_at IS NOT NULL`
	}
	if f.rule != "" {
		q += ` AND rule_key = ` + arg(f.rule)
	}
	if f.agent != "" {
		q += ` AND agent_uuid = ` + arg(f.agent)
	}
	if !f.since.IsZero() {
		q += ` AND opened_at >= ` + arg(s.t(f.since))
	}
	q += ` ORDER BY opened_at DESC, id LIMIT ` + arg(f.limit)
	rows, err := s.db.ReadSQL().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list incidents: %w", err)
	}
	defer rows.Close()
	now := s.now()
	out := []Incident{}
	for rows.Next() {
		inc, err := scanIncident(rows, now)
		if err != nil {
			return nil, err
		}
		out = append(out, inc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list incidents: %w", err)
	}
	return out, nil
}

// openSeries are the series with an open incident, for the evaluator.
func (s *store) openSeries(ctx context.Context) (map[openKey]bool, error) {
	rows, err := s.db.ReadSQL().QueryContext(ctx, `SELECT rule_key, agent_uuid, metric FROM anomaly_incidents WHERE closed_at IS NULL`)
	if err != nil {
		return nil, fmt.Errorf("list open incidents: %w", err)
	}
	defer rows.Close()
	out := map[openKey]bool{}
	for rows.Next() {
		var k openKey
		if err := rows.Scan(&k.rule, &k.agent, &k.metric); err != nil {
			return nil, fmt.Errorf("list open incidents: %w", err)
		}
		out[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list open incidents: %w", err)
	}
	return out, nil
}
