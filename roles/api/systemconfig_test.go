package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	apiadmin "github.com/edgeplat/edgeplat/roles/api/admin"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/extdash/grafanatest"
	"github.com/edgeplat/edgeplat/roles/api/retention"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// firstStatus makes up to n calls and returns the number of the first
// that answered status, 0 for none.
func firstStatus(n, status int, do func() int) int {
	for i := 1; i <= n; i++ {
		if do() == status {
			return i
		}
	}
	return 0
}

// systemConfigOf returns the system config service among services.
func systemConfigOf(t *testing.T, services []lifecycle.Service) *apiadmin.SystemConfig {
	t.Helper()
	for _, s := range services {
		if sc, ok := s.(*apiadmin.SystemConfig); ok {
			return sc
		}
	}
	t.Fatal("New built no system config service")
	return nil
}

// TestSystemConfigRateLimitIntegration: a rate limit lowered through PUT
// /admin/system-config refuses with 429 sooner, without a restart; each
// of the four limits reaches the limiter it names.
func TestSystemConfigRateLimitIntegration(t *testing.T) {
	login := map[string]string{"email": "nobody@example.com", "password": "not the password"}
	tests := []struct {
		key   string
		calls func(t *testing.T, e http.Handler, tok string) func() int
	}{
		{"auth.rate_limit_global", func(t *testing.T, e http.Handler, _ string) func() int {
			return func() int { return call(t, e, "POST", "/api/v1/auth/login", "", login).status }
		}},
		{"auth.rate_limit_auth", func(t *testing.T, e http.Handler, _ string) func() int {
			return func() int { return call(t, e, "POST", "/api/v1/auth/login", "", login).status }
		}},
		{"auth.rate_limit_admin", func(t *testing.T, e http.Handler, tok string) func() int {
			return func() int { return call(t, e, "GET", "/api/v1/users", tok, nil).status }
		}},
		{"auth.rate_limit_device", func(t *testing.T, e http.Handler, tok string) func() int {
			return deviceRequests(t, e, tok)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			e, _, _ := fullRoleWith(t, dbtest.Migrated(t, "sqlite"), testLicence(t, 0), nil)
			tok := admin(t, e)
			do := tt.calls(t, e, tok)
			if n := firstStatus(6, http.StatusTooManyRequests, do); n != 0 {
				t.Fatalf("configured limit: call %d answered 429", n)
			}
			put := call(t, e, "PUT", "/api/v1/admin/system-config", tok, map[string]any{tt.key: 3})
			if put.status != http.StatusOK {
				t.Fatalf("PUT: %d %s", put.status, put.raw)
			}
			// With 3 a minute the 429 comes by the 4th call (sooner when
			// the key's earlier calls are still within the window).
			n := firstStatus(4, http.StatusTooManyRequests, do)
			if n == 0 {
				t.Errorf("%s=3: no 429 in 4 calls", tt.key)
			}
			t.Logf("%s=3: first 429 at call %d after the PUT", tt.key, n)
		})
	}
}

// TestSystemConfigLogLevelIntegration: log.level set to debug makes the
// role's debug logs appear at once, and back at info they stop; the
// level is the process's (rt.Runtime.Level), as cmd builds it.
func TestSystemConfigLogLevelIntegration(t *testing.T) {
	var out coretest.SyncBuffer
	level := new(slog.LevelVar)
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level})),
		Metrics: metrics.NewRegistry(), Health: health.New(time.Second), Level: level}
	e, _, _, _ := roleServicesOn(t, dbtest.Migrated(t, "sqlite"), nil, r, testLicence(t, 0), nil)
	tok := admin(t, e)
	refused := func() {
		if got := call(t, e, "GET", "/api/v1/users", "not-a-token", nil).status; got != http.StatusUnauthorized {
			t.Fatalf("bad token: %d", got)
		}
	}
	const debugLine = `level=DEBUG msg="token refused"`
	refused()
	if strings.Contains(out.String(), debugLine) {
		t.Fatal("debug line at the configured level info")
	}
	for _, c := range []struct {
		level string
		want  bool
	}{{"debug", true}, {"info", false}} {
		if put := call(t, e, "PUT", "/api/v1/admin/system-config", tok, map[string]any{"log.level": c.level}); put.status != http.StatusOK {
			t.Fatalf("PUT: %d %s", put.status, put.raw)
		}
		before := strings.Count(out.String(), debugLine)
		refused()
		if got := strings.Count(out.String(), debugLine) > before; got != c.want {
			t.Errorf("log.level %s: debug line written %v, want %v", c.level, got, c.want)
		}
	}
}

