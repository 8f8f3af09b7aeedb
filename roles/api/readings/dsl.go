package readings

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/roles/api/query"
)

// Defaults of POST /readings/query when the body leaves them out.
const (
	defaultQuerySpan = time.Hour
	defaultQueryStep = "1m"
)

// queryRequest is the body of POST /readings/query. Times are RFC 3339
// strings or Unix milliseconds; step is a duration such as "1m".
type queryRequest struct {
	Query string          `json:"query"`
	Start json.RawMessage `json:"start"`
	End   json.RawMessage `json:"end"`
	Step  json.RawMessage `json:"step"`
}

// query is POST /readings/query: the query language of roles/api/query.
func (h *handler) query(c *gin.Context) {
	tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	body, ok := h.readBody(c)
	if !ok {
		return
	}
	var req queryRequest
	if err := decodeStrict(body, &req); err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", err.Error())
		return
	}
	rng, stepText, err := h.queryRange(req)
	if err != nil {
		h.fail(c, "query", err)
		return
	}
	if strings.TrimSpace(req.Query) == "" {
		h.fail(c, "query", badParam("query", "is required, as in {\"query\": \"readings{metric_name=\\\"boiler.temp\\\"}\"}"))
		return
	}
	d := h.DB
	// Parsing apart from planning tells a bare selector (raw samples at
	// their own times) from the rest (values on the step grid).
	expr, err := query.ParseLimits(req.Query, h.lim)
	var plan *query.Plan
	if err == nil {
		plan, err = query.NewPlan(expr, tenant, rng, d.Dialect(), h.lim)
	}
	if err != nil {
		h.queryError(c, err, true)
		return
	}
	series, err := query.Run(c.Request.Context(), d.ReadSQL(), plan)
	if err != nil {
		h.queryError(c, err, false)
		return
	}
	resultType := "matrix"
	if _, raw := expr.(*query.Selector); raw {
		resultType = "raw"
	}
	c.JSON(http.StatusOK, gin.H{"resultType": resultType, "start": utcTime(rng.Start), "end": utcTime(rng.End),
		"step": stepText, "series": series})
}

// queryRange reads start, end and step, applying the defaults: end now,
// start an hour before end, step 1m. The query package checks the rest
// (order, step and range limits).
func (h *handler) queryRange(req queryRequest) (query.Range, string, error) {
	var r query.Range
	end, ok, err := parseJSONTime("end", req.End)
	if err != nil {
		return r, "", err
	}
	if !ok {
		end = h.Now().UTC().Truncate(time.Microsecond)
	}
	start, ok, err := parseJSONTime("start", req.Start)
	if err != nil {
		return r, "", err
	}
	if !ok {
		start = end.Add(-defaultQuerySpan)
	}
	stepText := defaultQueryStep
	if len(req.Step) > 0 && string(req.Step) != "null" {
		if err := json.Unmarshal(req.Step, &stepText); err != nil {
			return r, "", badParam("step", "must be a duration string such as \"1m\", got %s", quote(string(req.Step)))
		}
	}
	step, err := parseStep("step", stepText)
	if err != nil {
		return r, "", err
	}
	return query.Range{Start: start, End: end, Step: step}, stepText, nil
}

// queryError answers the query package's errors as docs/query-language.md
// lists them. Any other error from planning is a bug (the tenant and the
// dialect are ours); from running, a database failure.
func (h *handler) queryError(c *gin.Context, err error, planning bool) {
	var pe *query.ParseError
	var pa *query.ParamError
	var le *query.LimitError
	switch {
	case errors.As(err, &pe):
		h.WriteError(c, http.StatusBadRequest, "invalid_query", pe.Error())
	case errors.As(err, &pa):
		h.fail(c, "query", badParam(pa.Param, "%s", pa.Msg))
	case errors.As(err, &le):
		h.WriteError(c, http.StatusUnprocessableEntity, "limit_exceeded", le.Error())
	case planning:
		h.Log.Error("plan readings query", "err", err)
		h.WriteError(c, http.StatusInternalServerError, "internal", "internal error")
	default:
		h.fail(c, "query", err)
	}
}
