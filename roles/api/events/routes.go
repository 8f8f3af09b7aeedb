package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// Registry is what the routes need of the agent registry: the agent's
// tenant and the writer of target states that every target-state route
// uses, so a replayed state reaches the agent as any other change does.
type Registry interface {
	Agent(ctx context.Context, tenant, uuid string) (registry.Agent, error)
	TargetState(ctx context.Context, tenant, agent string) (registry.TargetState, error)
	SetTargetState(ctx context.Context, tenant, agent string, state json.RawMessage, by string, create bool) (registry.TargetState, error)
}

// Deps is what the package needs from the role.
type Deps struct {
	DB       *db.DB
	Registry Registry
	// Caller is the request's authenticated user; the tenant comes from
	// it, never from the request.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Audit records an event with the request's address; nil records
	// nothing.
	Audit func(*gin.Context, accounts.Event)
	// AdminGate runs after the admin check of a replay that applies (the
	// admin rate limit); nil runs nothing.
	AdminGate gin.HandlerFunc
	Log       *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// maxBody bounds a compare or replay request: two points.
const maxBody = 4 << 10

type handler struct {
	Deps
	s      *store
	reader func(*gin.Context) (accounts.Caller, bool)
	admin  gin.HandlerFunc
	errs   *httpx.ErrorMap
}

// Register adds the /events routes to protected, an /api/v1 group behind
// the user credential check.
func Register(protected gin.IRoutes, d Deps) {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handler{Deps: d, s: &store{db: d.DB}, reader: accounts.RequireUser(d.Caller, d.WriteError),
		admin: accounts.RequireAdmin(d.Caller, d.WriteError, d.AdminGate),
		errs: httpx.NewErrorMap(d.WriteError, d.Log, "events request failed",
			httpx.Case(http.StatusNotFound, "not_found", ErrNotFound, registry.ErrNotFound),
			httpx.Case(http.StatusUnprocessableEntity, "validation_failed", registry.ErrInvalid),
			httpx.Case(http.StatusConflict, "conflict", registry.ErrConflict))}
	protected.GET("/events/recent", h.recent)
	protected.GET("/events/search", h.search)
	protected.GET("/events/stats", h.stats)
	protected.GET("/events/device/:deviceUuid", h.device)
	protected.GET("/events/device/:deviceUuid/timeline", h.timeline)
	protected.POST("/events/device/:deviceUuid/compare", h.compare)
	protected.POST("/events/device/:deviceUuid/replay", h.replay)
}

// fail answers err: a field error is a 400 naming the field.
func (h *handler) fail(c *gin.Context, err error) {
	var fe *fieldError
	if errors.As(err, &fe) {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", fe.Error())
		return
	}
	h.errs.Fail(c, err)
}

// deviceOf returns the caller and the agent of the path, answering 404
// for an agent of another tenant as for none.
func (h *handler) deviceOf(c *gin.Context) (accounts.Caller, string, bool) {
	who, ok := h.reader(c)
	if !ok {
		return who, "", false
	}
	u, err := codec.ParseUUID(c.Param("deviceUuid"))
	if err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", fmt.Sprintf("deviceUuid must be a hyphenated UUID, got %q", clip(c.Param("deviceUuid"))))
		return who, "", false
	}
	if _, err := h.Registry.Agent(c.Request.Context(), who.TenantUUID, u.String()); err != nil {
		h.fail(c, err)
		return who, "", false
	}
	return who, u.String(), true
}

func (h *handler) page(c *gin.Context, tenant string, f Filter) {
	evs, next, err := List(c.Request.Context(), h.DB.ReadSQL(), h.DB.Dialect(), tenant, f)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"events": evs, "nextCursor": next.text()})
}

// recent answers GET /events/recent: the tenant's newest events.
func (h *handler) recent(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	f, err := listParams(c.Request.URL.Query(), false)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.page(c, who.TenantUUID, f)
}

