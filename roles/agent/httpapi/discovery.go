package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Discovery is what POST /v1/discover and the discovery-rule routes act
// on (docs/discovery.md). Answers are the routes' JSON bodies. Errors:
// *Error for what the client can fix (400 naming the field, 404 for an
// unknown rule, 409 for a scan run moments ago, a rule running already
// or features.discovery off), ErrNotReady while the store is not open.
type Discovery interface {
	// Discover scans and answers {devices}; nothing is stored.
	Discover(ctx context.Context, in DiscoverInput) (any, error)
	// Rules is {rules}.
	Rules(ctx context.Context) (any, error)
	// CreateRule and PatchRule take the body as sent and answer the rule.
	CreateRule(ctx context.Context, body []byte) (any, error)
	PatchRule(ctx context.Context, uuid string, body []byte) (any, error)
	// DeleteRule deletes the rule and its runs.
	DeleteRule(ctx context.Context, uuid string) error
	// RunRule runs the rule now and answers the run with its devices.
	RunRule(ctx context.Context, uuid string) (any, error)
	// RuleRuns and Runs are {runs}, newest first.
	RuleRuns(ctx context.Context, uuid string, limit int) (any, error)
	Runs(ctx context.Context, limit int) (any, error)
}

// DiscoverInput is the body of POST /v1/discover.
type DiscoverInput struct {
	Protocols []string                   `json:"protocols"`
	Validate  bool                       `json:"validate"`
	ForceRun  bool                       `json:"forceRun"`
	Overrides map[string]json.RawMessage `json:"overrides"`
}

// Limits of the run lists (docs/discovery.md, section Routes).
const (
	DefaultRuleRunsLimit = 50
	MaxRuleRunsLimit     = 50 // a rule keeps 50 runs
	DefaultRunsLimit     = 20
	MaxRunsLimit         = 500
)

type discoveryRoutes struct{ routes }

// RegisterDiscovery adds POST /v1/discover and the discovery-rule routes.
func RegisterDiscovery(g *gin.RouterGroup, d Deps) {
	r := discoveryRoutes{routes{Deps: d}}
	g.POST("/discover", r.discover)
	g.GET("/discovery-rules", r.rules)
	g.POST("/discovery-rules", r.createRule)
	g.PATCH("/discovery-rules/:uuid", r.patchRule)
	g.DELETE("/discovery-rules/:uuid", r.deleteRule)
	g.POST("/discovery-rules/:uuid/run", r.runRule)
	g.GET("/discovery-rules/:uuid/runs", r.ruleRuns)
	g.GET("/discovery-runs", r.runs)
}

func (r discoveryRoutes) discover(c *gin.Context) {
	var in DiscoverInput
	if !bind(c, &in) {
		return
	}
	v, err := r.Discovery.Discover(c.Request.Context(), in)
	r.reply(c, http.StatusOK, "discover", v, err)
}

func (r discoveryRoutes) rules(c *gin.Context) {
	v, err := r.Discovery.Rules(c.Request.Context())
	r.reply(c, http.StatusOK, "list discovery rules", v, err)
}

func (r discoveryRoutes) createRule(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	v, err := r.Discovery.CreateRule(c.Request.Context(), body)
	r.reply(c, http.StatusCreated, "create discovery rule", v, err)
}

func (r discoveryRoutes) patchRule(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	v, err := r.Discovery.PatchRule(c.Request.Context(), c.Param("uuid"), body)
	r.reply(c, http.StatusOK, "update discovery rule", v, err)
}

func (r discoveryRoutes) deleteRule(c *gin.Context) {
	if err := r.Discovery.DeleteRule(c.Request.Context(), c.Param("uuid")); err != nil {
		r.respond(c, "delete discovery rule", err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (r discoveryRoutes) runRule(c *gin.Context) {
	v, err := r.Discovery.RunRule(c.Request.Context(), c.Param("uuid"))
	r.reply(c, http.StatusOK, "run discovery rule", v, err)
}

func (r discoveryRoutes) ruleRuns(c *gin.Context) {
	limit, ok := limitParam(c, DefaultRuleRunsLimit, MaxRuleRunsLimit)
	if !ok {
		return
	}
	v, err := r.Discovery.RuleRuns(c.Request.Context(), c.Param("uuid"), limit)
	r.reply(c, http.StatusOK, "list discovery rule runs", v, err)
}

func (r discoveryRoutes) runs(c *gin.Context) {
	limit, ok := limitParam(c, DefaultRunsLimit, MaxRunsLimit)
	if !ok {
		return
	}
	v, err := r.Discovery.Runs(c.Request.Context(), limit)
	r.reply(c, http.StatusOK, "list discovery runs", v, err)
}
