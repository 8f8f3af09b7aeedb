package readings

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/db"
)

const (
	// defaultLatestLimit and maxLatestLimit bound /readings/latest: one
	// row per series, and a dashboard rarely shows more.
	defaultLatestLimit = 1000
	maxLatestLimit     = 10000
	// maxCatalogSeries bounds the series the catalog, metric names and
	// profiles summarise, and so the memory one request holds.
	maxCatalogSeries = 100_000
)

// latestRow is a series' newest reading, with the series' first time and
// reading count when asked for.
type latestRow struct {
	reading
	first db.Timestamp
	count int64
}

// queryLatest runs latestSQL and returns at most limit rows, and whether
// there were more.
func queryLatest(ctx context.Context, d *db.DB, tenant string, f seriesFilter, withStats bool, limit int) ([]latestRow, bool, error) {
	text, args := latestSQL(d.Dialect(), tenant, f, withStats, int64(limit)+1)
	rows, err := d.ReadSQL().QueryContext(ctx, text, args...)
	if err != nil {
		return nil, false, fmt.Errorf("query latest readings: %w", err)
	}
	defer rows.Close()
	out := []latestRow{}
	for rows.Next() {
		var (
			r                         latestRow
			ts                        db.Timestamp
			v, score                  sql.NullFloat64
			device, proto, unit, qual sql.NullString
		)
		dest := []any{&r.AgentUUID, &r.MetricName, &ts, &v, &device, &proto, &unit, &qual, &score}
		if withStats {
			dest = append(dest, &r.first, &r.count)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, false, fmt.Errorf("scan latest reading: %w", err)
		}
		r.Time, r.Value, r.AnomalyScore = utcTime(ts.Time), numberPtr(v.Float64, v.Valid), numberPtr(score.Float64, score.Valid)
		r.DeviceName, r.Protocol, r.Unit, r.Quality = device.String, proto.String, unit.String, qual.String
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("read latest readings: %w", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// latest is GET /readings/latest: the newest reading of every series of
// the tenant, optionally of one agent and/or one metric.
func (h *handler) latest(c *gin.Context) {
	h.serveLatest(c, false, "agent_uuid", "metric", "limit")
}

// agentLatest is GET /readings/:agent_uuid/latest.
func (h *handler) agentLatest(c *gin.Context) {
	h.serveLatest(c, true, "metric", "limit")
}

// serveLatest answers both: the agent comes from the path when inPath,
// else from the optional agent_uuid parameter.
func (h *handler) serveLatest(c *gin.Context, inPath bool, allowed ...string) {
	tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	p, err := newParams(c.Request.URL.Query(), allowed...)
	var f seriesFilter
	var limit int
	if err == nil {
		if inPath {
			f.agent, err = parseAgent("agent_uuid", c.Param("agent_uuid"))
		} else {
			f.agent, err = p.optAgent("agent_uuid")
		}
	}
	if err == nil {
		f.metric, err = p.optMetric("metric")
	}
	if err == nil {
		limit, err = p.limit("limit", defaultLatestLimit, maxLatestLimit)
	}
	if err != nil {
		h.fail(c, "latest", err)
		return
	}
	d := h.DB
	rows, more, err := queryLatest(c.Request.Context(), d, tenant, f, false, limit)
	if err != nil {
		h.fail(c, "latest", err)
		return
	}
	out := make([]reading, len(rows))
	for i := range rows {
		out[i] = rows[i].reading
	}
	c.JSON(http.StatusOK, gin.H{"readings": out, "truncated": more})
}

// catalogEntry describes one metric name across the tenant's agents.
type catalogEntry struct {
	MetricName string `json:"metricName"`
	// DeviceName, Protocol and Unit are those of the metric's newest
	// reading.
	DeviceName  string  `json:"deviceName"`
	Protocol    string  `json:"protocol"`
	Unit        string  `json:"unit"`
	AgentCount  int     `json:"agentCount"`
	FirstSeen   utcTime `json:"firstSeen"`
	LastSeen    utcTime `json:"lastSeen"`
	SampleCount int64   `json:"sampleCount"`
}

// catalog is GET /readings/catalog.
func (h *handler) catalog(c *gin.Context) {
	tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	p, err := newParams(c.Request.URL.Query(), "agent_uuid")
	var f seriesFilter
	if err == nil {
		f.agent, err = p.optAgent("agent_uuid")
	}
	if err != nil {
		h.fail(c, "catalog", err)
		return
	}
	d := h.DB
	rows, more, err := queryLatest(c.Request.Context(), d, tenant, f, true, maxCatalogSeries)
	if err == nil && more {
		err = seriesCapError()
	}
	if err != nil {
		h.fail(c, "catalog", err)
		return
	}
	out := catalogOf(rows)
	c.JSON(http.StatusOK, gin.H{"metrics": out})
}

// seriesCapError is the error for a tenant with more series than the
// summarising endpoints read.
func seriesCapError() error {
	return &limitError{msg: "series more than " + strconv.Itoa(maxCatalogSeries) + " exceeds the limit of " +
		strconv.Itoa(maxCatalogSeries) + ": filter by agent_uuid"}
}

// metricNames is GET /metrics: every metric name of the tenant, sorted.
func (h *handler) metricNames(c *gin.Context) {
	tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	if _, err := newParams(c.Request.URL.Query()); err != nil {
		h.fail(c, "metric names", err)
		return
	}
	d := h.DB
	text, args := metricNamesSQL(d.Dialect(), tenant, maxCatalogSeries+1)
	names, err := queryStrings(c.Request.Context(), d.ReadSQL(), text, args)
	if err == nil && len(names) > maxCatalogSeries {
		err = &limitError{msg: "metric names more than " + strconv.Itoa(maxCatalogSeries) + " exceeds the limit of " +
			strconv.Itoa(maxCatalogSeries) + ": use /readings/catalog?agent_uuid=... for one agent"}
	}
	if err != nil {
		h.fail(c, "metric names", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"metrics": names})
}

func queryStrings(ctx context.Context, q *sql.DB, text string, args []any) ([]string, error) {
	rows, err := q.QueryContext(ctx, text, args...)
	if err != nil {
		return nil, fmt.Errorf("query metric names: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("scan metric name: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read metric names: %w", err)
	}
	return out, nil
}

// profile is what one kind of device reports: the series whose newest
// reading carries one device name and protocol.
type profile struct {
	// Name is "<deviceName>/<protocol>", or the device name alone when
	// the readings carry no protocol.
	Name       string          `json:"name"`
	DeviceName string          `json:"deviceName"`
	Protocol   string          `json:"protocol"`
	AgentCount int             `json:"agentCount"`
	Metrics    []profileMetric `json:"metrics"`
}

// profileMetric is one metric of a profile. A metric whose agents report
// it in different units is listed once per unit.
type profileMetric struct {
	Name       string `json:"name"`
	Unit       string `json:"unit"`
	AgentCount int    `json:"agentCount"`
}

// profiles is GET /profiles.
func (h *handler) profiles(c *gin.Context) {
	tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	if _, err := newParams(c.Request.URL.Query()); err != nil {
		h.fail(c, "profiles", err)
		return
	}
	d := h.DB
	rows, more, err := queryLatest(c.Request.Context(), d, tenant, seriesFilter{}, false, maxCatalogSeries)
	if err == nil && more {
		err = seriesCapError()
	}
	if err != nil {
		h.fail(c, "profiles", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"profiles": buildProfiles(rows)})
}

func buildProfiles(rows []latestRow) []profile {
	type key struct{ device, proto string }
	type metricKey struct{ name, unit string }
	agents := map[key]map[string]bool{}
	metrics := map[key]map[metricKey]int{}
	for _, r := range rows {
		k := key{r.DeviceName, r.Protocol}
		if agents[k] == nil {
			agents[k], metrics[k] = map[string]bool{}, map[metricKey]int{}
		}
		agents[k][r.AgentUUID] = true
		metrics[k][metricKey{r.MetricName, r.Unit}]++
	}
	out := make([]profile, 0, len(agents))
	for k, as := range agents {
		p := profile{Name: k.device, DeviceName: k.device, Protocol: k.proto, AgentCount: len(as)}
		if k.proto != "" {
			p.Name += "/" + k.proto
		}
		for mk, n := range metrics[k] {
			p.Metrics = append(p.Metrics, profileMetric{Name: mk.name, Unit: mk.unit, AgentCount: n})
		}
		slices.SortFunc(p.Metrics, func(a, b profileMetric) int {
			return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Unit, b.Unit))
		})
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b profile) int {
		return cmp.Or(cmp.Compare(a.DeviceName, b.DeviceName), cmp.Compare(a.Protocol, b.Protocol))
	})
	return out
}
