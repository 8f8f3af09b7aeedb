package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/spool"
	memstore "github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// applied records what a SystemConfig applied, as the role's Apply would
// put it into effect.
type applied struct {
	mu  sync.Mutex
	all []Settings
}

func (a *applied) apply(s Settings) {
	a.mu.Lock()
	a.all = append(a.all, s)
	a.mu.Unlock()
}

func (a *applied) last() (Settings, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.all) == 0 {
		return Settings{}, 0
	}
	return a.all[len(a.all)-1], len(a.all)
}

var base = Settings{RateLimitGlobal: 1000, RateLimitAuth: 10, RateLimitDevice: 10000, RateLimitAdmin: 100, LogLevel: "info", DedupTTL: 24 * time.Hour}

type harness struct {
	t     *testing.T
	d     *db.DB
	e     *gin.Engine
	sc    *SystemConfig
	got   *applied
	audit accountstest.AuditLog
}

func newHarness(t *testing.T, engine string, probes func(*Probes)) *harness {
	t.Helper()
	h := &harness{t: t, d: apitest.SeededDB(t, engine, time.Now()), got: &applied{}}
	h.sc = NewSystemConfig(SystemConfigOptions{Base: base, DB: h.d, Apply: h.got.apply})
	if err := h.sc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	streams, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { streams.Close() })
	p := Probes{DB: h.d, Streams: streams}
	if probes != nil {
		probes(&p)
	}
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	Register(h.e.Group("/api/v1"), Deps{Config: h.sc, Health: p, Caller: accountstest.Caller, WriteError: apitest.WriteError,
		Audit: h.audit.Audit, Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	return h
}

func (h *harness) call(method, path, who string, body any) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, "/api/v1"+path, who, body)
}

// entry returns key's entry of a system config answer.
func entry(t *testing.T, r apitest.Reply, key string) map[string]any {
	t.Helper()
	for _, e := range r.List("settings") {
		if m, _ := e.(map[string]any); m["key"] == key {
			return m
		}
	}
	t.Fatalf("no %s in %s", key, r.Raw)
	return nil
}

// TestSystemConfigRoutesIntegration: admins read and change the settings;
// a change is validated whole, stored, applied, audited with its old and
// new values, and a null puts the configured value back.
func TestSystemConfigRoutesIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine, nil)
		if s, n := h.got.last(); n != 1 || s != base {
			t.Fatalf("Start applied %d times, last %+v; want once, the configured values", n, s)
		}
		for _, who := range []string{"member-a", "viewer-a"} {
			h.call("GET", "/admin/system-config", who, nil).ExpectError(t, http.StatusForbidden, "forbidden")
			h.call("PUT", "/admin/system-config", who, map[string]any{"log.level": "debug"}).ExpectError(t, http.StatusForbidden, "forbidden")
			h.call("GET", "/admin/health", who, nil).ExpectError(t, http.StatusForbidden, "forbidden")
		}
		h.call("GET", "/admin/system-config", "", nil).ExpectError(t, http.StatusUnauthorized, "unauthorized")

		r := h.call("GET", "/admin/system-config", "admin-a", nil).Expect(t, "get", http.StatusOK)
		if got := len(r.List("settings")); got != len(Keys()) {
			t.Fatalf("%d settings, want %d: %s", got, len(Keys()), r.Raw)
		}
		if e := entry(t, r, "auth.rate_limit_global"); e["value"] != 1000.0 || e["source"] != "config" || e["configured"] != 1000.0 {
			t.Errorf("before any PUT: %v", e)
		}

		// Refused whole: one bad value keeps the good one out too.
		for _, c := range []struct {
			body any
			key  string
		}{
			{map[string]any{"auth.rate_limit_global": 3, "log.level": "loud"}, "log.level"},
			{map[string]any{"auth.rate_limit_admin": -1}, "auth.rate_limit_admin"},
			{map[string]any{"auth.rate_limit_admin": 1.5}, "auth.rate_limit_admin"},
			{map[string]any{"api.dedup_ttl": "0s"}, "api.dedup_ttl"},
			{map[string]any{"api.dedup_ttl": 90}, "api.dedup_ttl"},
			{map[string]any{"db.host": "elsewhere"}, "db.host"},
			{map[string]any{}, "log.level"}, // the message lists the settings
			{`["log.level"]`, "body"},
		} {
			r := h.call("PUT", "/admin/system-config", "admin-a", c.body)
			r.ExpectError(t, http.StatusBadRequest, "invalid_body")
			if msg := r.Str("error", "message"); !strings.Contains(msg, c.key) {
				t.Errorf("PUT %v: message %q does not name %s", c.body, msg, c.key)
			}
		}
		if _, n := h.got.last(); n != 1 {
			t.Errorf("refused PUTs applied settings (%d applies)", n)
		}

		r = h.call("PUT", "/admin/system-config", "admin-a", map[string]any{"auth.rate_limit_global": 3, "log.level": "WARNING", "api.dedup_ttl": "7d"}).
			Expect(t, "put", http.StatusOK)
		want := base
		want.RateLimitGlobal, want.LogLevel, want.DedupTTL = 3, "warn", 7*24*time.Hour
		if s, _ := h.got.last(); s != want {
			t.Errorf("applied %+v, want %+v", s, want)
		}
		e := entry(t, r, "log.level")
		if e["value"] != "warn" || e["source"] != "stored" || e["configured"] != "info" || e["updatedBy"] != accountstest.Callers["admin-a"].UserID || e["updatedAt"] == nil {
			t.Errorf("log.level after PUT: %v", e)
		}
		if e := entry(t, r, "api.dedup_ttl"); e["value"] != "7d" {
			t.Errorf("api.dedup_ttl after PUT: %v", e)
		}
		if got := h.audit.Kinds(); !slices.Equal(got, []string{AuditUpdated}) {
			t.Errorf("audit %v, want one %s", got, AuditUpdated)
		}

		// null resets to the configured value; the audit says old and new.
		var events []accounts.Event
		h.e = withAuditCapture(h, &events)
		h.call("PUT", "/admin/system-config", "admin-a", `{"log.level": null}`).Expect(t, "reset", http.StatusOK)
		if s, _ := h.got.last(); s.LogLevel != "info" || s.RateLimitGlobal != 3 {
			t.Errorf("after reset: %+v, want log level info and the global limit kept", s)
		}
		if len(events) != 1 {
			t.Fatalf("audit events %v", events)
		}
		ch, _ := json.Marshal(events[0].Detail["changes"])
		if string(ch) != `{"log.level":{"new":"info","old":"warn"}}` || events[0].Tenant != apitest.TenantA || events[0].Target != "system-config" {
			t.Errorf("audit event %+v, changes %s", events[0], ch)
		}
		r = h.call("GET", "/admin/system-config", "admin-b", nil).Expect(t, "get by another tenant's admin", http.StatusOK)
		if e := entry(t, r, "log.level"); e["source"] != "config" || e["value"] != "info" {
			t.Errorf("log.level after reset: %v", e)
		}
	})
}

