package registry

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/db"
)

// Bounds of the target-state history (docs/target-state.md, "History").
const (
	// MaxTargetStateHistory is how many versions are kept per agent: the
	// oldest go in the transaction that adds one more.
	MaxTargetStateHistory = 100
	// DefaultHistoryLimit and MaxHistoryLimit bound one page of versions.
	DefaultHistoryLimit = 20
	MaxHistoryLimit     = 100
)

// TargetStateVersion is one committed version of an agent's own
// target-state document, without the document.
type TargetStateVersion struct {
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy"`
	// Size is the document's length in bytes.
	Size int `json:"size"`
}

// recordTargetStateTx keeps version of a's document in the history and
// drops what falls out of the last MaxTargetStateHistory versions, in the
// caller's transaction, so a version is in the history exactly when it
// was committed.
func recordTargetStateTx(ctx context.Context, tx *sql.Tx, d db.Dialect, tenant, agent string, ts TargetState) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO agent_target_state_history (agent_uuid, tenant_uuid, version, state, size, updated_at, updated_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, agent, tenant, ts.Version, string(ts.State), len(ts.State), d.TimeArg(ts.UpdatedAt), ts.UpdatedBy); err != nil {
		return fmt.Errorf("record target state version %d: %w", ts.Version, err)
	}
	// Versions only grow, so the last N are those above version - N.
	if _, err := tx.ExecContext(ctx, `DELETE FROM agent_target_state_history WHERE agent_uuid = $1 AND version <= $2`,
		agent, ts.Version-MaxTargetStateHistory); err != nil {
		return fmt.Errorf("trim target state history: %w", err)
	}
	return nil
}

// TargetStateHistory lists the kept versions of an agent's target state,
// newest first: at most limit of them below version before (0: from the
// newest). next is the before of the following page, 0 at the end.
func (s *Store) TargetStateHistory(ctx context.Context, tenant, agent string, before int64, limit int) (versions []TargetStateVersion, next int64, err error) {
	if limit < 1 || limit > MaxHistoryLimit {
		return nil, 0, fmt.Errorf("%w: limit must be 1..%d", ErrInvalid, MaxHistoryLimit)
	}
	conn, _ := s.sql()
	a, err := s.agent(ctx, conn, tenant, agent)
	if err != nil {
		return nil, 0, err
	}
	// One more than asked tells whether there is a next page.
	rows, err := conn.QueryContext(ctx, `SELECT version, updated_at, updated_by, size FROM agent_target_state_history
		WHERE agent_uuid = $1 AND tenant_uuid = $2 AND (CAST($3 AS BIGINT) <= 0 OR version < $3)
		ORDER BY version DESC LIMIT $4`, a.UUID, tenant, before, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("list target state history: %w", err)
	}
	defer rows.Close()
	versions = []TargetStateVersion{}
	for rows.Next() {
		var v TargetStateVersion
		var at db.Timestamp
		if err := rows.Scan(&v.Version, &at, &v.UpdatedBy, &v.Size); err != nil {
			return nil, 0, fmt.Errorf("list target state history: %w", err)
		}
		v.UpdatedAt = at.Time
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list target state history: %w", err)
	}
	if len(versions) > limit {
		versions = versions[:limit]
		next = versions[limit-1].Version
	}
	return versions, next, nil
}

// TargetStateAt returns version of an agent's own target-state document
// while the history keeps it.
func (s *Store) TargetStateAt(ctx context.Context, tenant, agent string, version int64) (TargetState, error) {
	conn, _ := s.sql()
	a, err := s.agent(ctx, conn, tenant, agent)
	if err != nil {
		return TargetState{}, err
	}
	ts := TargetState{AgentUUID: a.UUID, Version: version}
	var state string
	var at db.Timestamp
	err = conn.QueryRowContext(ctx, `SELECT state, updated_at, updated_by FROM agent_target_state_history
		WHERE agent_uuid = $1 AND tenant_uuid = $2 AND version = $3`, a.UUID, tenant, version).Scan(&state, &at, &ts.UpdatedBy)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return TargetState{}, fmt.Errorf("%w: version %d of the target state is not in the history (it keeps the last %d)",
			ErrNotFound, version, MaxTargetStateHistory)
	case err != nil:
		return TargetState{}, fmt.Errorf("get target state version %d: %w", version, err)
	}
	ts.State, ts.UpdatedAt = json.RawMessage(state), at.Time
	return ts, nil
}

// targetStateHistory answers GET /agents/:uuid/target-state/history
// (?limit=, ?cursor= from the previous page's nextCursor).
func (h *handler) targetStateHistory(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	limit, before, err := historyPage(c.Query("limit"), c.Query("cursor"))
	if err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", err.Error())
		return
	}
	versions, next, err := h.Store.TargetStateHistory(c.Request.Context(), who.TenantUUID, c.Param("uuid"), before, limit)
	if err != nil {
		h.fail(c, err)
		return
	}
	var cursor *string
	if next > 0 {
		s := strconv.FormatInt(next, 10)
		cursor = &s
	}
	c.JSON(http.StatusOK, gin.H{"versions": versions, "nextCursor": cursor})
}

// historyPage reads a page's limit and cursor (a version: the page holds
// the versions below it).
func historyPage(limit, cursor string) (n int, before int64, err error) {
	n = DefaultHistoryLimit
	if limit != "" {
		n, err = strconv.Atoi(limit)
		if err != nil || n < 1 || n > MaxHistoryLimit {
			return 0, 0, fmt.Errorf("limit must be 1..%d, got %q", MaxHistoryLimit, clip(limit))
		}
	}
	if cursor != "" {
		before, err = strconv.ParseInt(cursor, 10, 64)
		if err != nil || before < 1 {
			return 0, 0, errors.New("cursor is not one this API returned")
		}
	}
	return n, before, nil
}

// targetStateVersion answers GET /agents/:uuid/target-state/history/:version.
func (h *handler) targetStateVersion(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	v, err := strconv.ParseInt(c.Param("version"), 10, 64)
	if err != nil || v < 1 {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", fmt.Sprintf("version must be a positive integer, got %q", clip(c.Param("version"))))
		return
	}
	ts, err := h.Store.TargetStateAt(c.Request.Context(), who.TenantUUID, c.Param("uuid"), v)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, ts)
}
