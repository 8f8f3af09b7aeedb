package anomaly

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
)

// Aggregate ranges: the default and the most a request may ask for.
const (
	defaultSummaryRange = 24 * time.Hour
	defaultHours        = 24
	maxHours            = 7 * 24
	defaultDays         = 30
	maxDays             = 366
	defaultTopRange     = 7 * 24 * time.Hour
	defaultTopLimit     = 10
	maxTopLimit         = 100
)

// Summary is GET /anomaly/summary: the tenant's anomaly figures since a
// time (24 hours ago by default).
type Summary struct {
	Since          time.Time      `json:"since"`
	Until          time.Time      `json:"until"`
	OpenIncidents  int            `json:"openIncidents"`
	Incidents      int            `json:"incidents"`
	BySeverity     map[string]int `json:"bySeverity"`
	EdgeAlerts     int            `json:"edgeAlerts"`
	AffectedAgents int            `json:"affectedAgents"`
	Rules          int            `json:"rules"`
	EnabledRules   int            `json:"enabledRules"`
}

func (h *handler) summary(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	now := h.Now().UTC()
	since := now.Add(-defaultSummaryRange)
	if !h.sinceParam(c, &since) {
		return
	}
	sm, err := h.s.summary(c.Request.Context(), who.TenantUUID, since, now)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, sm)
}

func (s *store) summary(ctx context.Context, tenant string, since, until time.Time) (Summary, error) {
	sm := Summary{Since: since, Until: until, BySeverity: map[string]int{SeverityCritical: 0, SeverityWarning: 0, SeverityInfo: 0}}
	q := s.db.ReadSQL()
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM anomaly_incidents WHERE tenant_uuid = $1 AND closed_at IS NULL`, tenant).
		Scan(&sm.OpenIncidents); err != nil {
		return Summary{}, fmt.Errorf("count open incidents: %w", err)
	}
	rows, err := q.QueryContext(ctx, `SELECT severity, count(*) FROM anomaly_incidents WHERE tenant_uuid = $1 AND opened_at >= $2 GROUP BY severity`,
		tenant, s.t(since))
	if err != nil {
		return Summary{}, fmt.Errorf("count incidents: %w", err)
	}
	for rows.Next() {
		var sev string
		var n int
		if err := rows.Scan(&sev, &n); err != nil {
			rows.Close()
			return Summary{}, fmt.Errorf("count incidents: %w", err)
		}
		sm.BySeverity[sev] += n
		sm.Incidents += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Summary{}, fmt.Errorf("count incidents: %w", err)
	}
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM agent_events WHERE tenant_uuid = $1 AND kind = $2 AND occurred_at >= $3`,
		tenant, control.EventAnomalyAlert, s.t(since)).Scan(&sm.EdgeAlerts); err != nil {
		return Summary{}, fmt.Errorf("count edge alerts: %w", err)
	}
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM (
SELECT agent_uuid FROM anomaly_incidents WHERE tenant_uuid = $1 AND (opened_at >= $2 OR closed_at IS NULL)
UNION
SELECT agent_uuid FROM agent_events WHERE tenant_uuid = $1 AND kind = $3 AND occurred_at >= $2) AS affected`,
		tenant, s.t(since), control.EventAnomalyAlert).Scan(&sm.AffectedAgents); err != nil {
		return Summary{}, fmt.Errorf("count affected agents: %w", err)
	}
	var enabled int
	if err := q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(CASE WHEN enabled THEN 1 ELSE 0 END), 0) FROM anomaly_rules WHERE tenant_uuid = $1`,
		tenant).Scan(&sm.Rules, &enabled); err != nil {
		return Summary{}, fmt.Errorf("count rules: %w", err)
	}
	sm.EnabledRules = enabled
	return sm, nil
}

// Bucket is one hour or day of GET /anomaly/hourly and /anomaly/daily:
// incidents opened and agent anomaly alerts raised in it.
type Bucket struct {
	Start      time.Time `json:"start"`
	Incidents  int       `json:"incidents"`
	EdgeAlerts int       `json:"edgeAlerts"`
}

func (h *handler) hourly(c *gin.Context) { h.buckets(c, time.Hour, "hours", defaultHours, maxHours) }

func (h *handler) daily(c *gin.Context) { h.buckets(c, 24*time.Hour, "days", defaultDays, maxDays) }

