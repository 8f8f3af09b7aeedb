package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// FindSeries returns the label sets of the series sel selects that have a
// sample in [start, end], sorted as Run sorts its result, at most limit of
// them; more reports true. It answers the "which series exist" questions
// of series and label browsers with the same matchers, regular expressions
// and tenant scoping as a query, without reading any values; end - start
// is held to lim.MaxRange. sel must be one the parser produced (or pass
// the same checks); errors are a plain error for one that does not,
// *ParamError for a bad range, *LimitError past max_range, or a database
// error.
func FindSeries(ctx context.Context, q Queryer, d db.Dialect, tenant string, sel *Selector, start, end time.Time, lim Limits, limit int) (series []map[string]string, more bool, err error) {
	lim = lim.WithDefaults()
	if tenant == "" {
		return nil, false, errors.New("find series: tenant id is required")
	}
	if limit <= 0 {
		return nil, false, fmt.Errorf("find series: limit %d must be positive", limit)
	}
	if err := checkExpr(sel); err != nil {
		return nil, false, fmt.Errorf("find series: %w", err)
	}
	if err := checkRange(Range{Start: start, End: end, Step: lim.MinStep}, lim); err != nil {
		return nil, false, err
	}
	text, args, err := seriesSQL(d, tenant, sel, d.TimeArg(start.UTC()), d.TimeArg(end.UTC()), int64(limit)+1)
	if err != nil {
		return nil, false, err
	}
	rows, err := q.QueryContext(ctx, text, args...)
	if err != nil {
		return nil, false, queryError(err)
	}
	defer rows.Close()
	var found []labels
	for rows.Next() {
		var l labels
		if err := rows.Scan(&l[0], &l[1], &l[2], &l[3], &l[4]); err != nil {
			return nil, false, fmt.Errorf("scan series: %w", err)
		}
		found = append(found, l)
	}
	if err := rows.Err(); err != nil {
		return nil, false, queryError(err)
	}
	// The database's order is its own (PostgreSQL orders uuids as bytes);
	// sort, then keep the first limit.
	slices.SortFunc(found, compareLabels)
	if len(found) > limit {
		found, more = found[:limit], true
	}
	series = make([]map[string]string, len(found))
	for i, l := range found {
		series[i] = l.toMap()
	}
	return series, more, nil
}

// seriesSQL selects the distinct series labels of sel's samples in
// [lo, hi], at most limit rows.
func seriesSQL(d db.Dialect, tenant string, sel *Selector, lo, hi any, limit int64) (string, []any, error) {
	s := &sqlBuilder{d: d}
	s.Write("SELECT DISTINCT ", seriesSelect, "\nFROM readings")
	if err := s.where(tenant, lo, hi, "<=", sel.Matchers); err != nil {
		return "", nil, err
	}
	s.Write("\nLIMIT ", s.Arg(limit))
	return s.String(), s.Args(), nil
}
