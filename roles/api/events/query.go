package events

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// source is where an event comes from; its number is the second key of
// the log's order, after the time.
type source int

const (
	srcAudit source = iota + 1
	srcSnapshot
	srcTargetVersion
	srcIncidentOpened
	srcIncidentClosed
)

// sourceNames name the sources in answers and event ids.
var sourceNames = map[source]string{
	srcAudit:          "audit",
	srcSnapshot:       "state_report",
	srcTargetVersion:  "target_state",
	srcIncidentOpened: "incident",
	srcIncidentClosed: "incident",
}

// Event is one entry of the log. ID is stable and names the event in
// compare and replay requests.
type Event struct {
	ID        string         `json:"id"`
	At        time.Time      `json:"at"`
	Kind      string         `json:"kind"`
	Source    string         `json:"source"`
	AgentUUID string         `json:"agentUuid,omitempty"`
	Actor     string         `json:"actor,omitempty"`
	ActorKind string         `json:"actorKind,omitempty"`
	Target    string         `json:"target,omitempty"`
	IP        string         `json:"ip,omitempty"`
	Outcome   string         `json:"outcome,omitempty"`
	Detail    map[string]any `json:"detail,omitempty"`

	pos cursor
}

// cursor is a position in the log's order: (time, source, sequence, key).
// Sequence and key are the source's own: the audit or snapshot id; the
// version and agent of a target-state version; the incident id.
type cursor struct {
	at  time.Time
	src source
	seq int64
	key string
}

