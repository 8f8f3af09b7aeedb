package dashboards

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// Audit event kinds of the layout writes.
const (
	AuditCreated = "dashboard_layout.created"
	AuditUpdated = "dashboard_layout.updated"
	AuditDeleted = "dashboard_layout.deleted"
)

// writerRoles are the roles that may write layouts: every role but a
// read-only one, of which accounts has none yet.
var writerRoles = []string{accounts.RoleAdmin, accounts.RoleMember}

// maxBody caps a request: the layout document and the few fields around
// it, so an oversized document gets its 422 naming the limit.
const maxBody = MaxLayoutBytes + 4<<10

// Deps is what the package needs from the role.
type Deps struct {
	DB *db.DB
	// Caller is the request's authenticated user; the tenant comes from
	// it, never from the request.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Audit records an event with the request's address; nil records
	// nothing.
	Audit func(*gin.Context, accounts.Event)
	Log   *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

type handler struct {
	Deps
	s *store
	// reader returns the request's user, or answers 401.
	reader func(*gin.Context) (accounts.Caller, bool)
	errs   *httpx.ErrorMap
}

// Register adds the /dashboard-layouts routes to protected, an /api/v1
// group behind the user credential check. PUT and DELETE are in other
// method trees than GET and POST, so their :layoutId stands where the
// others have :deviceUuid.
func Register(protected gin.IRoutes, d Deps) {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handler{Deps: d, s: &store{db: d.DB, now: d.Now}, reader: accounts.RequireUser(d.Caller, d.WriteError),
		errs: httpx.NewErrorMap(d.WriteError, d.Log, "dashboard layouts request failed",
			httpx.Case(http.StatusUnprocessableEntity, "validation_failed", ErrInvalid),
			httpx.Case(http.StatusUnprocessableEntity, "limit_exceeded", ErrLimit),
			httpx.Case(http.StatusNotFound, "not_found", ErrNotFound),
			httpx.Case(http.StatusConflict, "conflict", ErrConflict))}
	writer := accounts.RequireRole(d.Caller, d.WriteError, "dashboard layouts", writerRoles...)
	protected.GET("/dashboard-layouts", h.list)
	protected.POST("/dashboard-layouts", writer, h.save)
	protected.GET("/dashboard-layouts/:deviceUuid", h.getDefault)
	protected.GET("/dashboard-layouts/:deviceUuid/all", h.listDevice)
	protected.POST("/dashboard-layouts/:deviceUuid", writer, h.create)
	protected.PUT("/dashboard-layouts/:layoutId", writer, h.update)
	protected.DELETE("/dashboard-layouts/:layoutId", writer, h.remove)
}

// fail answers err. A *ValidationError is an ErrInvalid; a
// *VersionError is the one answer with a field beyond the error shape's
// two: the console reads the current version to offer a reload
// (docs/dashboards.md, section Versions).
func (h *handler) fail(c *gin.Context, err error) {
	var vc *VersionError
	if errors.As(err, &vc) {
		setETag(c, vc.Current)
		c.AbortWithStatusJSON(http.StatusConflict, gin.H{"error": gin.H{"code": "version_conflict", "message": err.Error(),
			"currentVersion": vc.Current}})
		return
	}
	h.errs.Fail(c, err)
}

func (h *handler) audit(c *gin.Context, who accounts.Caller, kind string, d Dashboard, detail map[string]any) {
	if h.Audit == nil {
		return
	}
	if detail == nil {
		detail = map[string]any{}
	}
	detail["deviceUuid"], detail["name"] = d.DeviceUUID, d.Name
	h.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: kind, Actor: who.UserID, ActorKind: "user", Target: *d.ID, Detail: detail})
}

// setETag names the layout's version as its entity tag.
func setETag(c *gin.Context, version int64) {
	c.Header("ETag", `"`+strconv.FormatInt(version, 10)+`"`)
}

func (h *handler) answer(c *gin.Context, status int, d Dashboard) {
	if !d.Generated {
		setETag(c, d.Version)
	}
	c.JSON(status, d)
}

// getDefault serves GET /dashboard-layouts/:deviceUuid: the stored
// default, else one generated from the agent's readings.
func (h *handler) getDefault(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	agent, name, ok := h.device(c, who)
	if !ok {
		return
	}
	d, err := h.s.defaultOf(ctx, who.TenantUUID, agent)
	if errors.Is(err, ErrNotFound) {
		d, err = h.s.generate(ctx, agent, name)
	}
	if err != nil {
		h.fail(c, err)
		return
	}
	h.answer(c, http.StatusOK, d)
}