// search answers GET /events/search.
func (h *handler) search(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	f, err := listParams(c.Request.URL.Query(), true)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.page(c, who.TenantUUID, f)
}

// deviceFilter reads the search's filters for the agent of the path.
func (h *handler) deviceFilter(c *gin.Context) (accounts.Caller, Filter, bool) {
	who, agent, ok := h.deviceOf(c)
	if !ok {
		return who, Filter{}, false
	}
	q := c.Request.URL.Query()
	if q.Has("agent") {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "agent: the path names the agent")
		return who, Filter{}, false
	}
	f, err := listParams(q, true)
	if err != nil {
		h.fail(c, err)
		return who, Filter{}, false
	}
	f.Agent = agent
	return who, f, true
}

// device answers GET /events/device/:deviceUuid: the search's filters,
// for one agent.
func (h *handler) device(c *gin.Context) {
	if who, f, ok := h.deviceFilter(c); ok {
		h.page(c, who.TenantUUID, f)
	}
}

// timeline answers GET /events/device/:deviceUuid/timeline: one agent's
// events oldest first, over from..to (default the last 24 h).
func (h *handler) timeline(c *gin.Context) {
	who, f, ok := h.deviceFilter(c)
	if !ok {
		return
	}
	if f.To.IsZero() {
		f.To = h.Now().UTC().Add(time.Microsecond)
	}
	if f.From.IsZero() {
		f.From = f.To.Add(-DefaultTimelineSpan)
	}
	f.Ascending = true
	evs, next, err := List(c.Request.Context(), h.DB.ReadSQL(), h.DB.Dialect(), who.TenantUUID, f)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"agentUuid": f.Agent, "from": f.From, "to": f.To, "events": evs, "nextCursor": next.text()})
}

// stats answers GET /events/stats: event counts by kind and time bucket.
func (h *handler) stats(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	q := c.Request.URL.Query()
	if q.Has("limit") || q.Has("cursor") {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "limit and cursor: stats has no pages")
		return
	}
	f, err := listParams(q, true, "bucket")
	if err != nil {
		h.fail(c, err)
		return
	}
	width, err := bucketParam(q.Get("bucket"))
	if err != nil {
		h.fail(c, err)
		return
	}
	if f.To.IsZero() {
		f.To = h.Now().UTC().Add(time.Microsecond)
	}
	if f.From.IsZero() {
		f.From = f.To.Add(-DefaultStatsSpan)
	}
	if n := f.To.Sub(f.From) / width; n > MaxBuckets {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter",
			fmt.Sprintf("bucket: from..to holds %d buckets of %s, at most %d; widen the bucket or narrow the range", n, width, MaxBuckets))
		return
	}
	buckets, err := Stats(c.Request.Context(), h.DB.ReadSQL(), h.DB.Dialect(), who.TenantUUID, f, width)
	if err != nil {
		h.fail(c, err)
		return
	}
	totals := map[string]int64{}
	var total int64
	for _, b := range buckets {
		totals[b.Kind] += b.Count
		total += b.Count
	}
	c.JSON(http.StatusOK, gin.H{"from": f.From, "to": f.To, "bucket": width.String(), "buckets": buckets, "totals": totals, "total": total})
}

// compareRequest is the body of POST .../compare.
type compareRequest struct {
	// State is "target" (default) or "reported".
	State string `json:"state"`
	From  *Point `json:"from"`
	// To is the current state when absent.
	To *Point `json:"to"`
}

