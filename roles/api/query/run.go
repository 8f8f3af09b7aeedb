package query

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// Queryer runs SQL: *sql.DB, *sql.Conn and *sql.Tx all are. On SQLite pass
// the read pool (db.DB.ReadSQL).
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Point is one value of a series at time T (UTC). In JSON it is
// {"t": RFC 3339 time, "v": number}, with "NaN", "+Inf" or "-Inf" as
// strings for values JSON numbers cannot hold (a stored NaN would
// otherwise fail the whole response).
type Point struct {
	T time.Time `json:"t"`
	V float64   `json:"v"`
}

// MarshalJSON implements json.Marshaler.
func (p Point) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 64)
	b = append(b, `{"t":"`...)
	b = p.T.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","v":`...)
	switch {
	case math.IsNaN(p.V):
		b = append(b, `"NaN"`...)
	case math.IsInf(p.V, 1):
		b = append(b, `"+Inf"`...)
	case math.IsInf(p.V, -1):
		b = append(b, `"-Inf"`...)
	default:
		b = strconv.AppendFloat(b, p.V, 'g', -1, 64)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON implements json.Unmarshaler, accepting what MarshalJSON
// writes.
func (p *Point) UnmarshalJSON(data []byte) error {
	var raw struct {
		T time.Time       `json:"t"`
		V json.RawMessage `json:"v"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	v := string(raw.V)
	if s, err := strconv.Unquote(v); err == nil {
		v = s
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("point value %s: %w", raw.V, err)
	}
	p.T, p.V = raw.T, f
	return nil
}

// Series is one result series. Labels holds the non-empty series labels:
// all five for raw samples and range functions, the grouping labels for
// an aggregation (the input series' labels for topk and bottomk). Points
// are in time order.
type Series struct {
	Labels map[string]string `json:"labels"`
	Points []Point           `json:"points"`
}

// labels are a series' label values in seriesLabels order, "" for none.
type labels [numLabels]string

func (l labels) toMap() map[string]string {
	m := make(map[string]string, numLabels)
	for i, v := range l {
		if v != "" {
			m[seriesLabels[i]] = v
		}
	}
	return m
}

func compareLabels(a, b labels) int {
	for i := range a {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// gridSeries is a series on the evaluation grid: idx are step indices
// (time first+idx*step), ascending, with a value each.
type gridSeries struct {
	labels labels
	idx    []int32
	val    []float64
}

// Run executes the plan and returns its series sorted by labels. It reads
// at most the rows the limits allow and fails with a *LimitError as soon as
// the result would exceed one; it never returns a truncated result. A
// range function reads the rollups where they hold its buckets (see
// WithRollups): q must then also see readings_rollup_state.
func Run(ctx context.Context, q Queryer, p *Plan) ([]Series, error) {
	if p.raw {
		return p.runRaw(ctx, q)
	}
	if p.points == 0 {
		return []Series{}, nil
	}
	// Whole hours and days the rollups hold come from them.
	c, err := rollup.Load(ctx, q)
	if err != nil {
		return nil, err
	}
	return p.WithRollups(c).runRange(ctx, q)
}

func (p *Plan) seriesLimit() error {
	return limitError("max_series", "series", "more than "+strconv.Itoa(p.lim.MaxSeries), strconv.Itoa(p.lim.MaxSeries),
		"narrow the selector with more label matchers, or aggregate")
}

func (p *Plan) pointsLimit(l labels) error {
	return limitError("max_points_per_series", "points in series "+fmt.Sprint(l.toMap()), "more than "+strconv.Itoa(p.lim.MaxPointsPerSeries),
		strconv.Itoa(p.lim.MaxPointsPerSeries), "shorten the range, or use a range function such as avg_over_time")
}

// rowLimit is the error for reading rowCap+1 rows.
func (p *Plan) rowLimit() error {
	if p.capBySeries {
		return p.seriesLimit()
	}
	return limitError("max_rows", "rows read", "more than "+strconv.Itoa(p.lim.MaxRows), strconv.Itoa(p.lim.MaxRows),
		"narrow the selector, shorten the range or increase step")
}

func (p *Plan) runRaw(ctx context.Context, q Queryer) ([]Series, error) {
	rows, err := q.QueryContext(ctx, p.sql, p.args...)
	if err != nil {
		return nil, queryError(err)
	}
	defer rows.Close()
	out := []Series{}
	var cur labels
	var read int64
	for rows.Next() {
		var l labels
		var ts db.Timestamp
		var v float64
		if err := rows.Scan(&l[0], &l[1], &l[2], &l[3], &l[4], &ts, &v); err != nil {
			return nil, fmt.Errorf("scan reading: %w", err)
		}
		read++
		if len(out) == 0 || l != cur {
			if len(out) == p.lim.MaxSeries {
				return nil, p.seriesLimit()
			}
			out = append(out, Series{Labels: l.toMap()})
			cur = l
		}
		s := &out[len(out)-1]
		if len(s.Points) == p.lim.MaxPointsPerSeries {
			return nil, p.pointsLimit(l)
		}
		if read > p.rowCap {
			return nil, p.rowLimit()
		}
		s.Points = append(s.Points, Point{T: ts.Time, V: v})
	}
	if err := rows.Err(); err != nil {
		return nil, queryError(err)
	}
	// Rows came in the database's label order (PostgreSQL orders uuids
	// as bytes); sort as Run documents.
	slices.SortFunc(out, func(a, b Series) int { return compareLabelMaps(a.Labels, b.Labels) })
	return out, nil
}

func compareLabelMaps(a, b map[string]string) int {
	for _, name := range seriesLabels {
		if c := cmp.Compare(a[name], b[name]); c != 0 {
			return c
		}
	}
	return 0
}

func (p *Plan) runRange(ctx context.Context, q Queryer) ([]Series, error) {
	return p.evaluate(func(add func(labels, acc) error) error { return p.scanBuckets(ctx, q, add) })
}

// evaluate runs the range function and aggregations over the buckets that
// feed passes to add, series by series in bucket order.
func (p *Plan) evaluate(feed func(add func(labels, acc) error) error) ([]Series, error) {
	// The function's series go to the first aggregation, or straight
	// into the result.
	var sinks []*aggregator
	for _, a := range p.aggs {
		sinks = append(sinks, newAggregator(a, p.points, p.lim.MaxSeries))
	}
	var result []*gridSeries
	emit := func(gs *gridSeries) error {
		if len(gs.idx) == 0 {
			return nil
		}
		if len(sinks) > 0 {
			return sinks[0].add(gs)
		}
		if len(result) == p.lim.MaxSeries {
			return p.seriesLimit()
		}
		result = append(result, gs)
		return nil
	}
	var (
		cur     labels
		buckets []acc
		w       window
	)
	flush := func() error {
		if len(buckets) == 0 {
			return nil
		}
		gs := &gridSeries{labels: cur}
		p.evalWindows(&w, buckets, gs)
		buckets = buckets[:0]
		return emit(gs)
	}
	add := func(l labels, b acc) error {
		if l != cur || len(buckets) == 0 {
			if err := flush(); err != nil {
				return err
			}
			cur = l
		}
		buckets = append(buckets, b)
		return nil
	}
	if err := feed(add); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	for i, a := range sinks {
		out, err := a.finish()
		if err != nil {
			return nil, err
		}
		if i+1 < len(sinks) {
			for _, gs := range out {
				if err := sinks[i+1].add(gs); err != nil {
					return nil, err
				}
			}
			continue
		}
		result = out
	}
	return p.toSeries(result), nil
}

// scanBuckets reads the per-bucket rows, in series and bucket order, into
// add.
func (p *Plan) scanBuckets(ctx context.Context, q Queryer, add func(labels, acc) error) error {
	rows, err := q.QueryContext(ctx, p.sql, p.args...)
	if err != nil {
		return queryError(err)
	}
	defer rows.Close()
	counter := funcs[p.fn].counter
	var read int64
	for rows.Next() {
		var (
			l          labels
			b          acc
			bt, ft, lt db.Timestamp
		)
		dest := []any{&l[0], &l[1], &l[2], &l[3], &l[4], &bt, &b.n, &b.sum, &b.min, &b.max, &ft, &lt}
		if counter {
			dest = append(dest, &b.fv, &b.lv, &b.inc)
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("scan bucket: %w", err)
		}
		read++
		if read > p.rowCap {
			return p.rowLimit()
		}
		b.b, b.ft, b.lt = bt.UnixMicro(), ft.UnixMicro(), lt.UnixMicro()
		if err := add(l, b); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return queryError(err)
	}
	return nil
}

// queryError wraps a database error. PostgreSQL refusing a translated
// regular expression as too complex (SQLSTATE 2201B) is the query's fault,
// so it becomes a *LimitError the handler answers with 422; RE2 accepted
// the pattern, so nothing else can refuse it earlier.
func queryError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "2201B" {
		return &LimitError{Limit: "regex_complexity", Value: "too complex", Max: "what PostgreSQL accepts",
			msg: "a regular expression is too complex for the database (" + pe.Message + "): simplify it"}
	}
	return fmt.Errorf("query readings: %w", err)
}

// toSeries converts grid series into the result, sorted by labels.
func (p *Plan) toSeries(gs []*gridSeries) []Series {
	slices.SortFunc(gs, func(a, b *gridSeries) int { return compareLabels(a.labels, b.labels) })
	out := make([]Series, 0, len(gs))
	for _, g := range gs {
		s := Series{Labels: g.labels.toMap(), Points: make([]Point, len(g.idx))}
		for i, k := range g.idx {
			s.Points[i] = Point{T: time.UnixMicro(p.first + int64(k)*p.step).UTC(), V: g.val[i]}
		}
		out = append(out, s)
	}
	return out
}
