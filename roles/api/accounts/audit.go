package accounts

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// Audit event kinds.
const (
	AuditLogin           = "auth.login"
	AuditLoginFailed     = "auth.login_failed"
	AuditRefresh         = "auth.refresh"
	AuditRefreshReuse    = "auth.refresh_reuse"
	AuditLogout          = "auth.logout"
	AuditRegister        = "auth.register"
	AuditBootstrap       = "auth.bootstrap_admin"
	AuditPasswordChange  = "auth.password_changed"
	AuditPasswordReset   = "auth.password_reset"
	AuditUserCreated     = "user.created"
	AuditUserUpdated     = "user.updated"
	AuditUserDeleted     = "user.deleted"
	AuditAPIKeyCreated   = "api_key.created"
	AuditAPIKeyRevoked   = "api_key.revoked"
	AuditInviteCreated   = "invite.created"
	AuditInviteCancelled = "invite.cancelled"
	AuditInviteAccepted  = "invite.accepted"
)

// Event is one audit record. Tenant is empty for events no tenant can be
// named for (a failed login with an unknown account).
type Event struct {
	ID        int64          `json:"id"`
	Tenant    string         `json:"tenantId,omitempty"`
	At        time.Time      `json:"at"`
	Kind      string         `json:"kind"`
	Actor     string         `json:"actor"`
	ActorKind string         `json:"actorKind"`
	Target    string         `json:"target,omitempty"`
	IP        string         `json:"ip,omitempty"`
	Outcome   string         `json:"outcome"`
	Detail    map[string]any `json:"detail,omitempty"`
}

// Record stores e; At defaults to now and Outcome to "success".
func (s *Store) Record(ctx context.Context, e Event) error {
	conn, d := s.sql()
	if e.At.IsZero() {
		e.At = s.now()
	}
	if e.Outcome == "" {
		e.Outcome = "success"
	}
	// Events describe refused input too: what the client sent must not be
	// what stops the record from being written.
	e.Actor, e.Target = db.StorableText(e.Actor), db.StorableText(e.Target)
	for k, v := range e.Detail {
		if s, ok := v.(string); ok {
			e.Detail[k] = db.StorableText(s)
		}
	}
	var detail any
	if len(e.Detail) > 0 {
		b, err := json.Marshal(e.Detail)
		if err != nil {
			return fmt.Errorf("audit detail: %w", err)
		}
		detail = string(b)
	}
	_, err := conn.ExecContext(ctx, `INSERT INTO audit_events (tenant_uuid, at, kind, actor, actor_kind, target, ip, outcome, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		nullString(e.Tenant), d.TimeArg(e.At), e.Kind, e.Actor, e.ActorKind, e.Target, e.IP, e.Outcome, detail)
	if err != nil {
		return fmt.Errorf("record audit event %s: %w", e.Kind, err)
	}
	return nil
}

// EventFilter selects audit events of one tenant, newest first. Before is
// the id to continue below (the previous page's nextBefore).
type EventFilter struct {
	From, To time.Time
	Kind     string
	Actor    string
	Before   int64
	// Limit is the page size; zero or less is DefaultEventsLimit.
	Limit int
}

// DefaultEventsLimit is the page size of Events when none is given.
const DefaultEventsLimit = 100

// Events lists a tenant's audit events by f, and the cursor of the next
// page (0 when there is none).
func (s *Store) Events(ctx context.Context, tenant string, f EventFilter) ([]Event, int64, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultEventsLimit
	}
	conn, d := s.sql()
	var b db.SQLBuilder
	b.Write(`SELECT id, tenant_uuid, at, kind, actor, actor_kind, target, ip, outcome, detail FROM audit_events WHERE tenant_uuid = `, b.Arg(tenant))
	if !f.From.IsZero() {
		b.Write(` AND at >= `, b.Arg(d.TimeArg(f.From)))
	}
	if !f.To.IsZero() {
		b.Write(` AND at < `, b.Arg(d.TimeArg(f.To)))
	}
	if f.Kind != "" {
		b.Write(` AND kind = `, b.Arg(f.Kind))
	}
	if f.Actor != "" {
		b.Write(` AND actor = `, b.Arg(f.Actor))
	}
	if f.Before > 0 {
		b.Write(` AND id < `, b.Arg(f.Before))
	}
	b.Write(` ORDER BY id DESC LIMIT `, b.Arg(f.Limit+1))
	rows, err := conn.QueryContext(ctx, b.String(), b.Args()...)
	if err != nil {
		return nil, 0, fmt.Errorf("list audit events: %w", err)
	}
	defer rows.Close()
	events := []Event{}
	for rows.Next() {
		var e Event
		var tenantCol, detail sql.NullString
		var at db.Timestamp
		if err := rows.Scan(&e.ID, &tenantCol, &at, &e.Kind, &e.Actor, &e.ActorKind, &e.Target, &e.IP, &e.Outcome, &detail); err != nil {
			return nil, 0, fmt.Errorf("list audit events: %w", err)
		}
		e.Tenant, e.At = tenantCol.String, at.Time
		if detail.Valid && detail.String != "" {
			if err := json.Unmarshal([]byte(detail.String), &e.Detail); err != nil {
				return nil, 0, fmt.Errorf("audit event %d detail: %w", e.ID, err)
			}
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list audit events: %w", err)
	}
	var next int64
	if len(events) > f.Limit {
		events = events[:f.Limit]
		next = events[len(events)-1].ID
	}
	return events, next, nil
}