// encode is the cursor as the API hands it out.
func (c cursor) encode() string {
	s := fmt.Sprintf("%d.%d.%d.%s", c.at.UnixMicro(), c.src, c.seq, c.key)
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// text is the cursor of a next page as answers carry it: null at the end.
func (c *cursor) text() *string {
	if c == nil {
		return nil
	}
	s := c.encode()
	return &s
}

var errCursor = errors.New("cursor is not one this API returned")

// maxCursor bounds an encoded cursor: a key is at most a UUID.
const maxCursor = 128

// decodeCursor reads a cursor encode made.
func decodeCursor(s string) (cursor, error) {
	if len(s) > maxCursor {
		return cursor{}, errCursor
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return cursor{}, errCursor
	}
	parts := strings.SplitN(string(raw), ".", 4)
	if len(parts) != 4 {
		return cursor{}, errCursor
	}
	us, err1 := strconv.ParseInt(parts[0], 10, 64)
	src, err2 := strconv.Atoi(parts[1])
	seq, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || src < int(srcAudit) || src > int(srcIncidentClosed) {
		return cursor{}, errCursor
	}
	key := parts[3]
	if key != "" {
		u, err := codec.ParseUUID(key)
		if err != nil {
			return cursor{}, errCursor
		}
		key = u.String()
	}
	return cursor{at: time.UnixMicro(us).UTC(), src: source(src), seq: seq, key: key}, nil
}

// Filter selects events of one tenant.
type Filter struct {
	// From and To bound the time, From included, To not; zero is open.
	From, To time.Time
	Kinds    kindFilter
	// Agent is a hyphenated agent UUID, or empty for all.
	Agent string
	// Text matches, case-insensitively, the kind, agent, actor, target
	// and detail of an event.
	Text string
	// Limit is the page size.
	Limit int
	// After continues past this position (the previous page's cursor).
	After *cursor
	// Ascending orders oldest first (the timeline); else newest first.
	Ascending bool
}

// columns of every branch of the union, in order.
const columns = `src, seq, skey, at, kind, agent, actor, actor_kind, outcome, x1, x2, x3, n1, n2`

// union writes the UNION ALL of the sources f selects, each filtered by
// tenant, time, agent and kind, and reports whether any source is left.
func union(b *db.SQLBuilder, d db.Dialect, tenant string, f Filter) bool {
	n := 0
	add := func(src source, sql string, timeCol, agentCol string, extra func()) {
		if src != srcAudit {
			ok := false
			for _, k := range ownKinds[src] {
				ok = ok || f.Kinds.match(k)
			}
			if !ok {
				return
			}
		}
		if n > 0 {
			b.Write(" UNION ALL ")
		}
		n++
		b.Write(sql, " WHERE tenant_uuid = ", b.Arg(tenant))
		if !f.From.IsZero() {
			b.Write(" AND ", timeCol, " >= ", b.Arg(d.TimeArg(f.From)))
		}
		if !f.To.IsZero() {
			b.Write(" AND ", timeCol, " < ", b.Arg(d.TimeArg(f.To)))
		}
		if f.Agent != "" && agentCol != "" {
			b.Write(" AND ", agentCol, " = ", b.Arg(f.Agent))
		}
		if extra != nil {
			extra()
		}
	}
	nullF := "CAST(NULL AS DOUBLE PRECISION)"
	text := func(s string) string { return "CAST('" + s + "' AS TEXT)" }
	jAgent, jDevice := d.JSONText("detail", "agentUuid"), d.JSONText("detail", "deviceUuid")
	add(srcAudit, `SELECT 1 AS src, id AS seq, `+text("")+` AS skey, at, kind, COALESCE(NULLIF(`+jAgent+`, ''), NULLIF(`+jDevice+`, ''),
		CASE WHEN kind LIKE 'agent.%' OR kind LIKE 'job.execution.%' OR kind LIKE 'device\_key.%' ESCAPE '\' THEN NULLIF(target, '') END) AS agent,
		actor, actor_kind, outcome, CAST(detail AS TEXT) AS x1, target AS x2, ip AS x3, `+nullF+` AS n1, `+nullF+` AS n2 FROM audit_events`,
		"at", "", func() {
			if f.Agent != "" {
				p := b.Arg(f.Agent)
				b.Write(" AND (target = ", p, " OR ", jAgent, " = ", p, " OR ", jDevice, " = ", p, ")")
			}
			if f.Kinds.empty() {
				return
			}
			b.Write(" AND (kind IN (")
			for i, k := range f.Kinds.exact {
				if i > 0 {
					b.Write(", ")
				}
				b.Write(b.Arg(k))
			}
			if len(f.Kinds.exact) == 0 {
				b.Write("NULL")
			}
			b.Write(")")
			for _, fam := range f.Kinds.families {
				b.Write(" OR kind LIKE ", b.Arg(likeEscape(fam)+"%"), ` ESCAPE '\'`)
			}
			b.Write(")")
		})
	add(srcSnapshot, `SELECT 2 AS src, id AS seq, `+text("")+` AS skey, reported_at AS at, `+text(KindStateReport)+` AS kind,
		CAST(agent_uuid AS TEXT) AS agent, `+text("")+` AS actor, `+text("agent")+` AS actor_kind, `+text("")+` AS outcome,
		hash AS x1, `+d.JSONText("report", "targetState", "version")+` AS x2, `+d.JSONText("report", "runState")+` AS x3,
		`+nullF+` AS n1, `+nullF+` AS n2 FROM agent_state_snapshots`, "reported_at", "agent_uuid", nil)
	add(srcTargetVersion, `SELECT 3 AS src, version AS seq, CAST(agent_uuid AS TEXT) AS skey, updated_at AS at, `+text(KindTargetVersion)+` AS kind,
		CAST(agent_uuid AS TEXT) AS agent, updated_by AS actor, `+text("")+` AS actor_kind, `+text("")+` AS outcome,
		CAST(NULL AS TEXT) AS x1, CAST(NULL AS TEXT) AS x2, CAST(NULL AS TEXT) AS x3, CAST(size AS DOUBLE PRECISION) AS n1, `+nullF+` AS n2
		FROM agent_target_state_history`, "updated_at", "agent_uuid", nil)
	add(srcIncidentOpened, `SELECT 4 AS src, CAST(0 AS BIGINT) AS seq, CAST(id AS TEXT) AS skey, opened_at AS at, `+text(KindIncidentOpened)+` AS kind,
		CAST(agent_uuid AS TEXT) AS agent, `+text("")+` AS actor, `+text("system")+` AS actor_kind, `+text("")+` AS outcome,
		rule_name AS x1, metric AS x2, severity AS x3, value AS n1, score AS n2 FROM anomaly_incidents`, "opened_at", "agent_uuid", nil)
	add(srcIncidentClosed, `SELECT 5 AS src, CAST(0 AS BIGINT) AS seq, CAST(id AS TEXT) AS skey, closed_at AS at, `+text(KindIncidentClosed)+` AS kind,
		CAST(agent_uuid AS TEXT) AS agent, resolved_by AS actor, CASE WHEN resolved_by <> '' THEN `+text("user")+` ELSE `+text("system")+` END AS actor_kind,
		`+text("")+` AS outcome, close_reason AS x1, metric AS x2, severity AS x3, peak_score AS n1, `+nullF+` AS n2 FROM anomaly_incidents`,
		"closed_at", "agent_uuid", func() { b.Write(" AND closed_at IS NOT NULL") })
	return n > 0
}

// likeEscape escapes LIKE's wildcards in s for ESCAPE '\'.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// where writes the conditions on the union's rows: the text match and,
// for a page, the position to continue from.
func where(b *db.SQLBuilder, d db.Dialect, f Filter) {
	b.Write(" WHERE 1 = 1")
	if f.Text != "" {
		p := b.Arg("%" + likeEscape(strings.ToLower(f.Text)) + "%")
		b.Write(" AND (")
		for i, col := range []string{"kind", "agent", "actor", "x1", "x2"} {
			if i > 0 {
				b.Write(" OR ")
			}
			b.Write("LOWER(COALESCE(", col, ", '')) LIKE ", p, ` ESCAPE '\'`)
		}
		b.Write(")")
	}
	if c := f.After; c != nil {
		op := "<"
		if f.Ascending {
			op = ">"
		}
		at := b.Arg(d.TimeArg(c.at))
		src, seq, key := b.Arg(int(c.src)), b.Arg(c.seq), b.Arg(c.key)
		b.Write(" AND (at ", op, " ", at, " OR (at = ", at, " AND (src ", op, " ", src, " OR (src = ", src,
			" AND (seq ", op, " ", seq, " OR (seq = ", seq, " AND skey ", op, " ", key, "))))))")
	}
}

// List returns one page of events by f, and the cursor of the next page
// (nil at the end).
func List(ctx context.Context, conn *sql.DB, d db.Dialect, tenant string, f Filter) ([]Event, *cursor, error) {
	var b db.SQLBuilder
	b.Write("SELECT ", columns, " FROM (")
	if !union(&b, d, tenant, f) {
		return []Event{}, nil, nil
	}
	b.Write(") e")
	where(&b, d, f)
	dir := "DESC"
	if f.Ascending {
		dir = "ASC"
	}
	b.Write(" ORDER BY at ", dir, ", src ", dir, ", seq ", dir, ", skey ", dir, " LIMIT ", b.Arg(f.Limit+1))
	rows, err := conn.QueryContext(ctx, b.String(), b.Args()...)
	if err != nil {
		return nil, nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list events: %w", err)
	}
	var next *cursor
	if len(out) > f.Limit {
		out = out[:f.Limit]
		c := out[len(out)-1].pos
		next = &c
	}
	return out, next, nil
}

func scanEvent(rows *sql.Rows) (Event, error) {
	var (
		e            Event
		src          int
		at           db.Timestamp
		agent        sql.NullString
		actor, akind sql.NullString
		outcome      sql.NullString
		x1, x2, x3   sql.NullString
		n1, n2       sql.NullFloat64
		seq          int64
		skey         sql.NullString
	)
	if err := rows.Scan(&src, &seq, &skey, &at, &e.Kind, &agent, &actor, &akind, &outcome, &x1, &x2, &x3, &n1, &n2); err != nil {
		return Event{}, fmt.Errorf("scan event: %w", err)
	}
	s := source(src)
	e.At, e.AgentUUID, e.Actor, e.ActorKind, e.Outcome = at.Time, agent.String, actor.String, akind.String, outcome.String
	e.Source = sourceNames[s]
	e.pos = cursor{at: at.Time, src: s, seq: seq, key: skey.String}
	switch s {
	case srcAudit:
		e.ID = "audit:" + strconv.FormatInt(seq, 10)
		e.Target, e.IP = x2.String, x3.String
		if x1.Valid && x1.String != "" {
			if err := json.Unmarshal([]byte(x1.String), &e.Detail); err != nil {
				return Event{}, fmt.Errorf("audit event %d detail: %w", seq, err)
			}
		}
	case srcSnapshot:
		e.ID = "state_report:" + strconv.FormatInt(seq, 10)
		e.Detail = map[string]any{"snapshotId": seq, "hash": x1.String}
		if v, err := strconv.ParseInt(x2.String, 10, 64); err == nil {
			e.Detail["targetVersion"] = v
		}
		if x3.String != "" {
			e.Detail["runState"] = x3.String
		}
	case srcTargetVersion:
		e.ID = fmt.Sprintf("target_state:%s:%d", skey.String, seq)
		e.ActorKind = ""
		e.Detail = map[string]any{"version": seq, "size": int64(n1.Float64), "updatedBy": actor.String}
	case srcIncidentOpened:
		e.ID = "incident:" + skey.String + ":opened"
		e.Detail = map[string]any{"incidentId": skey.String, "rule": x1.String, "metric": x2.String, "severity": x3.String,
			"value": n1.Float64, "score": n2.Float64}
	case srcIncidentClosed:
		e.ID = "incident:" + skey.String + ":closed"
		e.Detail = map[string]any{"incidentId": skey.String, "closeReason": x1.String, "metric": x2.String, "severity": x3.String,
			"peakScore": n1.Float64}
	default:
		return Event{}, fmt.Errorf("scan event: source %d unknown", src)
	}
	return e, nil
}

// Bucket is the count of one kind in one time bucket.
type Bucket struct {
	Start time.Time `json:"start"`
	Kind  string    `json:"kind"`
	Count int64     `json:"count"`
}

// Stats counts events by f (Limit and After unused) per kind and
// width-wide time bucket, oldest bucket first.
func Stats(ctx context.Context, conn *sql.DB, d db.Dialect, tenant string, f Filter, width time.Duration) ([]Bucket, error) {
	bucket, err := d.TimeBucket(width, "at")
	if err != nil {
		return nil, err
	}
	var b db.SQLBuilder
	b.Write("SELECT ", bucket, " AS b, kind, COUNT(*) FROM (")
	if !union(&b, d, tenant, f) {
		return []Bucket{}, nil
	}
	b.Write(") e")
	f.After = nil
	where(&b, d, f)
	b.Write(" GROUP BY b, kind ORDER BY b, kind")
	rows, err := conn.QueryContext(ctx, b.String(), b.Args()...)
	if err != nil {
		return nil, fmt.Errorf("count events: %w", err)
	}
	defer rows.Close()
	out := []Bucket{}
	for rows.Next() {
		var bk Bucket
		var start db.Timestamp
		if err := rows.Scan(&start, &bk.Kind, &bk.Count); err != nil {
			return nil, fmt.Errorf("count events: %w", err)
		}
		bk.Start = start.Time
		out = append(out, bk)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count events: %w", err)
	}
	return out, nil
}
