package promapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/query"
)

const (
	// defaultTimeout bounds a query without a timeout parameter, as
	// Prometheus's query.timeout does by default.
	defaultTimeout = 2 * time.Minute
	// defaultLookupSpan is how far back /series, /labels and label values
	// look without a start: what a metric browser shows, read from the
	// readings themselves.
	defaultLookupSpan = 24 * time.Hour
	// maxLookupSeries caps the series one lookup reads; past it the answer
	// is truncated with a warning, as Prometheus's limit parameter does.
	maxLookupSeries = 10000
)

// Deps is what the routes need from the API role.
type Deps struct {
	// DB is the cloud database.
	DB *db.DB
	// Tenant returns the caller's tenant as the readings table stores it,
	// set by the authentication middleware; false answers 401.
	Tenant func(*gin.Context) (string, bool)
	// Limits bound queries as they bound POST /readings/query; zero fields
	// take query.DefaultLimits.
	Limits query.Limits
	// Now is the clock for a query without a time; time.Now when nil.
	Now func() time.Time
	// Log receives database failures; discarded when nil.
	Log *slog.Logger
}

type handler struct {
	Deps
	lim query.Limits
}

// Register adds Prometheus's query API under g, the group at
// /api/v1/prom whose middleware has authenticated the caller: a
// Prometheus client's base URL is that group's.
func Register(g gin.IRoutes, d Deps) {
	if d.DB == nil || d.Tenant == nil {
		panic("BUG: promapi.Register needs DB and Tenant")
	}
	h := &handler{Deps: d, lim: d.Limits.WithDefaults()}
	if h.Now == nil {
		h.Now = time.Now
	}
	if h.Log == nil {
		h.Log = slog.New(slog.DiscardHandler)
	}
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		g.Handle(m, "/api/v1/query", h.instant)
		g.Handle(m, "/api/v1/query_range", h.rangeQuery)
		g.Handle(m, "/api/v1/series", h.series)
		g.Handle(m, "/api/v1/labels", h.labels)
	}
	g.GET("/api/v1/label/:name/values", h.labelValues)
}

// request is what every handler starts with: the tenant, the form (query
// string and, for POST, the url-encoded body) and the request's context,
// bounded by the timeout parameter.
func (h *handler) request(c *gin.Context) (tenant string, form url.Values, ctx context.Context, cancel context.CancelFunc, ok bool) {
	tenant, ok = h.Tenant(c)
	if !ok {
		writeError(c, http.StatusUnauthorized, "unauthorized", "a credential is required")
		return "", nil, nil, nil, false
	}
	if err := c.Request.ParseForm(); err != nil {
		writeError(c, http.StatusBadRequest, "bad_data", fmt.Sprintf("error parsing form values: %v", err))
		return "", nil, nil, nil, false
	}
	timeout := defaultTimeout
	if s := c.Request.Form.Get("timeout"); s != "" {
		d, err := parseStep("timeout", s)
		if err != nil {
			h.fail(c, err)
			return "", nil, nil, nil, false
		}
		timeout = min(d, defaultTimeout)
	}
	ctx, cancel = context.WithTimeout(c.Request.Context(), timeout)
	return tenant, c.Request.Form, ctx, cancel, true
}

// compile parses a PromQL expression and maps it onto the query language.
func (h *handler) compile(src string) (plan, error) {
	if strings.TrimSpace(src) == "" {
		return plan{}, &paramError{"query", "cannot parse \"\" to a valid expression"}
	}
	if len(src) > h.lim.MaxQueryBytes {
		return plan{}, &paramError{"query", fmt.Sprintf("query length %d bytes exceeds the limit of %d bytes (max_query_bytes)", len(src), h.lim.MaxQueryBytes)}
	}
	n, err := parse(src)
	if err != nil {
		return plan{}, locate(src, err)
	}
	p, err := translate(n)
	if err != nil {
		return plan{}, locate(src, err)
	}
	return p, nil
}

// checked passes e through the query language's parser, which validates
// what this package's parser leaves to it (regular expressions, agent ids,
// parameters, nesting).
func (h *handler) checked(e query.Expr) (query.Expr, error) {
	return query.ParseLimits(e.String(), h.lim)
}

