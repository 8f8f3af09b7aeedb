package export

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/readings"
)

// jobRoles may create background exports: a job is work the server does
// and a file it keeps, which the API's rule gives to admins where a
// request changes what the tenant has (docs/access.md). Streamed exports,
// which only read, are for every user.
var jobRoles = []string{accounts.RoleAdmin}

// Register adds the routes: protected is the /api/v1 group behind the
// user credential check, public the /api/v1 group without one, for the
// download link, whose token is its credential.
func (x *Export) Register(protected, public gin.IRoutes) {
	licensed := x.gate
	creator := accounts.RequireRole(x.d.Caller, x.d.WriteError, "export jobs", jobRoles...)
	protected.GET("/export/readings", licensed, x.stream)
	protected.POST("/export/jobs", licensed, creator, x.createJob)
	protected.GET("/export/jobs/:id", licensed, x.getJob)
	public.GET("/export/jobs/:id/download", licensed, x.download)
}

// caller returns the request's user and tenant key, or answers 401.
func (x *Export) caller(c *gin.Context) (accounts.Caller, string, bool) {
	who, ok := x.d.Caller(c)
	if !ok {
		x.d.WriteError(c, http.StatusUnauthorized, "unauthorized", "a user credential is required")
		return who, "", false
	}
	key, err := tenantKey(who.TenantUUID)
	if err != nil {
		x.errs.Fail(c, err)
		return who, "", false
	}
	return who, key, true
}

// parse reads format and the selection, or answers 400 naming the
// parameter.
func (x *Export) parse(c *gin.Context) (string, readings.Selection, bool) {
	q := c.Request.URL.Query()
	format := q.Get("format")
	switch {
	case len(q["format"]) > 1:
		x.d.WriteError(c, http.StatusBadRequest, "invalid_parameter", "format is given "+strconv.Itoa(len(q["format"]))+" times; give it once")
		return "", readings.Selection{}, false
	case format == "":
		format = FormatCSV
	case format != FormatCSV && format != FormatParquet:
		x.d.WriteError(c, http.StatusBadRequest, "invalid_parameter", "format must be one of csv, parquet, got "+strconv.Quote(short(format)))
		return "", readings.Selection{}, false
	}
	sel, err := readings.ParseSelection(q, x.d.Now(), "format")
	if err != nil {
		if msg, ok := readings.ParamMessage(err); ok {
			x.d.WriteError(c, http.StatusBadRequest, "invalid_parameter", msg)
		} else {
			x.errs.Fail(c, err)
		}
		return "", readings.Selection{}, false
	}
	return format, sel, true
}

func short(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// fileName is the name a download is offered under.
func fileName(format string, sel readings.Selection) string {
	return "readings-" + sel.Start.UTC().Format("20060102T150405Z") + "-" + sel.End.UTC().Format("20060102T150405Z") + "." + format
}

// stream serves GET /export/readings: the rows go from the database
// cursor to the response as they come. Until the first byte is sent a
// failure is answered in the error shape; after it, the connection is
// cut, so the client sees a broken transfer rather than a short file
// that looks whole.
func (x *Export) stream(c *gin.Context) {
	_, tenant, ok := x.caller(c)
	if !ok {
		return
	}
	format, sel, ok := x.parse(c)
	if !ok {
		return
	}
	cw := &countingWriter{w: c.Writer, first: func() {
		h := c.Writer.Header()
		h.Set("Content-Type", contentTypes[format])
		h.Set("Content-Disposition", `attachment; filename="`+fileName(format, sel)+`"`)
		h.Set("Cache-Control", "no-store")
		c.Status(http.StatusOK)
	}}
	bw := bufio.NewWriterSize(cw, 64<<10)
	rows, err := writeExport(c.Request.Context(), x.d.DB, bw, tenant, format, sel, nil)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		return
	}
	if cw.n == 0 {
		x.errs.Fail(c, fmt.Errorf("export readings: %w", err))
		return
	}
	x.d.Log.Warn("streamed export cut short", "rows", rows, "bytes", cw.n, "err", err)
	abort(c)
}

// abort cuts the connection of a response already under way.
func abort(c *gin.Context) {
	conn, _, err := http.NewResponseController(c.Writer).Hijack()
	if err == nil {
		_ = conn.Close()
		return
	}
	// HTTP/2 and test recorders cannot be hijacked; this panic makes
	// net/http reset the stream instead of ending it cleanly.
	panic(http.ErrAbortHandler)
}

