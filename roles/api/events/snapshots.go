package events

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// MaxSnapshotsPerAgent bounds the state snapshots kept per agent: the
// oldest go when one more is written, whatever the retention.
const MaxSnapshotsPerAgent = 1000

// maxHashCache bounds the agents whose last snapshot hash is remembered;
// past it the cache starts again empty (a miss costs one indexed read).
const maxHashCache = 100_000

// volatile are the members of a state report that change with every
// report without the agent's state changing: when it was made, counters,
// last-poll times, the runtime's own "Up 3 minutes". They are left out of
// the hash and of the comparison of two reports.
var (
	volatileTop      = []string{"timestamp", "buffer"}
	volatileEndpoint = []string{"lastSeen", "lastPoll", "polls", "pollFailures", "readsGood", "readsBad", "communicationQuality"}
	volatileService  = []string{"status", "retries", "nextRetry"}
)

// significant returns the report without its volatile members; doc is
// not changed.
func significant(doc map[string]any) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		out[k] = v
	}
	for _, k := range volatileTop {
		delete(out, k)
	}
	if eps, ok := out["endpoints"].([]any); ok {
		out["endpoints"] = stripEach(eps, volatileEndpoint)
	}
	if apps, ok := out["apps"].(map[string]any); ok {
		a := copyWithout(apps)
		if rt, ok := a["runtime"].(map[string]any); ok {
			a["runtime"] = copyWithout(rt, "since")
		}
		if list, ok := a["apps"].([]any); ok {
			apps := make([]any, len(list))
			for i, app := range list {
				m, ok := app.(map[string]any)
				if !ok {
					apps[i] = app
					continue
				}
				m = copyWithout(m)
				if svcs, ok := m["services"].([]any); ok {
					m["services"] = stripEach(svcs, volatileService)
				}
				apps[i] = m
			}
			a["apps"] = apps
		}
		out["apps"] = a
	}
	return out
}

func copyWithout(m map[string]any, drop ...string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range drop {
		delete(out, k)
	}
	return out
}

func stripEach(list []any, drop []string) []any {
	out := make([]any, len(list))
	for i, v := range list {
		if m, ok := v.(map[string]any); ok {
			out[i] = copyWithout(m, drop...)
		} else {
			out[i] = v
		}
	}
	return out
}

// stateHash is the hash of a report's significant members; encoding/json
// sorts object keys, so equal states hash equal.
func stateHash(doc map[string]any) (string, error) {
	b, err := json.Marshal(significant(doc))
	if err != nil {
		return "", fmt.Errorf("hash state report: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// Snapshots keeps a copy of an agent's state report each time what it
// reports changed (docs/events.md, "State snapshots").
type Snapshots struct {
	db *db.DB
	m  *Metrics

	mu   sync.Mutex
	last map[string]string // agent -> hash of its last snapshot
}

// NewSnapshots returns the snapshot writer of d; m counts what it does.
func NewSnapshots(d *db.DB, m *Metrics) *Snapshots {
	return &Snapshots{db: d, m: m, last: map[string]string{}}
}

// Record keeps doc, the state report of agent of the tenant whose topic
// id is tenantKey, made at reportedAt, unless it says what the agent's
// last snapshot says. An agent the registry does not hold is skipped.
func (s *Snapshots) Record(ctx context.Context, tenantKey, agent string, doc []byte, reportedAt time.Time) error {
	tenant, err := codec.UUIDFromID(tenantKey)
	if err != nil {
		return fmt.Errorf("state snapshot: tenant: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return fmt.Errorf("state snapshot: %w", err)
	}
	hash, err := stateHash(m)
	if err != nil {
		return err
	}
	s.mu.Lock()
	known, cached := s.last[agent]
	s.mu.Unlock()
	if cached && known == hash {
		s.m.snapshots.WithLabelValues("unchanged").Inc()
		return nil
	}
	conn, d := s.db.SQL(), s.db.Dialect()
	if !cached {
		err := conn.QueryRowContext(ctx, `SELECT hash FROM agent_state_snapshots WHERE agent_uuid = $1 AND tenant_uuid = $2
			ORDER BY reported_at DESC, id DESC LIMIT 1`, agent, tenant).Scan(&known)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("state snapshot: last hash: %w", err)
		case known == hash:
			s.remember(agent, hash)
			s.m.snapshots.WithLabelValues("unchanged").Inc()
			return nil
		}
	}
	var one int
	err = conn.QueryRowContext(ctx, `SELECT 1 FROM agents WHERE uuid = $1 AND tenant_uuid = $2`, agent, tenant).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		s.m.snapshots.WithLabelValues("unknown_agent").Inc()
		return nil
	}
	if err != nil {
		return fmt.Errorf("state snapshot: look up agent: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO agent_state_snapshots (tenant_uuid, agent_uuid, reported_at, hash, report)
		VALUES ($1, $2, $3, $4, $5)`, tenant, agent, d.TimeArg(reportedAt), hash, string(doc)); err != nil {
		return fmt.Errorf("state snapshot: %w", err)
	}
	// Ids only grow: everything at or below the one past the last N goes.
	if _, err := conn.ExecContext(ctx, `DELETE FROM agent_state_snapshots WHERE agent_uuid = $1 AND id <= (
		SELECT id FROM agent_state_snapshots WHERE agent_uuid = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)`, agent, MaxSnapshotsPerAgent); err != nil {
		return fmt.Errorf("state snapshot: trim: %w", err)
	}
	s.remember(agent, hash)
	s.m.snapshots.WithLabelValues("stored").Inc()
	return nil
}

func (s *Snapshots) remember(agent, hash string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.last) >= maxHashCache {
		clear(s.last)
	}
	s.last[agent] = hash
}

// forget drops what the cache knows, after the pruner deleted snapshots.
func (s *Snapshots) forget() {
	s.mu.Lock()
	clear(s.last)
	s.mu.Unlock()
}