// TestSystemConfigDedupTTLIntegration: api.dedup_ttl changed at run time
// is the TTL of the msgId keys the pipeline sets in Redis from then on.
func TestSystemConfigDedupTTLIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	store, rdb := redisTestStore(t)
	tenant, agent := randomID(t), randomID(t)
	ctx := context.Background()
	defer store.Delete(ctx, telemetry.IngestionStream(tenant))
	defer deleteMatching(t, rdb, "tenant:"+tenant+":agent:*")
	e, _, pipe, _ := roleServicesOn(t, dbtest.Migrated(t, "sqlite"), store, nil, testLicence(t, 0), func(c *config.Config) {
		c.API.DedupMode = config.DedupModeKey
	})
	tok := admin(t, e)
	send := func(seq int) time.Duration {
		t.Helper()
		raw, err := codec.Encode(envelopeFor(seq, 1), codec.EncodeOptions{Format: codec.FormatJSON})
		if err != nil {
			t.Fatal(err)
		}
		if err := pipe.handle(ctx, mqttx.Message{Topic: "i/" + tenant + "/a/" + agent + "/endpoints/modbus", Payload: raw}); err != nil {
			t.Fatal(err)
		}
		key := "tenant:" + tenant + ":agent:" + agent + ":msgid:" + envelopeFor(seq, 1)["msgId"].(string)
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return ttl
	}
	if ttl := send(1); ttl <= 90*time.Second {
		t.Fatalf("configured TTL: key TTL %s, want about the default 24h", ttl)
	}
	if put := call(t, e, "PUT", "/api/v1/admin/system-config", tok, map[string]any{"api.dedup_ttl": "90s"}); put.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", put.status, put.raw)
	}
	ttl := send(2)
	if ttl <= 0 || ttl > 90*time.Second {
		t.Errorf("api.dedup_ttl=90s: key TTL %s", ttl)
	}
	t.Logf("key TTL after api.dedup_ttl=90s: %s", ttl)
}

// TestSystemConfigStoredAtStartIntegration: settings stored before the
// role starts are in effect once its system config service started, over
// the configured values.
func TestSystemConfigStoredAtStartIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "sqlite")
	if _, err := d.SQL().ExecContext(t.Context(), `INSERT INTO system_config (key, value, updated_at, updated_by) VALUES ('auth.rate_limit_global', '2', 0, 'test')`); err != nil {
		t.Fatal(err)
	}
	e, _, _, services := roleServicesOn(t, d, nil, nil, testLicence(t, 0), nil)
	login := func() int {
		return call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "x@example.com", "password": "wrong password"}).status
	}
	if err := systemConfigOf(t, services).Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := firstStatus(3, http.StatusTooManyRequests, login); n != 3 {
		t.Errorf("stored auth.rate_limit_global=2: first 429 at call %d, want 3", n)
	}
}