// withAuditCapture rebuilds h's engine with an audit that keeps events in
// *events.
func withAuditCapture(h *harness, events *[]accounts.Event) *gin.Engine {
	e := httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	streams, err := memstore.New(memstore.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { streams.Close() })
	Register(e.Group("/api/v1"), Deps{Config: h.sc, Health: Probes{DB: h.d, Streams: streams}, Caller: accountstest.Caller,
		WriteError: apitest.WriteError, Audit: func(_ *gin.Context, ev accounts.Event) { *events = append(*events, ev) }})
	return e
}

// TestSystemConfigReplicasIntegration: a second replica on the same
// database applies what the first stored: at start, on a read, and by
// itself on its next refresh; a stored value its key refuses is skipped.
func TestSystemConfigReplicasIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		d := apitest.SeededDB(t, engine, time.Now())
		apitest.Exec(t, d, `INSERT INTO system_config (key, value, updated_at, updated_by) VALUES ($1, $2, $3, $4), ($5, $6, $3, $4), ($7, $8, $3, $4)`,
			"auth.rate_limit_device", "5", d.Dialect().TimeArg(time.Now()), "u1",
			"log.level", `"shouting"`, // another version's value: skipped
			"retired.key", "1")
		a, b := &applied{}, &applied{}
		ra := NewSystemConfig(SystemConfigOptions{Base: base, DB: d, Apply: a.apply})
		rb := NewSystemConfig(SystemConfigOptions{Base: base, DB: d, Apply: b.apply, RefreshEvery: 20 * time.Millisecond})
		for _, r := range []*SystemConfig{ra, rb} {
			if err := r.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		want := base
		want.RateLimitDevice = 5
		if s, _ := b.last(); s != want {
			t.Fatalf("at start: %+v, want the stored device limit over the configured values", s)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- rb.Run(ctx) }()
		defer func() { cancel(); <-done }()

		changes, err := DecodeChanges([]byte(`{"auth.rate_limit_device": 0, "log.level": "debug"}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ra.Put(t.Context(), changes, "u2", time.Now()); err != nil {
			t.Fatal(err)
		}
		want.RateLimitDevice, want.LogLevel = 0, "debug"
		coretest.Eventually(t, 10*time.Second, "the other replica to apply the change", func() bool {
			s, _ := b.last()
			return s == want
		})
		if s := ra.Current(); s != want {
			t.Errorf("replica that took the PUT: %+v, want %+v", s, want)
		}
	})
}

// TestDecodeChanges: the PUT body decoder's refusals name the key.
func TestDecodeChanges(t *testing.T) {
	tests := []struct {
		body    string
		keys    []string
		wantErr string
	}{
		{body: `{"log.level":"debug","auth.rate_limit_auth":3}`, keys: []string{"auth.rate_limit_auth", "log.level"}},
		{body: `{"api.dedup_ttl":null}`, keys: []string{"api.dedup_ttl"}},
		{body: `{"log.leve":"debug"}`, wantErr: `"log.leve" is not a setting`},
		{body: `{}`, wantErr: "names no setting"},
		{body: `null`, wantErr: "JSON object"},
		{body: `[]`, wantErr: "body"},
		{body: `{"log.level":"debug"} {}`, wantErr: "after the JSON document"},
	}
	for _, tt := range tests {
		got, err := DecodeChanges([]byte(tt.body))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err %v, want one saying %q", tt.body, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.body, err)
			continue
		}
		var keys []string
		for _, c := range got {
			keys = append(keys, c.Key)
		}
		if !slices.Equal(keys, tt.keys) {
			t.Errorf("%s: keys %v, want %v", tt.body, keys, tt.keys)
		}
	}
}

// TestFromConfig: the configured values are read from the config keys the
// settings are named after.
func TestFromConfig(t *testing.T) {
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Log.Level = "WARNING"
	s := FromConfig(cfg)
	if s.LogLevel != "warn" || s.RateLimitGlobal != cfg.Auth.RateLimitGlobal || s.DedupTTL != cfg.API.DedupTTL || s.SlogLevel() != slog.LevelWarn {
		t.Errorf("FromConfig = %+v", s)
	}
}

// TestAdminHealthIntegration: one answer with every part, 200 even when
// parts are down, with the ingestion consumer group's backlog summed over
// the tenants' streams.
func TestAdminHealthIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		var streams *memstore.Store
		h := newHarness(t, engine, func(p *Probes) {
			streams = p.Streams.(*memstore.Store)
			client, err := mqttx.New(mqttx.Options{BrokerURL: "tcp://127.0.0.1:1", ClientID: "admin-health-test"})
			if err != nil {
				t.Fatal(err)
			}
			p.Broker = client.Stats // never started: stopped, so down
			p.Spool = func() (spool.Stats, bool) { return spool.Stats{}, false }
			p.Breaker = func() string { return "closed" }
			exp := time.Now().Add(48 * time.Hour)
			p.Licence = func() licence.Status {
				return licence.Status{State: licence.StateValid, MaxAgents: 5, ExpiresAt: &exp}
			}
		})
		ctx := t.Context()
		// Tenant A: 5 entries, 3 delivered of which 1 acknowledged. Tenant
		// B: 2 entries and no consumer group yet.
		sa, sb := telemetry.IngestionStream("tenantA"), telemetry.IngestionStream("tenantB")
		for i := range 5 {
			if _, err := streams.Add(ctx, sa, map[string]string{"i": string(rune('0' + i))}, 0); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if _, err := streams.Add(ctx, sb, map[string]string{"i": "x"}, 0); err != nil {
				t.Fatal(err)
			}
		}
		g := telemetry.WriterGroup("tenantA")
		if err := streams.EnsureGroup(ctx, sa, g, "0"); err != nil {
			t.Fatal(err)
		}
		es, err := streams.ReadGroup(ctx, sa, g, "w1", 3, 0)
		if err != nil || len(es) != 3 {
			t.Fatalf("read group: %v %v", es, err)
		}
		if _, err := streams.Ack(ctx, sa, g, es[0].ID); err != nil {
			t.Fatal(err)
		}

		t0 := time.Now()
		r := h.call("GET", "/admin/health", "admin-a", nil).Expect(t, "health", http.StatusOK)
		t.Logf("health answered in %s: %s", time.Since(t0), r.Raw)
		part := func(name string) map[string]any { m, _ := r.Body[name].(map[string]any); return m }
		if r.Body["status"] != "degraded" {
			t.Errorf("status %v with the broker down, want degraded", r.Body["status"])
		}
		for name, want := range map[string]string{"database": "up", "streamStore": "up", "broker": "down", "spool": "disabled", "ingestLag": "up", "licence": "up"} {
			if got := part(name)["status"]; got != want {
				t.Errorf("%s status %v, want %s (%v)", name, got, want, part(name))
			}
		}
		if part("database")["engine"] != engine || part("broker")["state"] != "stopped" || part("streamStore")["circuitBreaker"] != "closed" {
			t.Errorf("figures: database %v broker %v", part("database"), part("broker"))
		}
		lag := part("ingestLag")
		for k, want := range map[string]float64{"streams": 2, "length": 7, "pending": 2, "undelivered": 4, "streamsWithoutConsumers": 1} {
			if lag[k] != want {
				t.Errorf("ingestLag %s = %v, want %g (%v)", k, lag[k], want, lag)
			}
		}
		if age, _ := lag["oldestUnwrittenAgeSeconds"].(float64); age < 0 {
			t.Errorf("oldest age %v", lag["oldestUnwrittenAgeSeconds"])
		}
		if lic := part("licence"); lic["maxAgents"] != 5.0 || lic["expiresAt"] == nil {
			t.Errorf("licence %v", lic)
		}
	})
}
