package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// Anomaly is what the /v1/anomaly routes and POST /v1/test/anomaly act on:
// the agent's anomaly detection (docs/anomaly-agent.md). Answers are the
// JSON bodies of the routes. Errors: *Error for what the client can fix
// (400 naming the field, 409 for a setting the cloud manages or detection
// off), ErrNotReady while the detector is not running.
type Anomaly interface {
	// Metrics is {metrics: [...]}.
	Metrics(ctx context.Context) (any, error)
	// Config is {config}.
	Config() any
	// PatchConfig merges a partial config, applies it at once, stores it
	// with the settings and answers the full config.
	PatchConfig(ctx context.Context, body []byte) (any, error)
	// Alerts is {alerts, total}, newest first.
	Alerts(q AlertQuery) (any, error)
	ClearAlerts() error
	Stats() (any, error)
	// Baselines is {baselines, total}.
	Baselines(metric string, limit int) (any, error)
	// SaveBaselines saves at once and answers {message, stats}.
	SaveBaselines(ctx context.Context) (any, error)
	// Development reports whether the agent runs in development mode,
	// the only mode POST /v1/test/anomaly answers in.
	Development() bool
	// Inject is POST /v1/test/anomaly.
	Inject(ctx context.Context, in TestAnomaly) (any, error)
}

// AlertQuery is GET /v1/anomaly/alerts' filter; zero fields select all.
type AlertQuery struct {
	SinceMS  int64
	Severity string
	Metric   string
	Limit    int
}

// TestAnomaly is the body of POST /v1/test/anomaly.
type TestAnomaly struct {
	Metric string   `json:"metric"`
	Value  *float64 `json:"value"`
	// Count is how many points of value to inject; 1 when 0.
	Count int `json:"count"`
}

// Limits of the anomaly routes (docs/anomaly-agent.md, section Routes).
const (
	DefaultAlertLimit    = 200
	MaxAlertLimit        = 500
	DefaultBaselineLimit = 100
	MaxBaselineLimit     = 500
	MaxTestAnomalyCount  = 1000
)

type anomalyRoutes struct{ routes }

// RegisterAnomaly adds the anomaly detection routes.
func RegisterAnomaly(g *gin.RouterGroup, d Deps) {
	r := anomalyRoutes{routes{Deps: d}}
	g.GET("/anomaly/metrics", r.metrics)
	g.GET("/anomaly/config", r.config)
	g.PATCH("/anomaly/config", r.patchConfig)
	g.GET("/anomaly/alerts", r.alerts)
	g.DELETE("/anomaly/alerts", r.clearAlerts)
	g.GET("/anomaly/stats", r.stats)
	g.GET("/anomaly/baselines", r.baselines)
	g.POST("/anomaly/save-baselines", r.saveBaselines)
	g.POST("/test/anomaly", r.inject)
}

func (r anomalyRoutes) metrics(c *gin.Context) {
	v, err := r.Anomaly.Metrics(c.Request.Context())
	r.reply(c, http.StatusOK, "list anomaly metrics", v, err)
}

func (r anomalyRoutes) config(c *gin.Context) { c.JSON(http.StatusOK, r.Anomaly.Config()) }

func (r anomalyRoutes) patchConfig(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	v, err := r.Anomaly.PatchConfig(c.Request.Context(), body)
	r.reply(c, http.StatusOK, "save anomaly config", v, err)
}

func (r anomalyRoutes) alerts(c *gin.Context) {
	q := AlertQuery{Metric: c.Query("metric"), Severity: c.Query("severity")}
	switch q.Severity {
	case "", "critical", "warning", "info":
	default:
		fail(c, http.StatusBadRequest, "severity must be one of critical, warning, info, got %q", q.Severity)
		return
	}
	if s := strings.TrimSpace(c.Query("since")); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			fail(c, http.StatusBadRequest, "since must be Unix milliseconds, got %q", s)
			return
		}
		q.SinceMS = v
	}
	var ok bool
	if q.Limit, ok = limitParam(c, DefaultAlertLimit, MaxAlertLimit); !ok {
		return
	}
	v, err := r.Anomaly.Alerts(q)
	r.reply(c, http.StatusOK, "list anomaly alerts", v, err)
}

// limitParam reads the limit query parameter: def when absent, and an
// explicit value outside 1..max is refused rather than capped, so a
// client notices it asked for more than it can get.
func limitParam(c *gin.Context, def, max int) (int, bool) {
	s := strings.TrimSpace(c.Query("limit"))
	if s == "" {
		return def, true
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > max {
		fail(c, http.StatusBadRequest, "limit must be 1..%d, got %q", max, s)
		return 0, false
	}
	return v, true
}

func (r anomalyRoutes) clearAlerts(c *gin.Context) {
	r.reply(c, http.StatusOK, "clear anomaly alerts", gin.H{"cleared": true}, r.Anomaly.ClearAlerts())
}

func (r anomalyRoutes) stats(c *gin.Context) {
	v, err := r.Anomaly.Stats()
	r.reply(c, http.StatusOK, "anomaly stats", v, err)
}

func (r anomalyRoutes) baselines(c *gin.Context) {
	limit, ok := limitParam(c, DefaultBaselineLimit, MaxBaselineLimit)
	if !ok {
		return
	}
	v, err := r.Anomaly.Baselines(c.Query("metric"), limit)
	r.reply(c, http.StatusOK, "list anomaly baselines", v, err)
}

func (r anomalyRoutes) saveBaselines(c *gin.Context) {
	v, err := r.Anomaly.SaveBaselines(c.Request.Context())
	r.reply(c, http.StatusOK, "save anomaly baselines", v, err)
}

func (r anomalyRoutes) inject(c *gin.Context) {
	if !r.Anomaly.Development() {
		fail(c, http.StatusNotFound, "POST /v1/test/anomaly answers only in development mode (agent.development, EDGEPLAT_AGENT_DEVELOPMENT=true)")
		return
	}
	var in TestAnomaly
	if !bind(c, &in) {
		return
	}
	switch {
	case strings.TrimSpace(in.Metric) == "":
		fail(c, http.StatusBadRequest, "metric is required")
		return
	case in.Value == nil:
		fail(c, http.StatusBadRequest, "value is required (a number)")
		return
	case in.Count < 0 || in.Count > MaxTestAnomalyCount:
		fail(c, http.StatusBadRequest, "count must be 1..%d, got %d", MaxTestAnomalyCount, in.Count)
		return
	}
	if in.Count == 0 {
		in.Count = 1
	}
	v, err := r.Anomaly.Inject(c.Request.Context(), in)
	r.reply(c, http.StatusOK, "inject anomaly test points", v, err)
}
