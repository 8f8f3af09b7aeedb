package anomaly

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

const (
	tenantA = "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	tenantB = "9a8b7c6d-5e4f-4321-8fed-cba987654321"
	agentA1 = "a1000000-0000-4000-8000-000000000001"
	agentA2 = "a2000000-0000-4000-8000-000000000002"
	agentB1 = "b1000000-0000-4000-8000-000000000001"
	fleetA  = "f1000000-0000-4000-8000-000000000001"
	fleetB  = "f2000000-0000-4000-8000-000000000002"
)

var callers = map[string]accounts.Caller{
	"admin-a":  {UserID: "11111111-1111-4111-8111-111111111111", TenantUUID: tenantA, Role: accounts.RoleAdmin},
	"member-a": {UserID: "22222222-2222-4222-8222-222222222222", TenantUUID: tenantA, Role: accounts.RoleMember},
	"viewer-a": {UserID: "44444444-4444-4444-8444-444444444444", TenantUUID: tenantA, Role: "viewer"},
	"admin-b":  {UserID: "33333333-3333-4333-8333-333333333333", TenantUUID: tenantB, Role: accounts.RoleAdmin},
}

type harness struct {
	t *testing.T
	d *db.DB
	e *gin.Engine
	x *Anomaly

	mu    sync.Mutex
	now   time.Time
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
	d := dbtest.Migrated(t, engine)
	h := &harness{t: t, d: d, now: time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC), live: map[string][]string{}}
	ta := d.Dialect().TimeArg(h.now)
	for _, tenant := range []string{tenantA, tenantB} {
		h.exec(`INSERT INTO tenants (uuid, name, created_at) VALUES ($1, $2, $3)`, tenant, "tenant "+tenant[:4], ta)
	}
	for _, f := range [][2]string{{fleetA, tenantA}, {fleetB, tenantB}} {
		h.exec(`INSERT INTO fleets (id, tenant_uuid, name, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)`, f[0], f[1], "fleet-"+f[0][:2], ta)
	}
	for _, a := range [][3]string{{agentA1, tenantA, fleetA}, {agentA2, tenantA, ""}, {agentB1, tenantB, fleetB}} {
		h.exec(`INSERT INTO agents (uuid, tenant_uuid, name, created_at, updated_at, fleet_id) VALUES ($1, $2, $3, $4, $4, $5)`,
			a[0], a[1], "agent-"+a[0][:2], ta, db.UUIDArg(a[2]))
	}
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	h.x = New(Deps{
		DB: d,
		Caller: func(c *gin.Context) (accounts.Caller, bool) {
			who, ok := callers[strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")]
			return who, ok
		},
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
		Now:     h.clock,
		Log:     slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	h.x.Register(h.e.Group("/api/v1"))
	if err := h.x.eval.reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) exec(q string, args ...any) {
	h.t.Helper()
	if _, err := h.d.SQL().ExecContext(h.t.Context(), q, args...); err != nil {
		h.t.Fatalf("%s: %v", q, err)
	}
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// useLicence makes the licence one granting features (none: a licence
// without correlation_rules), issued and verified as in production.
func (h *harness) useLicence(features ...string) {
	h.t.Helper()
	priv, pub, err := licence.GenerateKey()
	if err != nil {
		h.t.Fatal(err)
	}
	tok, err := licence.Issue(priv, licence.Claims{Customer: "test", Features: features, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		h.t.Fatal(err)
	}
	m := licence.New(config.Licence{Key: tok, PublicKey: string(pub)}, slog.New(slog.DiscardHandler))
	m.Load(h.t.Context())
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

// engines runs fn on PostgreSQL and SQLite.
func engines(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, engine := range []string{"postgres", "sqlite"} {
		t.Run(engine, func(t *testing.T) { fn(t, engine) })
	}
}
