package api

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// lastSeen moves each agent's agents.last_seen with its traffic: state and
// metrics reports and telemetry. Telemetry comes at up to hundreds of
// thousands of readings a second, so a message never costs a database
// write: touch keeps the latest time per agent in memory, and flush writes
// them all every interval in one statement per maxSeenRows agents.
//
// Several serve-api replicas flush the same agents: the statement only ever
// moves last_seen forward, so the latest time wins whoever writes last.
type lastSeen struct {
	db    *db.DB
	log   *slog.Logger
	m     *statusMetrics
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	pending map[seenKey]time.Time
}

// seenKey is an agent as its topic names it: the tenant's 22-character id
// (decoded only at flush, once per agent and interval) and the agent UUID.
type seenKey struct{ tenant, agent string }

// maxSeenRows bounds the rows of one statement: three parameters each stay
// far below both engines' parameter limits.
const maxSeenRows = 1000

func newLastSeen(d *db.DB, log *slog.Logger, m *statusMetrics, every time.Duration) *lastSeen {
	return &lastSeen{db: d, log: log, m: m, every: every, now: time.Now, pending: map[seenKey]time.Time{}}
}

// touch records that the agent was heard from now. tenant is the topic's
// 22-character tenant id, agent the agent UUID.
func (s *lastSeen) touch(tenant, agent string) {
	at := s.now()
	s.mu.Lock()
	if at.After(s.pending[seenKey{tenant, agent}]) {
		s.pending[seenKey{tenant, agent}] = at
	}
	s.mu.Unlock()
}

func (s *lastSeen) Name() string                { return "api-last-seen" }
func (s *lastSeen) Start(context.Context) error { return nil }

// Run flushes every interval, and once more when ctx ends so the last
// second of traffic is not lost at shutdown.
func (s *lastSeen) Run(ctx context.Context) error {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			s.flush(fctx)
			cancel()
			return nil
		case <-t.C:
			s.flush(ctx)
		}
	}
}

func (s *lastSeen) Stop(context.Context) error { return nil }

// flush writes what was touched since the last flush. Times a failed
// statement could not write go back to pending, unless a newer one came
// meanwhile, and are written at the next flush.
func (s *lastSeen) flush(ctx context.Context) {
	s.mu.Lock()
	if len(s.pending) == 0 {
		s.mu.Unlock()
		return
	}
	batch := s.pending
	s.pending = make(map[seenKey]time.Time, len(batch))
	s.mu.Unlock()

	rows := make([]seenRow, 0, len(batch))
	for k, at := range batch {
		tu, err := codec.DecodeID(k.tenant)
		if err != nil {
			continue // ParseTopic checked it; nothing else reaches touch
		}
		rows = append(rows, seenRow{tenant: tu.String(), agent: k.agent, at: at})
	}
	for len(rows) > 0 {
		n := min(len(rows), maxSeenRows)
		if err := writeLastSeen(ctx, s.db, rows[:n]); err != nil {
			s.m.seenFlushes.WithLabelValues("error").Inc()
			s.log.Warn("write agents' last seen", "agents", len(rows), "err", err)
			s.restore(batch)
			return
		}
		s.m.seenFlushes.WithLabelValues("ok").Inc()
		rows = rows[n:]
	}
}

func (s *lastSeen) restore(batch map[seenKey]time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, at := range batch {
		if at.After(s.pending[k]) {
			s.pending[k] = at
		}
	}
}

type seenRow struct {
	tenant, agent string
	at            time.Time
}

// writeLastSeen moves last_seen forward for rows in one statement. An
// agent that is not registered (its topic names no agents row) matches
// nothing.
func writeLastSeen(ctx context.Context, d *db.DB, rows []seenRow) error {
	dl := d.Dialect()
	var b strings.Builder
	args := make([]any, 0, 3*len(rows))
	b.WriteString("WITH v (uuid, tenant, t) AS (VALUES ")
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		n := len(args)
		if dl.Engine == db.Postgres {
			fmt.Fprintf(&b, "($%d::uuid, $%d::uuid, $%d::timestamptz)", n+1, n+2, n+3)
		} else {
			b.WriteString("($" + strconv.Itoa(n+1) + ", $" + strconv.Itoa(n+2) + ", $" + strconv.Itoa(n+3) + ")")
		}
		args = append(args, r.agent, r.tenant, dl.TimeArg(r.at.UTC().Truncate(time.Microsecond)))
	}
	b.WriteString(`)
UPDATE agents SET last_seen = v.t FROM v
WHERE agents.uuid = v.uuid AND agents.tenant_uuid = v.tenant AND (agents.last_seen IS NULL OR agents.last_seen < v.t)`)
	if _, err := d.SQL().ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("update last_seen of %d agents: %w", len(rows), err)
	}
	return nil
}
