package export

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/licence"
	"github.com/edgeplat/edgeplat/roles/api/licence/licencetest"
	"github.com/edgeplat/edgeplat/roles/api/readings"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

// t0 is the fixtures' clock: readings are written in the hour before it.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type harness struct {
	t     *testing.T
	d     *db.DB
	e     *gin.Engine
	x     *Export
	clock *apitest.Clock
	audit accountstest.AuditLog

	mu    sync.Mutex
	check func(string) error
}

// newHarness serves the export and the readings endpoints, both as
// roles/api mounts them, over a seeded database of engine; settings'
// zero fields take the defaults, with Dir a test directory.
func newHarness(t *testing.T, engine string, s Settings) *harness {
	t.Helper()
	if s.Dir == "" {
		s.Dir = t.TempDir()
	}
	h := &harness{t: t, d: apitest.SeededDB(t, engine, t0.Add(-48*time.Hour), apitest.AgentA1, apitest.AgentA2, apitest.AgentA3, apitest.AgentB1),
		clock: apitest.NewClock(t0)}
	h.useLicence(licence.FeatureExport)
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	v1 := h.e.Group("/api/v1")
	h.x = New(Deps{
		DB:         h.d,
		Caller:     accountstest.Caller,
		WriteError: apitest.WriteError,
		Feature: func(name string) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.check(name)
		},
		Audit:    h.audit.Audit,
		Settings: s,
		Log:      slog.New(slog.NewTextHandler(t.Output(), nil)),
		Now:      h.clock.Now,
	})
	h.x.Register(v1, v1)
	readings.Register(v1, readings.Deps{
		DB: h.d,
		Tenant: func(c *gin.Context) (string, bool) {
			who, ok := accountstest.Caller(c)
			if !ok {
				return "", false
			}
			k, err := tenantKey(who.TenantUUID)
			return k, err == nil
		},
		WriteError: apitest.WriteError,
		AgentRegistered: func(c *gin.Context, agents []string) (map[string]bool, error) {
			return map[string]bool{}, nil
		},
		Now: h.clock.Now,
	})
	return h
}

// useLicence makes the licence one granting features, issued and verified
// as in production.
func (h *harness) useLicence(features ...string) {
	h.t.Helper()
	m := licencetest.Manager(h.t, features...)
	h.mu.Lock()
	h.check = m.CheckFeature
	h.mu.Unlock()
}

func (h *harness) call(method, path, who string) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, "/api/v1"+path, who, nil)
}

// reading is one row of the readings table; nil value and score are
// NULL, empty texts NULL.
type reading struct {
	agent, metric string
	at            time.Time
	value, score  *float64
	quality, unit string
}

func f(v float64) *float64 { return &v }

// insert writes rows in statements of up to 500 rows, in one transaction.
func (h *harness) insert(rows []reading) {
	h.t.Helper()
	insertReadings(h.t, h.d, rows)
}

func insertReadings(t testing.TB, d *db.DB, rows []reading) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	keys := map[string]string{}
	nullStr := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	nullF := func(p *float64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	for len(rows) > 0 {
		n := min(len(rows), 500)
		var b strings.Builder
		b.WriteString(`INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, unit, quality, device_name, tenant_id, anomaly_score) VALUES `)
		args := make([]any, 0, n*9)
		for i, r := range rows[:n] {
			if i > 0 {
				b.WriteString(",")
			}
			k := len(args)
			fmt.Fprintf(&b, "($%d, $%d, $%d, $%d, 'modbus', $%d, $%d, $%d, $%d, $%d)", k+1, k+2, k+3, k+4, k+5, k+6, k+7, k+8, k+9)
			key, ok := keys[r.agent]
			if !ok {
				u, err := codec.ParseUUID(apitest.TenantOf(r.agent))
				if err != nil {
					t.Fatal(err)
				}
				key = codec.EncodeID(u)
				keys[r.agent] = key
			}
			dev, _, _ := strings.Cut(r.metric, ".")
			args = append(args, d.Dialect().TimeArg(r.at), r.agent, r.metric, nullF(r.value), nullStr(r.unit), nullStr(r.quality), dev, key, nullF(r.score))
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			t.Fatal(err)
		}
		rows = rows[n:]
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// query builds a query string.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Add(kv[i], kv[i+1])
	}
	return q.Encode()
}
