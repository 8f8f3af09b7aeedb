package ai

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// maxBody caps a request: a question with its history, or a suggestion
// request.
const maxBody = 64 << 10

// maxRounds bounds the provider calls of one chat: a model that keeps
// asking for tools after this many gets 422 ai_rounds_exhausted.
const maxRounds = 8

// Deps is what the package needs from the role.
type Deps struct {
	// Caller is the request's authenticated user; the tenant comes from
	// it, never from the request or the model.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Licence gates both routes on the licence feature ai:
	// licence.Manager.RequireFeature(licence.FeatureAI, WriteError).
	Licence gin.HandlerFunc
	// The reads the tools and the suggestions make.
	Agents    Agents
	Readings  Readings
	Incidents Incidents
	Events    Events
	// Config holds the api.ai_* settings: the provider, the token budget
	// per request and the rate limit per tenant.
	Config     config.API
	Registerer prometheus.Registerer
	// Limit counts the rate limit per tenant, shared by the replicas when
	// the role has Redis; nil counts it in this process at
	// Config.AIRateLimit.
	Limit httpx.RateLimiter
	Log   *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

type handler struct {
	*Deps
	provider *Provider
	m        *metrics
	reader   func(*gin.Context) (accounts.Caller, bool)
}

// Register adds POST /ai/chat and POST /dashboard/ai/suggestions to
// protected, the /api/v1 group behind the credential check. Both are
// reads: every user of the tenant may call them.
func Register(protected gin.IRoutes, d Deps) {
	if d.Caller == nil || d.WriteError == nil || d.Licence == nil || d.Agents == nil || d.Readings == nil || d.Incidents == nil || d.Events == nil {
		panic("BUG: ai.Register needs Caller, WriteError, Licence, Agents, Readings, Incidents and Events")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handler{Deps: &d, provider: NewProvider(d.Config), m: newMetrics(d.Registerer), reader: accounts.RequireUser(d.Caller, d.WriteError)}
	// Per tenant: the provider's cost is the tenant's, whoever of its
	// users asks.
	if d.Limit == nil {
		d.Limit = httpx.Local(httpx.NewLimiter(max(d.Config.AIRateLimit, 0), time.Minute))
	}
	limit := httpx.RateLimit(d.Limit, func(c *gin.Context) string {
		if who, ok := d.Caller(c); ok {
			return "tenant:" + who.TenantUUID
		}
		return ""
	}, d.WriteError)
	protected.POST("/ai/chat", d.Licence, limit, h.chat)
	protected.POST("/dashboard/ai/suggestions", d.Licence, limit, h.suggestions)
}

// Error codes of the assistant (docs/ai-assistant.md, section Errors).
const (
	CodeNotConfigured    = "ai_not_configured"
	CodeBudgetExhausted  = "ai_budget_exhausted"
	CodeRoundsExhausted  = "ai_rounds_exhausted"
	CodeProviderTimeout  = "ai_provider_timeout"
	CodeProviderError    = "ai_provider_error"
	codeValidationFailed = "validation_failed"
)

// budgetError is a request that spent its token budget before the
// model answered.
type budgetError struct{ spent, budget int64 }

func (e *budgetError) Error() string {
	return "the request spent its token budget (" + itoa(e.spent) + " of " + itoa(e.budget) + " tokens, api.ai_token_budget) before the model answered; ask a narrower question"
}

// roundsError is a model that kept asking for tools.
type roundsError struct{}

func (roundsError) Error() string {
	return "the model asked for tools in " + itoa(maxRounds) + " rounds without answering; ask a narrower question"
}

// fail answers err and returns the code it answered with, for the
// metrics.
func (h *handler) fail(c *gin.Context, route string, err error) {
	var (
		be *budgetError
		pe *ProviderError
		re roundsError
	)
	status, code, msg := http.StatusServiceUnavailable, "unavailable", "a dependency of the assistant is not available; retry later"
	switch {
	case errors.As(err, &be):
		status, code, msg = http.StatusUnprocessableEntity, CodeBudgetExhausted, be.Error()
	case errors.As(err, &re):
		status, code, msg = http.StatusUnprocessableEntity, CodeRoundsExhausted, re.Error()
	case errors.Is(err, ErrTimeout):
		status, code, msg = http.StatusGatewayTimeout, CodeProviderTimeout, "the AI provider did not answer within "+h.provider.timeout.String()+" (api.ai_timeout)"
	case errors.As(err, &pe):
		status, code, msg = http.StatusBadGateway, CodeProviderError, pe.Error()
	case errors.Is(err, context.Canceled) || httpx.ClientGone(c):
		status, code, msg = httpx.StatusClientClosedRequest, "client_closed_request", "the client closed the request"
	default:
		h.Log.Warn("ai request failed", "route", route, "err", err)
	}
	h.m.requests.WithLabelValues(route, code).Inc()
	h.WriteError(c, status, code, msg)
}

// invalid answers 422 validation_failed naming the field.
func (h *handler) invalid(c *gin.Context, route, msg string) {
	h.m.requests.WithLabelValues(route, codeValidationFailed).Inc()
	h.WriteError(c, http.StatusUnprocessableEntity, codeValidationFailed, msg)
}
