package export

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/licence"
	"github.com/edgeplat/edgeplat/roles/api/readings"
)

// Deps is what the export needs from the role.
type Deps struct {
	DB *db.DB
	// Caller is the request's authenticated user; the tenant comes from
	// it, never from the request.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Feature reports whether the licence grants a feature (nil when it
	// does): licence.Manager.CheckFeature. Every route needs "export".
	Feature func(name string) error
	// Audit records the creation of a job; nil records nothing.
	Audit    func(*gin.Context, accounts.Event)
	Settings Settings
	// PollEvery is how often the runner looks for queued jobs (created
	// on another replica) and expired files; 5 s when zero.
	PollEvery time.Duration
	Log       *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// AuditJobCreated is the audit event kind of POST /export/jobs.
const AuditJobCreated = "export_job.created"

// Export is the export capability: its routes and its job runner.
type Export struct {
	d      Deps
	s      *store
	runner *runner
	errs   *httpx.ErrorMap
}

// New builds the export without I/O.
func New(d Deps) *Export {
	if d.DB == nil || d.Caller == nil || d.WriteError == nil || d.Feature == nil {
		panic("BUG: export.New needs DB, Caller, WriteError and Feature")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.PollEvery <= 0 {
		d.PollEvery = 5 * time.Second
	}
	d.Settings = d.Settings.withDefaults()
	x := &Export{d: d, s: &store{db: d.DB}}
	x.runner = &runner{x: x, wake: make(chan struct{}, 1)}
	x.errs = httpx.NewErrorMap(d.WriteError, d.Log, "export request failed",
		httpx.Case(http.StatusNotFound, "not_found", ErrNotFound))
	return x
}

// Service is the job runner, a service of the role.
func (x *Export) Service() lifecycle.Service { return x.runner }

// tenantKey is the tenant as the readings table stores it.
func tenantKey(tenantUUID string) (string, error) {
	u, err := codec.ParseUUID(tenantUUID)
	if err != nil {
		return "", fmt.Errorf("tenant %q: %w", tenantUUID, err)
	}
	return codec.EncodeID(u), nil
}

// countingWriter counts the bytes written through it, and whether any
// were: until then a failed export can still be answered with an error.
type countingWriter struct {
	w io.Writer
	n int64
	// first runs before the first byte goes out.
	first func()
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.n == 0 && c.first != nil && len(p) > 0 {
		c.first()
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeExport writes the tenant's rows of sel as format to w, calling
// progress every progressRows rows, and returns the rows written.
func writeExport(ctx context.Context, d *db.DB, w io.Writer, tenant, format string, sel readings.Selection,
	progress func(rows int64) error) (int64, error) {
	enc, err := newEncoder(format, w, sel.Step > 0)
	if err != nil {
		return 0, err
	}
	var n int64
	err = readings.ScanSelection(ctx, d, tenant, sel, func(r *readings.Row) error {
		if err := enc.write(r); err != nil {
			return err
		}
		n++
		if progress != nil && n%progressRows == 0 {
			return progress(n)
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, enc.close()
}

// progressRows is how often a job reports progress (and its heartbeat).
const progressRows = 50_000

// gate answers 403 licence_feature_missing unless the licence grants the
// export.
func (x *Export) gate(c *gin.Context) {
	if err := x.d.Feature(licence.FeatureExport); err != nil {
		licence.WriteError(c, x.d.WriteError, err)
		return
	}
	c.Next()
}
