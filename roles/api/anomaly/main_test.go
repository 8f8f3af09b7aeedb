package anomaly

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/licence/licencetest"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

type harness struct {
	t *testing.T
	d *db.DB
	e *gin.Engine
	x *Anomaly

	// now is the instant the clock stands at.
	now time.Time

	mu    sync.Mutex
	mails []string
	live  map[string][]string
	check func(string) error
}

type recordingPublisher struct{ h *harness }

func (p recordingPublisher) Publish(_ context.Context, channel string, payload []byte) error {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	p.h.live[channel] = append(p.h.live[channel], string(payload))
	return nil
}

type recordingMailer struct{ h *harness }

func (m recordingMailer) Send(_ context.Context, to, subject, _ string) error {
	m.h.mu.Lock()
	defer m.h.mu.Unlock()
	m.h.mails = append(m.h.mails, to+": "+subject)
	return nil
}

func newHarness(t *testing.T, engine string) *harness {
	t.Helper()
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	d := apitest.SeededDB(t, engine, now, apitest.AgentA1, apitest.AgentA2, apitest.AgentB1)
	h := &harness{t: t, d: d, now: now, live: map[string][]string{}}
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	h.x = New(Deps{
		DB:         d,
		Caller:     accountstest.Caller,
		WriteError: apitest.WriteError,
		Feature: func(name string) error {
			h.mu.Lock()
			check := h.check
			h.mu.Unlock()
			if check == nil {
				return nil
			}
			return check(name)
		},
		Mailer:  recordingMailer{h},
		Streams: recordingPublisher{h},
		Now:     apitest.NewClock(now).Now,
		Log:     slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	h.x.Register(h.e.Group("/api/v1"))
	if err := h.x.eval.reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	return h
}

// useLicence makes the licence one granting features (none: a licence
// without correlation_rules), issued and verified as in production.
func (h *harness) useLicence(features ...string) {
	h.t.Helper()
	m := licencetest.Manager(h.t, features...)
	h.mu.Lock()
	h.check = m.CheckFeature
	h.mu.Unlock()
}

func (h *harness) call(method, path, who string, body any) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, "/api/v1"+path, who, body)
}

// feed runs readings of one device through the evaluator as the pipeline
// would hand them over, synchronously: values[i] at start + i*step.
func (h *harness) feed(tenant, agent, device, reading string, start time.Time, step time.Duration, values ...float64) {
	h.t.Helper()
	tu, _ := codec.ParseUUID(tenant)
	m := telemetry.Message{AgentUUID: agent, DeviceName: device}
	for i, v := range values {
		m.Readings = append(m.Readings, telemetry.Reading{Name: reading, Value: &v, Timestamp: telemetry.TimestampOf(start.Add(time.Duration(i) * step))})
	}
	h.x.eval.process(h.t.Context(), batch{tenantKey: codec.EncodeID(tu), msgs: []telemetry.Message{m}})
}

// reload makes the evaluator read the rules as a write's nudge would.
func (h *harness) reload() {
	h.t.Helper()
	if err := h.x.eval.reload(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
}