// TestGrafanaSettings: with api.grafana_url (GRAFANA_URL) the external
// dashboards routes call that Grafana with api.grafana_token
// (GRAFANA_TOKEN) as the bearer token; a wrong token is Grafana's 401,
// answered 502; without a URL they answer 503. The Grafana is
// grafanatest's scripted server: Grafana cannot run here.
func TestGrafanaSettings(t *testing.T) {
	g := grafanatest.New(t, "glsa_effect_token")
	for _, c := range []struct {
		url, token string
		want       int
	}{
		{"", "", http.StatusServiceUnavailable},
		{g.URL, "glsa_effect_token", http.StatusOK},
		{g.URL, "glsa_other", http.StatusBadGateway},
	} {
		e, _, _ := fullRoleWith(t, dbtest.Migrated(t, "sqlite"), testLicence(t, 0), func(cfg *config.Config) {
			cfg.API.GrafanaURL, cfg.API.GrafanaToken = c.url, config.Secret(c.token)
		})
		tok := admin(t, e)
		n := len(g.Requests())
		r := call(t, e, "GET", "/api/v1/external-dashboards/dashboards", tok, nil)
		if r.status != c.want {
			t.Errorf("GrafanaURL %q token %q: %d %s, want %d", c.url, c.token, r.status, r.raw, c.want)
		}
		if called := len(g.Requests()) > n; called != (c.url != "") {
			t.Errorf("GrafanaURL %q: Grafana called %v", c.url, called)
		}
		if c.url != "" && g.LastHeader().Get("Authorization") != "Bearer "+c.token {
			t.Errorf("Authorization %q, want the token", g.LastHeader().Get("Authorization"))
		}
	}
}

// TestSystemConfigOtherReplicaIntegration: a PUT on one replica is in
// effect on another replica of the same database after that one's next
// refresh, which its poll (every admin.DefaultRefreshEvery) makes.
func TestSystemConfigOtherReplicaIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "sqlite")
	a, _, _ := fullRoleWith(t, d, testLicence(t, 0), nil)
	b, _, _, bServices := roleServicesOn(t, d, nil, nil, testLicence(t, 0), nil)
	tok := admin(t, a)
	login := func() int {
		return call(t, b, "POST", "/api/v1/auth/login", "", map[string]string{"email": "x@example.com", "password": "wrong password"}).status
	}
	if n := firstStatus(4, http.StatusTooManyRequests, login); n != 0 {
		t.Fatalf("replica b at the configured limit: 429 at call %d", n)
	}
	if put := call(t, a, "PUT", "/api/v1/admin/system-config", tok, map[string]any{"auth.rate_limit_global": 2}); put.status != http.StatusOK {
		t.Fatalf("PUT on a: %d %s", put.status, put.raw)
	}
	if err := systemConfigOf(t, bServices).Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := firstStatus(3, http.StatusTooManyRequests, login); n == 0 {
		t.Error("replica b after its refresh: no 429 in 3 calls with auth.rate_limit_global=2")
	}
}