// device returns the path's agent, canonical, and its name, or answers
// 404 when it is not the caller's tenant's (another tenant's and none
// answer alike).
func (h *handler) device(c *gin.Context, who accounts.Caller) (string, string, bool) {
	u, err := codec.ParseUUID(c.Param("deviceUuid"))
	if err != nil {
		h.fail(c, fmt.Errorf("%w: agent %s", ErrNotFound, quote(c.Param("deviceUuid"))))
		return "", "", false
	}
	name, err := h.s.agent(c.Request.Context(), h.DB.ReadSQL(), who.TenantUUID, u.String(), false)
	if err != nil {
		h.fail(c, err)
		return "", "", false
	}
	return u.String(), name, true
}

func (h *handler) listDevice(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	agent, _, ok := h.device(c, who)
	if !ok {
		return
	}
	list, _, err := h.s.list(c.Request.Context(), filter{tenant: who.TenantUUID, agent: agent, limit: MaxPerDevice})
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"layouts": list})
}

// list serves GET /dashboard-layouts: the tenant's layouts by device and
// name, a page at a time.
func (h *handler) list(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	f := filter{tenant: who.TenantUUID, limit: DefaultLimit}
	if v := c.Query("deviceUuid"); v != "" {
		u, err := codec.ParseUUID(v)
		if err != nil {
			h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "deviceUuid must be a hyphenated UUID, got "+quote(v))
			return
		}
		f.agent = u.String()
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "limit must be 1.."+strconv.Itoa(MaxLimit)+", got "+quote(v))
			return
		}
		f.limit = n
	}
	if v := c.Query("cursor"); v != "" {
		after, err := decodeCursor(v)
		if err != nil {
			h.WriteError(c, http.StatusBadRequest, "invalid_parameter", err.Error())
			return
		}
		f.after = after
	}
	list, next, err := h.s.list(c.Request.Context(), f)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"layouts": list, "nextCursor": next})
}

// Input is the body of the write routes. deviceUuid is for POST
// /dashboard-layouts only; version for PUT only. In a PUT an absent field
// stays as it is.
type Input struct {
	DeviceUUID *string         `json:"deviceUuid"`
	Name       *string         `json:"name"`
	IsDefault  *bool           `json:"isDefault"`
	Version    *int64          `json:"version"`
	Layout     json.RawMessage `json:"layout"`
}

func (h *handler) bind(c *gin.Context) (Input, bool) {
	var in Input
	return in, httpx.BindStrict(c, maxBody, &in, h.WriteError)
}

// layout decodes the body's layout, its problems named under "layout".
func layout(raw json.RawMessage) (Layout, error) {
	l, err := DecodeLayout(raw)
	var ve *ValidationError
	if errors.As(err, &ve) {
		return Layout{}, ve.under("layout")
	}
	return l, err
}

// save serves POST /dashboard-layouts: a create naming its device in the
// body.
func (h *handler) save(c *gin.Context) {
	in, ok := h.bind(c)
	if !ok {
		return
	}
	if in.DeviceUUID == nil {
		h.fail(c, &ValidationError{Problems: []Problem{{Path: "deviceUuid", Msg: "is required"}}})
		return
	}
	h.createFor(c, *in.DeviceUUID, in)
}

// create serves POST /dashboard-layouts/:deviceUuid.
func (h *handler) create(c *gin.Context) {
	in, ok := h.bind(c)
	if !ok {
		return
	}
	if in.DeviceUUID != nil {
		if u, err := codec.ParseUUID(*in.DeviceUUID); err != nil || !strings.EqualFold(u.String(), c.Param("deviceUuid")) {
			h.fail(c, &ValidationError{Problems: []Problem{{Path: "deviceUuid", Msg: "must be the device of the path, or left out"}}})
			return
		}
	}
	h.createFor(c, c.Param("deviceUuid"), in)
}