// instant is GET and POST /api/v1/query.
func (h *handler) instant(c *gin.Context) {
	tenant, form, ctx, cancel, ok := h.request(c)
	if !ok {
		return
	}
	defer cancel()
	t, given, err := parseTime("time", form.Get("time"))
	if err != nil {
		h.fail(c, err)
		return
	}
	if !given {
		t = h.Now().UTC().Truncate(time.Millisecond)
	}
	p, err := h.compile(form.Get("query"))
	if err != nil {
		h.fail(c, err)
		return
	}
	switch {
	case p.scalar != nil:
		c.JSON(http.StatusOK, response{Status: "success", Data: queryData{ResultType: "scalar", Result: sample{t, *p.scalar}}})
		return
	case p.raw != nil:
		// The samples in (t - range, t], as Prometheus selects them.
		e, err := h.checked(&query.Selector{Matchers: p.raw.sel.matchers})
		if err != nil {
			h.fail(c, err)
			return
		}
		rng := query.Range{Start: t.Add(-p.raw.rng + time.Microsecond), End: t, Step: h.lim.MinStep}
		series, err := h.run(ctx, tenant, e, rng, h.lim)
		if err != nil {
			h.fail(c, err)
			return
		}
		c.JSON(http.StatusOK, response{Status: "success", Data: queryData{ResultType: "matrix", Result: toMatrix(series)}})
		return
	}
	e, err := h.checked(p.expr)
	if err != nil {
		h.fail(c, err)
		return
	}
	// One evaluation a microsecond after t on a microsecond grid: the
	// query language's windows [t' - range, t') are then Prometheus's
	// (t - range, t] at the resolution readings are stored with.
	at := t.Truncate(time.Microsecond).Add(time.Microsecond)
	lim := h.lim
	lim.MinStep = time.Microsecond
	series, err := h.run(ctx, tenant, e, query.Range{Start: at, End: at, Step: time.Microsecond}, lim)
	if err != nil {
		h.fail(c, err)
		return
	}
	out := make([]vectorSample, 0, len(series))
	for _, s := range series {
		if len(s.Points) > 0 {
			out = append(out, vectorSample{Metric: toPromLabels(s.Labels), Value: sample{t, s.Points[len(s.Points)-1].V}})
		}
	}
	c.JSON(http.StatusOK, response{Status: "success", Data: queryData{ResultType: "vector", Result: out}})
}

// rangeQuery is GET and POST /api/v1/query_range.
func (h *handler) rangeQuery(c *gin.Context) {
	tenant, form, ctx, cancel, ok := h.request(c)
	if !ok {
		return
	}
	defer cancel()
	start, ok1, err := parseTime("start", form.Get("start"))
	if err == nil && !ok1 {
		err = &paramError{"start", fmt.Sprintf("cannot parse %q to a valid timestamp", form.Get("start"))}
	}
	var end time.Time
	if err == nil {
		var ok2 bool
		end, ok2, err = parseTime("end", form.Get("end"))
		if err == nil && !ok2 {
			err = &paramError{"end", fmt.Sprintf("cannot parse %q to a valid timestamp", form.Get("end"))}
		}
	}
	var step time.Duration
	if err == nil {
		step, err = parseStep("step", form.Get("step"))
	}
	if err == nil && end.Before(start) {
		err = &paramError{"end", "end timestamp must not be before start time"}
	}
	if err != nil {
		h.fail(c, err)
		return
	}
	p, err := h.compile(form.Get("query"))
	if err != nil {
		h.fail(c, err)
		return
	}
	switch {
	case p.raw != nil:
		h.fail(c, &errorAt{pos: -1, msg: `invalid expression type "range vector" for range query, must be Scalar or instant Vector`})
		return
	case p.scalar != nil:
		n := end.Sub(start)/step + 1
		if n > time.Duration(h.lim.MaxPointsPerSeries) {
			h.fail(c, pointsError(h.lim))
			return
		}
		values := make([]sample, 0, n)
		for t := start; !t.After(end); t = t.Add(step) {
			values = append(values, sample{t, *p.scalar})
		}
		c.JSON(http.StatusOK, response{Status: "success", Data: queryData{ResultType: "matrix",
			Result: []matrixSeries{{Metric: map[string]string{}, Values: values}}}})
		return
	}
	e, err := h.checked(p.expr)
	if err != nil {
		h.fail(c, err)
		return
	}
	series, err := h.run(ctx, tenant, e, query.Range{Start: start, End: end, Step: step}, h.lim)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, response{Status: "success", Data: queryData{ResultType: "matrix", Result: toMatrix(series)}})
}

