package readings

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/query"
)

// Reading is one stored reading as the read functions return it, the
// shape GET /readings/latest answers.
type Reading = reading

// CatalogEntry is one metric of the catalog, the shape GET
// /readings/catalog answers.
type CatalogEntry = catalogEntry

// Reader runs the endpoints' reads for callers inside the role that have
// no request of their own (the AI assistant's tools). Every method takes
// the tenant as the readings table stores it, from the caller's
// credential, and reads only that tenant's series, as the routes do.
type Reader struct {
	DB *db.DB
	// Limits bound Query; zero fields take query.DefaultLimits.
	Limits query.Limits
}

// Latest returns the newest reading of each of tenant's series, of one
// agent and one metric when they are not empty, at most limit, and
// whether there were more.
func (r Reader) Latest(ctx context.Context, tenant, agent, metric string, limit int) ([]Reading, bool, error) {
	rows, more, err := queryLatest(ctx, r.DB, tenant, seriesFilter{agent: agent, metric: metric}, false, limit)
	if err != nil {
		return nil, false, err
	}
	out := make([]Reading, len(rows))
	for i := range rows {
		out[i] = rows[i].reading
	}
	return out, more, nil
}

// Catalog returns the metric catalog of tenant, of one agent when agent
// is not empty, in metric name order.
func (r Reader) Catalog(ctx context.Context, tenant, agent string) ([]CatalogEntry, error) {
	rows, more, err := queryLatest(ctx, r.DB, tenant, seriesFilter{agent: agent}, true, maxCatalogSeries)
	if err == nil && more {
		err = seriesCapError()
	}
	if err != nil {
		return nil, err
	}
	return catalogOf(rows), nil
}

// Recent returns the values of one series' newest n readings, newest
// first; a reading stored without a value is left out.
func (r Reader) Recent(ctx context.Context, tenant, agent, metric string, n int) ([]float64, error) {
	rows, err := r.DB.ReadSQL().QueryContext(ctx, `SELECT value FROM readings
WHERE agent_uuid = $1 AND metric_name = $2 AND tenant_id = $3
ORDER BY time DESC LIMIT $4`, agent, metric, tenant, n)
	if err != nil {
		return nil, fmt.Errorf("query recent readings: %w", err)
	}
	defer rows.Close()
	var out []float64
	for rows.Next() {
		var v sql.NullFloat64
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("scan recent reading: %w", err)
		}
		if v.Valid {
			out = append(out, v.Float64)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read recent readings: %w", err)
	}
	return out, nil
}

// Query runs a query-language expression over tenant's readings in rng,
// as POST /readings/query does.
func (r Reader) Query(ctx context.Context, tenant, src string, rng query.Range) ([]query.Series, error) {
	plan, err := query.Compile(src, tenant, rng, r.DB.Dialect(), r.Limits.WithDefaults())
	if err != nil {
		return nil, err
	}
	return query.Run(ctx, r.DB.ReadSQL(), plan)
}

// catalogOf gathers the newest row of each series (in agent, metric
// order) by metric name.
func catalogOf(rows []latestRow) []catalogEntry {
	byName := map[string]*catalogEntry{}
	newest := map[string]latestRow{}
	for _, r := range rows {
		e := byName[r.MetricName]
		if e == nil {
			e = &catalogEntry{MetricName: r.MetricName, FirstSeen: utcTime(r.first.Time), LastSeen: r.Time}
			byName[r.MetricName] = e
		}
		e.AgentCount++
		e.SampleCount += r.count
		if r.first.Time.Before(timeOf(e.FirstSeen)) {
			e.FirstSeen = utcTime(r.first.Time)
		}
		if n, seen := newest[r.MetricName]; !seen || timeOf(r.Time).After(timeOf(n.Time)) {
			newest[r.MetricName] = r
			e.LastSeen = r.Time
			e.DeviceName, e.Protocol, e.Unit = r.DeviceName, r.Protocol, r.Unit
		}
	}
	out := make([]catalogEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b catalogEntry) int { return cmp.Compare(a.MetricName, b.MetricName) })
	return out
}
