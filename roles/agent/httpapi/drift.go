package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// Drift is schema-drift detection (docs/drift.md): the protocol
// outputs' drift options, the stored events and the detector's state.
type Drift interface {
	// SetDriftOptions validates, stores and applies a protocol output's
	// drift_options (raw "null" clears them) and returns the output.
	SetDriftOptions(ctx context.Context, protocol string, options json.RawMessage) (any, error)
	// DriftEvents returns the events q selects, newest first, and how
	// many it selects in all.
	DriftEvents(ctx context.Context, q DriftQuery) (events any, total int, err error)
	// ClearDriftEvents deletes every stored event.
	ClearDriftEvents(ctx context.Context) (int64, error)
	// DriftState is what the detector knows of each enabled output.
	DriftState(ctx context.Context) (any, error)
}

// DriftQuery is the query of GET /v1/drift/events; a zero field selects
// every value.
type DriftQuery struct {
	Protocol, Kind, Field string
	Since                 int64 // Unix ms
	Limit                 int
}

// Limits of GET /v1/drift/events?limit=.
const (
	defaultDriftLimit = 200
	maxDriftLimit     = 1000
)

type driftRoutes struct{ routes }

// RegisterDrift adds the drift routes.
func RegisterDrift(g *gin.RouterGroup, d Deps) {
	r := driftRoutes{routes{Deps: d}}
	g.PATCH("/protocol-outputs/:protocol/drift", r.setOptions)
	g.GET("/drift/events", r.events)
	g.DELETE("/drift/events", r.clear)
	g.GET("/drift/state", r.state)
}

func (r driftRoutes) setOptions(c *gin.Context) {
	var in struct {
		DriftOptions json.RawMessage `json:"drift_options"`
	}
	if !bind(c, &in) {
		return
	}
	if len(in.DriftOptions) == 0 {
		fail(c, http.StatusBadRequest, "drift_options: is required (an object, or null to clear)")
		return
	}
	protocol, ok := endpointRoutes(r).protocolFor(c)
	if !ok {
		return
	}
	out, err := r.Drift.SetDriftOptions(c.Request.Context(), protocol, in.DriftOptions)
	r.reply(c, http.StatusOK, "set drift options", out, err)
}

func (r driftRoutes) events(c *gin.Context) {
	q := DriftQuery{Protocol: c.Query("protocol"), Kind: c.Query("kind"), Field: c.Query("field")}
	var ok bool
	if s := c.Query("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			fail(c, http.StatusBadRequest, "since: must be Unix milliseconds, got %q", s)
			return
		}
		q.Since = n
	}
	if q.Limit, ok = queryLimit(c, defaultDriftLimit, maxDriftLimit); !ok {
		return
	}
	events, total, err := r.Drift.DriftEvents(c.Request.Context(), q)
	r.reply(c, http.StatusOK, "list drift events", gin.H{"events": events, "total": total}, err)
}

func (r driftRoutes) clear(c *gin.Context) {
	n, err := r.Drift.ClearDriftEvents(c.Request.Context())
	r.reply(c, http.StatusOK, "clear drift events", gin.H{"deleted": n}, err)
}

func (r driftRoutes) state(c *gin.Context) {
	st, err := r.Drift.DriftState(c.Request.Context())
	r.reply(c, http.StatusOK, "drift state", st, err)
}

// queryLimit reads ?limit=, 1..maxLimit, def when absent, or answers 400
// naming it.
func queryLimit(c *gin.Context, def, maxLimit int) (int, bool) {
	s := c.Query("limit")
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		fail(c, http.StatusBadRequest, "limit: must be 1..%d, got %q", maxLimit, s)
		return 0, false
	}
	return n, true
}
