package readings

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// The export side of the package: roles/api/export streams what these
// functions read, so that an export selects its rows with the same walk,
// the same ownership rule and the same buckets as the endpoints here
// (docs/export.md).

// Export selection bounds: the walk probes each named agent and metric.
const (
	MaxExportAgents  = 100
	MaxExportMetrics = 100
	// MinExportStep and MaxExportStep bound an export's bucket width.
	MinExportStep = time.Second
	MaxExportStep = 366 * day
)

// Selection is what an export reads: the readings of the tenant's series
// of Agents and Metrics in [Start, End], raw or in Step-wide buckets.
type Selection struct {
	// Agents are canonical lowercase UUIDs and Metrics exact names, each
	// sorted and once; empty selects every one of the tenant's.
	Agents  []string
	Metrics []string
	Start   time.Time
	End     time.Time
	// Step is the bucket width; 0 exports the raw readings.
	Step time.Duration
}

// exportParams are the parameters ParseSelection reads; agent_uuid and
// metric may be given several times.
var exportParams = []string{"agent_uuid", "metric", "start", "end", "step"}

// ParseSelection reads an export's query parameters (docs/export.md):
// agent_uuid and metric, each repeatable; start and end as the readings
// endpoints take them (end defaults to now, start to 24 hours before end);
// step, raw by default or a duration such as 1m, 1h, 1d. extra names the
// caller's own parameters, which are let through unread (each once). A
// bad parameter is an error ParamMessage recognises.
func ParseSelection(q url.Values, now time.Time, extra ...string) (Selection, error) {
	var sel Selection
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names) // the same error for the same request
	allowed := append(slices.Clone(exportParams), extra...)
	for _, name := range names {
		if !slices.Contains(allowed, name) {
			return sel, badParam(quote(name), "is not a parameter of this endpoint; it takes %s", strings.Join(allowed, ", "))
		}
		if len(q[name]) > 1 && name != "agent_uuid" && name != "metric" {
			return sel, badParam(name, "is given %d times; give it once", len(q[name]))
		}
	}
	agents, err := listParam(q["agent_uuid"], "agent_uuid", MaxExportAgents, func(s string) (string, error) {
		return parseAgent("agent_uuid", s)
	})
	if err != nil {
		return sel, err
	}
	metrics, err := listParam(q["metric"], "metric", MaxExportMetrics, func(s string) (string, error) {
		return s, checkText("metric", s, maxNameBytes)
	})
	if err != nil {
		return sel, err
	}
	p := params{v: q}
	r, err := p.rangeParams(now, span(day))
	if err != nil {
		return sel, err
	}
	sel = Selection{Agents: agents, Metrics: metrics, Start: r.start, End: r.end}
	if s, ok := p.get("step"); ok && s != "raw" {
		if sel.Step, err = parseStep("step", s); err != nil {
			return sel, err
		}
		if sel.Step < MinExportStep || sel.Step > MaxExportStep || sel.Step%time.Second != 0 {
			return sel, badParam("step", "must be raw or whole seconds from %s to %s, got %s", formatSpan(MinExportStep), formatSpan(MaxExportStep), quote(s))
		}
	}
	return sel, nil
}

// listParam reads a repeatable parameter: empty values are skipped, the
// rest parsed, sorted and made unique, at most max.
func listParam(values []string, name string, max int, parse func(string) (string, error)) ([]string, error) {
	var out []string
	for _, v := range values {
		if v == "" {
			continue
		}
		s, err := parse(v)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > max {
		return nil, badParam(name, "is given %d times; at most %d", len(out), max)
	}
	return out, nil
}

// Query returns the selection as query parameters, which ParseSelection
// reads back to the same selection: a background export stores it so.
func (s Selection) Query() url.Values {
	q := url.Values{}
	for _, a := range s.Agents {
		q.Add("agent_uuid", a)
	}
	for _, m := range s.Metrics {
		q.Add("metric", m)
	}
	q.Set("start", formatTime(s.Start))
	q.Set("end", formatTime(s.End))
	if s.Step > 0 {
		q.Set("step", formatSpan(s.Step))
	}
	return q
}

// ParamMessage returns the message of a bad parameter error from this
// package, naming the parameter first, and whether err is one.
func ParamMessage(err error) (string, bool) {
	var pe *paramError
	if errors.As(err, &pe) {
		return pe.msg, true
	}
	return "", false
}

// Row is one exported row. A raw reading has Value (absent for a reading
// stored without one), the text attributes ("" when absent) and
// AnomalyScore; a bucket has Time at its start, and Min, Max, Avg and
// Count, computed as GET /readings/hourly computes them.
type Row struct {
	AgentUUID  string
	MetricName string
	Time       time.Time

	Value        sql.NullFloat64
	DeviceName   string
	Protocol     string
	Unit         string
	Quality      string
	AnomalyScore sql.NullFloat64

	Min, Max, Avg float64
	Count         int64
}

// ScanSelection reads the rows of sel from the tenant's readings (tenant
// as the readings table stores it) in agent, metric and time order, and
// hands each to fn as it comes from the database cursor: nothing is
// collected, so memory does not grow with the export. row is reused from
// one call to the next. An error of fn stops the scan and is returned.
func ScanSelection(ctx context.Context, d *db.DB, tenant string, sel Selection, fn func(row *Row) error) error {
	dl := d.Dialect()
	f := seriesFilter{agents: sel.Agents, metrics: sel.Metrics}
	lo, hi := dl.TimeArg(sel.Start), dl.TimeArg(sel.End)
	var text string
	var args []any
	if sel.Step > 0 {
		expr, err := dl.TimeBucket(sel.Step, "r.time")
		if err != nil {
			return fmt.Errorf("export buckets: %w", err)
		}
		text, args = bucketSQL(dl, tenant, f, expr, lo, hi, 0)
	} else {
		text, args = seriesRawSQL(dl, tenant, f, lo, hi)
	}
	rows, err := d.ReadSQL().QueryContext(ctx, text, args...)
	if err != nil {
		return fmt.Errorf("query export rows: %w", err)
	}
	defer rows.Close()
	var (
		row                       Row
		ts                        db.Timestamp
		dev, proto, unit, quality sql.NullString
		sum                       float64
	)
	for rows.Next() {
		if sel.Step > 0 {
			err = rows.Scan(&row.AgentUUID, &row.MetricName, &ts, &row.Count, &sum, &row.Min, &row.Max)
			// The average from the sum, so both engines divide the same
			// two numbers, as the statistics endpoints do.
			row.Avg = sum / float64(row.Count)
		} else {
			err = rows.Scan(&row.AgentUUID, &row.MetricName, &ts, &row.Value, &dev, &proto, &unit, &quality, &row.AnomalyScore)
			row.DeviceName, row.Protocol, row.Unit, row.Quality = dev.String, proto.String, unit.String, quality.String
		}
		if err != nil {
			return fmt.Errorf("scan export row: %w", err)
		}
		row.Time = ts.Time
		if err := fn(&row); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read export rows: %w", err)
	}
	return nil
}

// FormatTime is the time format of the readings endpoints: RFC 3339 in
// UTC with as many fraction digits as needed.
func FormatTime(t time.Time) string { return formatTime(t) }