// compare answers POST /events/device/:deviceUuid/compare: the changes
// from one snapshot of the agent's target or reported state to another.
func (h *handler) compare(c *gin.Context) {
	who, agent, ok := h.deviceOf(c)
	if !ok {
		return
	}
	var in compareRequest
	if !httpx.BindStrict(c, maxBody, &in, h.WriteError) {
		return
	}
	if in.State == "" {
		in.State = StateTarget
	}
	if in.State != StateTarget && in.State != StateReported {
		h.fail(c, invalid("state", "must be %q or %q, got %q", StateTarget, StateReported, clip(in.State)))
		return
	}
	if in.From == nil {
		h.fail(c, invalid("from", "is required"))
		return
	}
	ctx := c.Request.Context()
	from, err := h.s.resolve(ctx, who.TenantUUID, agent, in.State, *in.From, "from")
	if err != nil {
		h.fail(c, err)
		return
	}
	var to Snapshot
	if in.To != nil {
		to, err = h.s.resolve(ctx, who.TenantUUID, agent, in.State, *in.To, "to")
	} else {
		to, err = h.current(ctx, who.TenantUUID, agent, in.State)
	}
	if err != nil {
		h.fail(c, err)
		return
	}
	changes, truncated := Diff(from.doc, to.doc)
	c.JSON(http.StatusOK, gin.H{"agentUuid": agent, "state": in.State, "from": from, "to": to,
		"identical": len(changes) == 0, "changes": changes, "truncated": truncated})
}

// current is the agent's state now: its target state, or its newest
// state snapshot.
func (h *handler) current(ctx context.Context, tenant, agent, state string) (Snapshot, error) {
	if state == StateReported {
		return h.s.latestReported(ctx, tenant, agent)
	}
	ts, err := h.Registry.TargetState(ctx, tenant, agent)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{EventID: fmt.Sprintf("target_state:%s:%d", agent, ts.Version), At: ts.UpdatedAt, Version: ts.Version}
	if err := json.Unmarshal(ts.State, &snap.doc); err != nil {
		return Snapshot{}, fmt.Errorf("current target state: %w", err)
	}
	return snap, nil
}

// replayRequest is the body of POST .../replay.
type replayRequest struct {
	To    *Point `json:"to"`
	Apply bool   `json:"apply"`
}

// replay answers POST /events/device/:deviceUuid/replay: the target
// state the agent had at a point of the log. A dry run (the default)
// returns it with the changes from the current one; apply writes it as
// a new version through the registry, as PUT /agents/:uuid/target-state
// does, with that route's admin rule.
func (h *handler) replay(c *gin.Context) {
	who, agent, ok := h.deviceOf(c)
	if !ok {
		return
	}
	var in replayRequest
	if !httpx.BindStrict(c, maxBody, &in, h.WriteError) {
		return
	}
	if in.Apply {
		if h.admin(c); c.IsAborted() {
			return
		}
	}
	if in.To == nil {
		h.fail(c, invalid("to", "is required"))
		return
	}
	ctx := c.Request.Context()
	at, err := h.s.resolve(ctx, who.TenantUUID, agent, StateTarget, *in.To, "to")
	if err != nil {
		h.fail(c, err)
		return
	}
	cur, err := h.current(ctx, who.TenantUUID, agent, StateTarget)
	if err != nil {
		h.fail(c, err)
		return
	}
	changes, truncated := Diff(cur.doc, at.doc)
	state, err := json.Marshal(at.doc)
	if err != nil {
		h.fail(c, fmt.Errorf("encode replayed state: %w", err))
		return
	}
	body := gin.H{"agentUuid": agent, "basedOn": at, "current": cur, "state": json.RawMessage(state),
		"changes": changes, "truncated": truncated, "dryRun": !in.Apply}
	if !in.Apply {
		c.JSON(http.StatusOK, body)
		return
	}
	ts, err := h.Registry.SetTargetState(ctx, who.TenantUUID, agent, state, who.UserID, false)
	if err != nil {
		h.fail(c, err)
		return
	}
	if h.Audit != nil {
		h.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: registry.AuditTargetState, Actor: who.UserID, ActorKind: "user",
			Target: agent, Detail: map[string]any{"version": ts.Version, "replayOf": at.Version}})
	}
	body["applied"] = ts
	c.JSON(http.StatusOK, body)
}