func (h *handler) createFor(c *gin.Context, device string, in Input) {
	who, _ := h.Caller(c)
	u, err := codec.ParseUUID(device)
	if err != nil {
		h.fail(c, fmt.Errorf("%w: agent %s", ErrNotFound, quote(device)))
		return
	}
	var probs []Problem
	if in.Version != nil {
		probs = append(probs, Problem{Path: "version", Msg: "a new layout starts at version 1; version is for updates"})
	}
	var name string
	if in.Name == nil {
		probs = append(probs, Problem{Path: "name", Msg: "is required"})
	} else if n, err := CheckName(*in.Name); err != nil {
		probs = append(probs, Problem{Path: "name", Msg: nameRule})
	} else {
		name = n
	}
	var l Layout
	if len(in.Layout) == 0 {
		probs = append(probs, Problem{Path: "layout", Msg: "is required"})
	} else if dl, err := layout(in.Layout); err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			h.fail(c, err)
			return
		}
		probs = append(probs, ve.Problems...)
	} else {
		l = dl
	}
	if len(probs) > 0 {
		h.fail(c, &ValidationError{Problems: probs})
		return
	}
	d, err := h.s.create(c.Request.Context(), who.TenantUUID, u.String(), who.UserID, name, l, in.IsDefault != nil && *in.IsDefault)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditCreated, d, map[string]any{"isDefault": d.IsDefault, "widgets": len(d.Layout.Widgets)})
	h.answer(c, http.StatusCreated, d)
}

var nameRule = "must be 1.." + strconv.Itoa(MaxName) + " characters without control characters"

// update serves PUT /dashboard-layouts/:layoutId. The version to update
// may come in the body or, as an entity tag, in If-Match.
func (h *handler) update(c *gin.Context) {
	who, _ := h.Caller(c)
	in, ok := h.bind(c)
	if !ok {
		return
	}
	var (
		ch    change
		probs []Problem
	)
	if in.DeviceUUID != nil {
		probs = append(probs, Problem{Path: "deviceUuid", Msg: "a layout stays with its device"})
	}
	if in.Name != nil {
		if n, err := CheckName(*in.Name); err != nil {
			probs = append(probs, Problem{Path: "name", Msg: nameRule})
		} else {
			ch.name = &n
		}
	}
	if len(in.Layout) > 0 {
		l, err := layout(in.Layout)
		var ve *ValidationError
		switch {
		case errors.As(err, &ve):
			probs = append(probs, ve.Problems...)
		case err != nil:
			h.fail(c, err)
			return
		default:
			ch.layout = &l
		}
	}
	ch.isDefault, ch.version = in.IsDefault, in.Version
	if ch.version == nil {
		v, err := ifMatch(c.GetHeader("If-Match"))
		if err != nil {
			probs = append(probs, Problem{Path: "If-Match", Msg: err.Error()})
		}
		ch.version = v
	}
	if in.Name == nil && len(in.Layout) == 0 && in.IsDefault == nil {
		probs = append(probs, Problem{Path: "body", Msg: "give at least one of name, layout, isDefault"})
	}
	if len(probs) > 0 {
		h.fail(c, &ValidationError{Problems: probs})
		return
	}
	d, err := h.s.update(c.Request.Context(), who.TenantUUID, c.Param("layoutId"), ch)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditUpdated, d, map[string]any{"version": d.Version, "isDefault": d.IsDefault})
	h.answer(c, http.StatusOK, d)
}

// ifMatch reads an If-Match of one entity tag this API sent ("3", or
// W/"3"); "" and "*" ask for no version.
func ifMatch(v string) (*int64, error) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
	if v == "" || v == "*" {
		return nil, nil
	}
	n, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 64)
	if err != nil || n < 1 || !strings.HasPrefix(v, `"`) || !strings.HasSuffix(v, `"`) {
		return nil, errors.New("must be one entity tag this API sent, such as \"3\"")
	}
	return &n, nil
}

// remove serves DELETE /dashboard-layouts/:layoutId.
func (h *handler) remove(c *gin.Context) {
	who, _ := h.Caller(c)
	d, promoted, err := h.s.remove(c.Request.Context(), who.TenantUUID, c.Param("layoutId"))
	if err != nil {
		h.fail(c, err)
		return
	}
	detail := map[string]any{"wasDefault": d.IsDefault}
	if promoted != "" {
		detail["newDefault"] = promoted
	}
	h.audit(c, who, AuditDeleted, d, detail)
	c.Status(http.StatusNoContent)
}