// TestSystemConfigEventsRetentionIntegration: api.events_retention
// changed through PUT /admin/system-config reaches the event log's pruner
// without a restart: a three-day-old audit record the default keeps goes
// at the next round once the retention is two days.
func TestSystemConfigEventsRetentionIntegration(t *testing.T) {
	now := time.Now().UTC()
	d := apitest.SeededDB(t, "sqlite", now)
	if err := accounts.NewStore(d).Record(t.Context(), accounts.Event{Tenant: apitest.TenantA, At: now.Add(-72 * time.Hour), Kind: "agent.status"}); err != nil {
		t.Fatal(err)
	}
	e, _, _, svcs := roleServices(t, d, testLicence(t, 0), nil)
	p := prunerOf(t, svcs)
	count := func() int {
		t.Helper()
		if _, err := p.Prune(t.Context()); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := d.SQL().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM audit_events WHERE at < $1`, d.Dialect().TimeArg(now.Add(-48*time.Hour))).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 1 {
		t.Fatalf("default retention: %d three-day-old records left, want 1", n)
	}
	tok := admin(t, e)
	bad := call(t, e, "PUT", "/api/v1/admin/system-config", tok, map[string]any{"api.events_retention": "30m"})
	if bad.status != http.StatusBadRequest || !strings.Contains(string(bad.raw), "api.events_retention") {
		t.Fatalf("PUT 30m: %d %s, want 400 naming api.events_retention", bad.status, bad.raw)
	}
	if put := call(t, e, "PUT", "/api/v1/admin/system-config", tok, map[string]any{"api.events_retention": "2d"}); put.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", put.status, put.raw)
	}
	if p.Retention() != 48*time.Hour {
		t.Fatalf("pruner retention %s after PUT 2d, want 48h", p.Retention())
	}
	if n := count(); n != 0 {
		t.Errorf("retention 2d: %d three-day-old records left, want 0", n)
	}
}

// TestSystemConfigReadingsRetentionIntegration: the readings' and the
// rollups' retentions changed through PUT /admin/system-config reach the
// readings maintenance and the rollup worker without a restart: a
// three-day-old reading the default keeps goes at the next round once the
// retention is two days; bounds below a day are refused naming the key,
// and null puts the configured value back.
func TestSystemConfigReadingsRetentionIntegration(t *testing.T) {
	now := time.Now().UTC()
	d := apitest.SeededDB(t, "sqlite", now, apitest.AgentA1)
	for _, at := range []time.Time{now.Add(-72 * time.Hour), now.Add(-time.Hour)} {
		apitest.Exec(t, d, `INSERT INTO readings (time, agent_uuid, metric_name, value, tenant_id) VALUES ($1, $2, 'boiler.temp', 1, $3)`,
			d.Dialect().TimeArg(at), apitest.AgentA1, apitest.TenantA)
	}
	e, _, _, svcs := roleServices(t, d, testLicence(t, 0), nil)
	m := maintainerOf(t, svcs)
	var roll *rollup.Worker
	for _, s := range svcs {
		if w, ok := s.(*rollup.Worker); ok {
			roll = w
		}
	}
	if roll == nil {
		t.Fatal("no rollup worker among the role's services")
	}
	count := func() int {
		t.Helper()
		if _, err := m.Maintain(t.Context()); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := d.SQL().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM readings`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 2 {
		t.Fatalf("default retention: %d readings left of a 72 h and a 1 h old one, want 2", n)
	}
	tok := admin(t, e)
	for _, key := range []string{"api.readings_retention", "api.rollup_hourly_retention", "api.rollup_daily_retention"} {
		bad := call(t, e, "PUT", "/api/v1/admin/system-config", tok, map[string]any{key: "12h"})
		if bad.status != http.StatusBadRequest || !strings.Contains(string(bad.raw), key) {
			t.Fatalf("PUT %s 12h: %d %s, want 400 naming the key", key, bad.status, bad.raw)
		}
	}
	if m.Retention() != retention.DefaultRetention {
		t.Fatalf("a refused PUT changed the readings retention to %s", m.Retention())
	}
	put := call(t, e, "PUT", "/api/v1/admin/system-config", tok, map[string]any{"api.readings_retention": "2d",
		"api.rollup_hourly_retention": "30d", "api.rollup_daily_retention": "3650d"})
	if put.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", put.status, put.raw)
	}
	if m.Retention() != 48*time.Hour {
		t.Fatalf("readings retention %s after PUT 2d, want 48h", m.Retention())
	}
	if h, dd := roll.Retentions(); h != 30*24*time.Hour || dd != 3650*24*time.Hour {
		t.Fatalf("rollup retentions %s, %s after PUT 30d, 3650d", h, dd)
	}
	if n := count(); n != 1 {
		t.Errorf("retention 2d: %d readings left, want only the 1 h old one", n)
	}
	if put := call(t, e, "PUT", "/api/v1/admin/system-config", tok, map[string]any{"api.rollup_daily_retention": nil}); put.status != http.StatusOK {
		t.Fatalf("PUT null: %d %s", put.status, put.raw)
	}
	if _, dd := roll.Retentions(); dd != rollup.DefaultDailyRetention {
		t.Errorf("daily rollup retention %s after null, want the configured %s", dd, time.Duration(rollup.DefaultDailyRetention))
	}
}