// buckets answers counts per width-wide bucket for the last n buckets (the
// current one included), every bucket present, oldest first.
func (h *handler) buckets(c *gin.Context, width time.Duration, param string, def, most int) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	n := def
	if v := c.Query(param); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 || k > most {
			h.WriteError(c, http.StatusBadRequest, "invalid_parameter", param+" must be 1.."+strconv.Itoa(most)+", got "+quote(v))
			return
		}
		n = k
	}
	now := h.Now().UTC()
	first := bucketStart(now, width).Add(-time.Duration(n-1) * width)
	list, err := h.s.buckets(c.Request.Context(), who.TenantUUID, width, first, n)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"buckets": list})
}

// bucketStart floors t to width from the epoch: hours and UTC days.
func bucketStart(t time.Time, width time.Duration) time.Time {
	return time.UnixMicro(t.UnixMicro() - t.UnixMicro()%width.Microseconds()).UTC()
}

func (s *store) buckets(ctx context.Context, tenant string, width time.Duration, first time.Time, n int) ([]Bucket, error) {
	out := make([]Bucket, n)
	for i := range out {
		out[i].Start = first.Add(time.Duration(i) * width)
	}
	d := s.db.Dialect()
	count := func(what, table, column, where string, args []any, add func(*Bucket, int)) error {
		expr, err := d.TimeBucket(width, column)
		if err != nil {
			return err
		}
		rows, err := s.db.ReadSQL().QueryContext(ctx, `SELECT `+expr+` AS b, count(*) FROM `+table+` WHERE `+where+` GROUP BY b`, args...)
		if err != nil {
			return fmt.Errorf("count %s: %w", what, err)
		}
		defer rows.Close()
		for rows.Next() {
			var b db.Timestamp
			var k int
			if err := rows.Scan(&b, &k); err != nil {
				return fmt.Errorf("count %s: %w", what, err)
			}
			// Buckets align to 2000-01-03, a Monday at midnight UTC, so
			// hours and days land on the epoch's grid too.
			i := int(b.Sub(first) / width)
			if i >= 0 && i < n {
				add(&out[i], k)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("count %s: %w", what, err)
		}
		return nil
	}
	if err := count("incidents", "anomaly_incidents", "opened_at", `tenant_uuid = $1 AND opened_at >= $2`, []any{tenant, s.t(first)},
		func(b *Bucket, k int) { b.Incidents += k }); err != nil {
		return nil, err
	}
	if err := count("edge alerts", "agent_events", "occurred_at", `tenant_uuid = $1 AND occurred_at >= $2 AND kind = $3`,
		[]any{tenant, s.t(first), control.EventAnomalyAlert}, func(b *Bucket, k int) { b.EdgeAlerts += k }); err != nil {
		return nil, err
	}
	return out, nil
}

// TopMetric is one entry of GET /anomaly/top-metrics.
type TopMetric struct {
	Metric    string  `json:"metric"`
	Incidents int     `json:"incidents"`
	Agents    int     `json:"agents"`
	MaxScore  float64 `json:"maxScore"`
}

// topMetrics serves GET /anomaly/top-metrics?since=&limit=: the metrics
// with the most incidents opened since (7 days ago by default).
func (h *handler) topMetrics(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	since, limit := h.Now().UTC().Add(-defaultTopRange), defaultTopLimit
	if !h.pageParams(c, &since, &limit, maxTopLimit) {
		return
	}
	rows, err := h.s.db.ReadSQL().QueryContext(c.Request.Context(), `SELECT metric, count(*) AS n, count(DISTINCT agent_uuid), max(peak_score)
FROM anomaly_incidents WHERE tenant_uuid = $1 AND opened_at >= $2 GROUP BY metric ORDER BY n DESC, metric LIMIT $3`,
		who.TenantUUID, h.s.t(since), limit)
	if err != nil {
		h.fail(c, fmt.Errorf("top metrics: %w", err))
		return
	}
	defer rows.Close()
	out := []TopMetric{}
	for rows.Next() {
		var m TopMetric
		if err := rows.Scan(&m.Metric, &m.Incidents, &m.Agents, &m.MaxScore); err != nil {
			h.fail(c, fmt.Errorf("top metrics: %w", err))
			return
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		h.fail(c, fmt.Errorf("top metrics: %w", err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"metrics": out})
}

// sortAlerts orders active alerts newest first.
func sortAlerts(a []ActiveAlert) {
	slices.SortStableFunc(a, func(x, y ActiveAlert) int { return y.At.Compare(x.At) })
}