func pointsError(lim query.Limits) error {
	return &paramError{"step", fmt.Sprintf("exceeded maximum resolution of %d points per timeseries (max_points_per_series). Try decreasing the query resolution (?step=XX)", lim.MaxPointsPerSeries)}
}

func (h *handler) run(ctx context.Context, tenant string, e query.Expr, r query.Range, lim query.Limits) ([]query.Series, error) {
	pl, err := query.NewPlan(e, tenant, r, h.DB.Dialect(), lim)
	if err != nil {
		return nil, err
	}
	return query.Run(ctx, h.DB.ReadSQL(), pl)
}

func toMatrix(series []query.Series) []matrixSeries {
	out := make([]matrixSeries, 0, len(series))
	for _, s := range series {
		m := matrixSeries{Metric: toPromLabels(s.Labels), Values: make([]sample, len(s.Points))}
		for i, pt := range s.Points {
			m.Values[i] = sample{pt.T, pt.V}
		}
		out = append(out, m)
	}
	return out
}

// lookup finds the series the match[] selectors name (every series when
// none is given and optional) in the range of the start and end
// parameters.
func (h *handler) lookup(c *gin.Context, required bool) (series []map[string]string, warnings []string, ok bool) {
	tenant, form, ctx, cancel, ok := h.request(c)
	if !ok {
		return nil, nil, false
	}
	defer cancel()
	start, end, warnings, err := h.lookupRange(form)
	if err != nil {
		h.fail(c, err)
		return nil, nil, false
	}
	matches := form["match[]"]
	if len(matches) == 0 {
		if required {
			h.fail(c, &paramError{"match[]", "no match[] parameter provided"})
			return nil, nil, false
		}
		matches = []string{""}
	}
	seen := map[string]bool{}
	for _, m := range matches {
		sel := &query.Selector{}
		if m != "" {
			p, err := h.compile(m)
			if err == nil && p.sel == nil {
				err = &paramError{"match[]", fmt.Sprintf("%q is not a vector selector", query.Shorten(m))}
			}
			var e query.Expr
			if err == nil {
				e, err = h.checked(&query.Selector{Matchers: p.sel.matchers})
			}
			if err != nil {
				h.fail(c, err)
				return nil, nil, false
			}
			sel = e.(*query.Selector)
		}
		found, more, err := query.FindSeries(ctx, h.DB.ReadSQL(), h.DB.Dialect(), tenant, sel, start, end, h.lim, maxLookupSeries)
		if err != nil {
			h.fail(c, err)
			return nil, nil, false
		}
		if more {
			warnings = append(warnings, fmt.Sprintf("results truncated: more than %d series; narrow match[] or the time range", maxLookupSeries))
		}
		for _, s := range found {
			key := fmt.Sprint(s)
			if !seen[key] {
				seen[key] = true
				series = append(series, toPromLabels(s))
			}
		}
	}
	return series, warnings, true
}

// lookupRange reads start and end for the lookups: end defaults to now,
// start to defaultLookupSpan before end, and a start further back than
// max_range is brought forward with a warning.
func (h *handler) lookupRange(form url.Values) (start, end time.Time, warnings []string, err error) {
	end, ok, err := parseTime("end", form.Get("end"))
	if err != nil {
		return start, end, nil, err
	}
	if !ok {
		end = h.Now().UTC().Truncate(time.Microsecond)
	}
	start, ok, err = parseTime("start", form.Get("start"))
	if err != nil {
		return start, end, nil, err
	}
	if !ok {
		start = end.Add(-defaultLookupSpan)
	}
	if end.Before(start) {
		return start, end, nil, &paramError{"end", "end timestamp must not be before start time"}
	}
	if earliest := end.Add(-h.lim.MaxRange); start.Before(earliest) {
		start = earliest
		warnings = append(warnings, fmt.Sprintf("start brought forward to %s: lookups reach back at most %s (max_range)",
			earliest.Format(time.RFC3339), h.lim.MaxRange))
	}
	return start, end, warnings, nil
}