// jobView is a job as the API shows it.
type jobView struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	Format     string     `json:"format"`
	Agents     []string   `json:"agentUuids"`
	Metrics    []string   `json:"metrics"`
	Start      string     `json:"start"`
	End        string     `json:"end"`
	Step       string     `json:"step"`
	Rows       int64      `json:"rows"`
	SizeBytes  int64      `json:"sizeBytes"`
	Error      string     `json:"error,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	// DownloadURL is a fresh link each time the job is read, valid until
	// LinkExpiresAt; only for a done job.
	DownloadURL   string     `json:"downloadUrl,omitempty"`
	LinkExpiresAt *time.Time `json:"linkExpiresAt,omitempty"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func (x *Export) view(j job) jobView {
	v := jobView{ID: j.ID, Status: j.Status, Format: j.Format, Rows: j.Rows, SizeBytes: j.Size, Error: j.Error,
		CreatedAt: j.CreatedAt.UTC(), StartedAt: optTime(j.StartedAt), FinishedAt: optTime(j.FinishedAt), ExpiresAt: optTime(j.ExpiresAt),
		Agents: []string{}, Metrics: []string{}, Step: "raw"}
	if q, err := url.ParseQuery(j.Params); err == nil {
		if sel, err := readings.ParseSelection(q, j.CreatedAt); err == nil {
			v.Agents, v.Metrics = append(v.Agents, sel.Agents...), append(v.Metrics, sel.Metrics...)
			v.Start, v.End = readings.FormatTime(sel.Start), readings.FormatTime(sel.End)
			if sel.Step > 0 {
				v.Step = q.Get("step")
			}
		}
	}
	if j.Status == StatusDone {
		exp := x.d.Now().Add(x.d.Settings.LinkTTL).Truncate(time.Second)
		if !j.ExpiresAt.IsZero() && j.ExpiresAt.Before(exp) {
			exp = j.ExpiresAt.Truncate(time.Second)
		}
		v.DownloadURL = "/api/v1/export/jobs/" + j.ID + "/download?token=" + url.QueryEscape(signLink(j.Secret, j.ID, exp))
		v.LinkExpiresAt = optTime(exp)
	}
	return v
}

// createJob serves POST /export/jobs: the parameters of GET
// /export/readings, in the query string, queued for the runner. The
// range is resolved now, so the job exports what was asked whenever it
// runs.
func (x *Export) createJob(c *gin.Context) {
	who, _, ok := x.caller(c)
	if !ok {
		return
	}
	format, sel, ok := x.parse(c)
	if !ok {
		return
	}
	j := job{ID: codec.NewUUID().String(), Tenant: who.TenantUUID, CreatedBy: who.UserID, Format: format,
		Params: sel.Query().Encode(), Status: StatusQueued, Secret: newSecret(), CreatedAt: x.d.Now().UTC().Truncate(time.Microsecond)}
	if err := x.s.create(c.Request.Context(), j); err != nil {
		x.errs.Fail(c, err)
		return
	}
	x.runner.notify()
	if x.d.Audit != nil {
		x.d.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: AuditJobCreated, Actor: who.UserID, ActorKind: "user", Target: j.ID,
			Detail: map[string]any{"format": format, "params": j.Params}})
	}
	c.Header("Location", "/api/v1/export/jobs/"+j.ID)
	c.JSON(http.StatusAccepted, x.view(j))
}

// jobID reads :id; a malformed one is a job that does not exist.
func (x *Export) jobID(c *gin.Context) (string, bool) {
	u, err := codec.ParseUUID(c.Param("id"))
	if err != nil {
		x.errs.Fail(c, fmt.Errorf("%w: export job %s", ErrNotFound, strconv.Quote(short(c.Param("id")))))
		return "", false
	}
	return u.String(), true
}

// getJob serves GET /export/jobs/:id; another tenant's job is not found.
func (x *Export) getJob(c *gin.Context) {
	who, _, ok := x.caller(c)
	if !ok {
		return
	}
	id, ok := x.jobID(c)
	if !ok {
		return
	}
	j, err := x.s.get(c.Request.Context(), who.TenantUUID, id)
	if err != nil {
		x.errs.Fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store") // it carries a download link
	c.JSON(http.StatusOK, x.view(j))
}

// download serves GET /export/jobs/:id/download?token=: the file, to
// whoever holds a valid link. A token that is not the job's is answered
// as a job that does not exist; a genuine link past its expiry is 410.
func (x *Export) download(c *gin.Context) {
	id, ok := x.jobID(c)
	if !ok {
		return
	}
	q := c.Request.URL.Query()
	for name := range q {
		if name != "token" {
			x.d.WriteError(c, http.StatusBadRequest, "invalid_parameter", strconv.Quote(short(name))+" is not a parameter of this endpoint; it takes token")
			return
		}
	}
	j, err := x.s.get(c.Request.Context(), "", id)
	if err != nil {
		x.errs.Fail(c, err)
		return
	}
	if _, err := verifyLink(j.Secret, j.ID, q.Get("token"), x.d.Now()); err != nil {
		if errors.Is(err, errLinkExpired) {
			x.d.WriteError(c, http.StatusGone, "link_expired", "the download link expired; GET /api/v1/export/jobs/"+j.ID+" for a new one")
			return
		}
		x.errs.Fail(c, fmt.Errorf("%w: export job %s", ErrNotFound, j.ID))
		return
	}
	if j.Status != StatusDone {
		x.d.WriteError(c, http.StatusConflict, "not_ready", "export job "+j.ID+" is "+j.Status+", not done")
		return
	}
	f, err := os.Open(x.runner.path(j))
	if errors.Is(err, os.ErrNotExist) {
		x.d.WriteError(c, http.StatusGone, "expired", "the file of export job "+j.ID+" is no longer kept")
		return
	}
	if err != nil {
		x.errs.Fail(c, fmt.Errorf("open export file: %w", err))
		return
	}
	defer f.Close()
	sel := readings.Selection{}
	if qq, err := url.ParseQuery(j.Params); err == nil {
		sel, _ = readings.ParseSelection(qq, j.CreatedAt)
	}
	h := c.Writer.Header()
	h.Set("Content-Type", contentTypes[j.Format])
	h.Set("Content-Disposition", `attachment; filename="`+fileName(j.Format, sel)+`"`)
	h.Set("Cache-Control", "no-store")
	http.ServeContent(c.Writer, c.Request, "", j.FinishedAt, f)
}
