package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
)

// Secrets hold the values a target-state document refers to by name
// (docs/target-state.md, section Secrets). They are write-only: users set
// and delete them and list their names; only the agent's own
// device-authenticated GET /device/:uuid/state carries values.

// maxSecretValue bounds one secret value.
const maxSecretValue = 8 << 10

// Secret is a secret as users see it: never its value.
type Secret struct {
	Name string `json:"name"`
	// Scope is "tenant" or "agent".
	Scope     string    `json:"scope"`
	AgentUUID string    `json:"agentUuid,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy,omitempty"`
}

// secretScope is the scope column: "" for the tenant, else the agent.
func (s *Store) secretScope(ctx context.Context, tenant, agent string) (string, error) {
	if agent == "" {
		return "", nil
	}
	conn, _ := s.sql()
	a, err := s.agent(ctx, conn, tenant, agent)
	if err != nil {
		return "", err
	}
	return a.UUID, nil
}

func checkSecretName(name string) error {
	if !control.ValidSecretName(name) {
		return fmt.Errorf("%w: name: must be 1..64 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalid)
	}
	return nil
}

// PutSecret sets a secret of the tenant (agent "") or of one of its
// agents, and reports whether it was created.
func (s *Store) PutSecret(ctx context.Context, tenant, agent, name, value, by string) (Secret, bool, error) {
	if err := checkSecretName(name); err != nil {
		return Secret{}, false, err
	}
	if value == "" || len(value) > maxSecretValue {
		return Secret{}, false, fmt.Errorf("%w: value: must be 1..%d bytes", ErrInvalid, maxSecretValue)
	}
	scope, err := s.secretScope(ctx, tenant, agent)
	if err != nil {
		return Secret{}, false, err
	}
	conn, d := s.sql()
	now := s.now()
	res, err := conn.ExecContext(ctx, `UPDATE target_secrets SET value = $1, updated_at = $2, updated_by = $3
		WHERE tenant_uuid = $4 AND scope = $5 AND name = $6`, value, d.TimeArg(now), by, tenant, scope, name)
	if err != nil {
		return Secret{}, false, fmt.Errorf("set secret: %w", err)
	}
	created := false
	if n, _ := res.RowsAffected(); n == 0 {
		_, err = conn.ExecContext(ctx, `INSERT INTO target_secrets (tenant_uuid, scope, agent_uuid, name, value, updated_at, updated_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, tenant, scope, db.UUIDArg(scope), name, value, d.TimeArg(now), by)
		if db.IsUniqueViolation(err) {
			return Secret{}, false, fmt.Errorf("%w: the secret changed concurrently; retry", ErrConflict)
		}
		if err != nil {
			return Secret{}, false, fmt.Errorf("create secret: %w", err)
		}
		created = true
	}
	return secretView(scope, name, now.Truncate(time.Microsecond), by), created, nil
}

func secretView(scope, name string, at time.Time, by string) Secret {
	sec := Secret{Name: name, Scope: "tenant", UpdatedAt: at, UpdatedBy: by}
	if scope != "" {
		sec.Scope, sec.AgentUUID = "agent", scope
	}
	return sec
}

// Secrets lists the names of the tenant's secrets (agent "") or of one of
// its agents.
func (s *Store) Secrets(ctx context.Context, tenant, agent string) ([]Secret, error) {
	scope, err := s.secretScope(ctx, tenant, agent)
	if err != nil {
		return nil, err
	}
	conn, _ := s.sql()
	rows, err := conn.QueryContext(ctx, `SELECT name, updated_at, updated_by FROM target_secrets
		WHERE tenant_uuid = $1 AND scope = $2 ORDER BY name`, tenant, scope)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	out := []Secret{}
	for rows.Next() {
		var name, by string
		var at db.Timestamp
		if err := rows.Scan(&name, &at, &by); err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		out = append(out, secretView(scope, name, at.Time, by))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret removes a secret; ErrNotFound when there is none.
func (s *Store) DeleteSecret(ctx context.Context, tenant, agent, name string) error {
	scope, err := s.secretScope(ctx, tenant, agent)
	if err != nil {
		return err
	}
	conn, _ := s.sql()
	res, err := conn.ExecContext(ctx, `DELETE FROM target_secrets WHERE tenant_uuid = $1 AND scope = $2 AND name = $3`, tenant, scope, name)
	if err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: no secret %q", ErrNotFound, name)
	}
	return nil
}

// ResolvedTargetState is the agent's target state as it receives it
// (EffectiveTargetState: merged with its fleet's template) with every secret
// reference replaced by its value (the agent's own secret before the
// tenant's of the same name), for the agent alone. tag identifies the
// values it carries ("" when it carries none), so the ETag moves when a
// value changes although the version does not.
func (s *Store) ResolvedTargetState(ctx context.Context, tenant, agent string) (ts TargetState, tag string, err error) {
	ts, _, err = s.EffectiveTargetState(ctx, tenant, agent)
	if err != nil {
		return ts, "", err
	}
	doc, err := control.ParseTargetState(ts.State)
	if err != nil {
		// A document stored before documents were checked has no
		// references to resolve: the agent gets it as it is, and refuses
		// it naming the problem.
		return ts, "", nil
	}
	names := doc.SecretRefs()
	if len(names) == 0 {
		return ts, "", nil
	}
	values, err := s.secretValues(ctx, tenant, ts.AgentUUID, names)
	if err != nil {
		return ts, "", err
	}
	state, err := control.ResolveSecrets(ts.State, func(n string) (string, bool) {
		v, ok := values[n]
		return v, ok
	})
	if err != nil {
		return ts, "", fmt.Errorf("resolve target state: %w", err)
	}
	ts.State = state
	h := sha256.New()
	for _, n := range names {
		v, ok := values[n]
		fmt.Fprintf(h, "%s\x00%t\x00%s\x00", n, ok, v)
	}
	return ts, hex.EncodeToString(h.Sum(nil))[:12], nil
}

// secretValues reads the values of names for agent: its own first, then
// the tenant's.
func (s *Store) secretValues(ctx context.Context, tenant, agent string, names []string) (map[string]string, error) {
	conn, _ := s.sql()
	rows, err := conn.QueryContext(ctx, `SELECT scope, name, value FROM target_secrets
		WHERE tenant_uuid = $1 AND (scope = '' OR scope = $2)`, tenant, agent)
	if err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var scope, name, value string
		if err := rows.Scan(&scope, &name, &value); err != nil {
			return nil, fmt.Errorf("read secrets: %w", err)
		}
		if !slices.Contains(names, name) {
			continue
		}
		if _, have := out[name]; !have || scope != "" {
			out[name] = value
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	return out, nil
}

// registerSecrets adds the secrets routes.
func registerSecrets(protected gin.IRoutes, h *handler) {
	protected.GET("/secrets", h.listSecrets(false))
	protected.PUT("/secrets/:name", h.adminOnly, h.putSecret(false))
	protected.DELETE("/secrets/:name", h.adminOnly, h.deleteSecret(false))
	protected.GET("/agents/:uuid/secrets", h.listSecrets(true))
	protected.PUT("/agents/:uuid/secrets/:name", h.adminOnly, h.putSecret(true))
	protected.DELETE("/agents/:uuid/secrets/:name", h.adminOnly, h.deleteSecret(true))
}

// Audit event kinds of the secrets routes; the detail names the secret,
// never its value.
const (
	AuditSecretSet     = "secret.set"
	AuditSecretDeleted = "secret.deleted"
)

func agentParam(c *gin.Context, ofAgent bool) string {
	if !ofAgent {
		return ""
	}
	return c.Param("uuid")
}

func (h *handler) listSecrets(ofAgent bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		who, ok := h.tenant(c)
		if !ok {
			return
		}
		list, err := h.Store.Secrets(c.Request.Context(), who.TenantUUID, agentParam(c, ofAgent))
		if err != nil {
			h.fail(c, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"secrets": list})
	}
}

func (h *handler) putSecret(ofAgent bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		who, _ := h.Caller(c)
		var in struct {
			Value *string `json:"value"`
		}
		if !h.bind(c, &in) {
			return
		}
		if in.Value == nil {
			h.WriteError(c, http.StatusBadRequest, "invalid_body", "body: value (a string) is required")
			return
		}
		name := c.Param("name")
		sec, created, err := h.Store.PutSecret(c.Request.Context(), who.TenantUUID, agentParam(c, ofAgent), name, *in.Value, who.UserID)
		if err != nil {
			h.fail(c, err)
			return
		}
		h.audit(c, who, AuditSecretSet, strings.TrimPrefix(sec.AgentUUID+"/"+name, "/"), map[string]any{"scope": sec.Scope, "created": created})
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		c.JSON(status, sec)
	}
}

func (h *handler) deleteSecret(ofAgent bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		who, _ := h.Caller(c)
		agent, name := agentParam(c, ofAgent), c.Param("name")
		if err := h.Store.DeleteSecret(c.Request.Context(), who.TenantUUID, agent, name); err != nil {
			h.fail(c, err)
			return
		}
		h.audit(c, who, AuditSecretDeleted, strings.TrimPrefix(agent+"/"+name, "/"), nil)
		c.Status(http.StatusNoContent)
	}
}