// series is GET and POST /api/v1/series.
func (h *handler) series(c *gin.Context) {
	series, warnings, ok := h.lookup(c, true)
	if !ok {
		return
	}
	if series == nil {
		series = []map[string]string{}
	}
	c.JSON(http.StatusOK, response{Status: "success", Data: series, Warnings: warnings})
}

// labels is GET and POST /api/v1/labels.
func (h *handler) labels(c *gin.Context) {
	series, warnings, ok := h.lookup(c, false)
	if !ok {
		return
	}
	names := []string{}
	for _, l := range promLabels {
		for _, s := range series {
			if s[l.prom] != "" {
				names = append(names, l.prom)
				break
			}
		}
	}
	slices.Sort(names)
	c.JSON(http.StatusOK, response{Status: "success", Data: names, Warnings: warnings})
}

// labelValues is GET /api/v1/label/:name/values.
func (h *handler) labelValues(c *gin.Context) {
	name := c.Param("name")
	if !utf8.ValidString(name) || name == "" {
		writeError(c, http.StatusBadRequest, "bad_data", fmt.Sprintf("invalid label name: %q", query.Shorten(name)))
		return
	}
	known := false
	for _, l := range promLabels {
		known = known || l.prom == name
	}
	series, warnings, ok := h.lookup(c, false)
	if !ok {
		return
	}
	values := []string{}
	if known {
		seen := map[string]bool{}
		for _, s := range series {
			if v := s[name]; v != "" && !seen[v] {
				seen[v] = true
				values = append(values, v)
			}
		}
		slices.Sort(values)
	}
	c.JSON(http.StatusOK, response{Status: "success", Data: values, Warnings: warnings})
}

// writeError answers in Prometheus's error shape.
func writeError(c *gin.Context, status int, errorType, msg string) {
	c.AbortWithStatusJSON(status, response{Status: "error", ErrorType: errorType, Error: msg})
}

// executionLimits are the limits met while reading, which Prometheus
// reports as execution errors; the others refuse the request itself.
var executionLimits = map[string]bool{"max_series": true, "max_rows": true, "regex_complexity": true}

// fail answers err with Prometheus's error types and status codes.
func (h *handler) fail(c *gin.Context, err error) {
	var (
		ea *errorAt
		pe *query.ParseError
		pa *query.ParamError
		le *query.LimitError
		my *paramError
	)
	switch {
	case errors.As(err, &ea):
		writeError(c, http.StatusBadRequest, "bad_data", ea.msg)
	case errors.As(err, &my):
		writeError(c, http.StatusBadRequest, "bad_data", my.Error())
	case errors.As(err, &pe):
		writeError(c, http.StatusBadRequest, "bad_data", "unsupported or invalid query: "+pe.Msg)
	case errors.As(err, &pa):
		writeError(c, http.StatusBadRequest, "bad_data", fmt.Sprintf("invalid parameter %q: %s", pa.Param, pa.Msg))
	case errors.As(err, &le) && executionLimits[le.Limit]:
		writeError(c, http.StatusUnprocessableEntity, "execution", le.Error())
	case errors.As(err, &le):
		writeError(c, http.StatusBadRequest, "bad_data", le.Error())
	case httpx.ClientGone(c):
		writeError(c, httpx.StatusClientClosedRequest, "canceled", "the client closed the request")
	case errors.Is(err, context.DeadlineExceeded):
		writeError(c, http.StatusServiceUnavailable, "timeout", "query timed out")
	default:
		h.Log.Error("prometheus api query", "path", c.FullPath(), "err", err)
		writeError(c, http.StatusServiceUnavailable, "unavailable", "the readings cannot be read now; retry")
	}
}
