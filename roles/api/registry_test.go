package api

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	memstore "github.com/edgeplat/edgeplat/core/streamstore/memory"
	apibrokerauth "github.com/edgeplat/edgeplat/roles/api/brokerauth"
	"github.com/edgeplat/edgeplat/roles/api/licence"
	"github.com/edgeplat/edgeplat/roles/api/licence/licencetest"
)

// testLicence issues a licence for maxAgents (0: unlimited) with its own
// key pair and returns the config that loads it.
func testLicence(t *testing.T, maxAgents int) config.Licence {
	t.Helper()
	return licencetest.Config(t, licence.Claims{MaxAgents: maxAgents, ExpiresAt: time.Now().Add(24 * time.Hour),
		Features: []string{licence.FeatureExport}})
}

// admin bootstraps the installation and returns the admin's access token.
func admin(t *testing.T, e http.Handler) string {
	t.Helper()
	r := call(t, e, "POST", "/api/v1/auth/bootstrap-admin", "", map[string]string{"email": "admin@example.com", "password": "correct horse battery"})
	if r.status != http.StatusCreated {
		t.Fatalf("bootstrap: %d %s", r.status, r.raw)
	}
	l := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "admin@example.com", "password": "correct horse battery"})
	if l.status != http.StatusOK {
		t.Fatalf("login: %d %s", l.status, l.raw)
	}
	return l.str("accessToken")
}

func provisioningKey(t *testing.T, e http.Handler, tok string) string {
	t.Helper()
	r := call(t, e, "POST", "/api/v1/provisioning/keys", tok, nil)
	if r.status != http.StatusCreated || !strings.HasPrefix(r.str("key"), "pk_") {
		t.Fatalf("create provisioning key: %d %s", r.status, r.raw)
	}
	exp, err := time.Parse(time.RFC3339Nano, r.str("expiresAt"))
	if err != nil || exp.Before(time.Now().Add(23*time.Hour)) || exp.After(time.Now().Add(25*time.Hour)) {
		t.Fatalf("an empty body should give a key valid 24 h, got expiresAt %q", r.str("expiresAt"))
	}
	return r.str("key")
}

func TestProvisioningFlowIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, acc := accessEngine(t, d, testTokens(t), testLicence(t, 0))
		tok := admin(t, e)
		key := provisioningKey(t, e, tok)

		reg := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": key, "agentName": "press-7"})
		if reg.status != http.StatusCreated {
			t.Fatalf("register: %d %s", reg.status, reg.raw)
		}
		apiKey, agent, password := reg.str("apiKey"), reg.str("agentUuid"), reg.str("mqtt", "password")
		if !strings.HasPrefix(apiKey, "dk2_") || reg.str("mqtt", "username") != apiKey || reg.str("mqtt", "clientId") != "agent-"+agent ||
			password == "" || reg.str("mqtt", "brokerUrl") == "" || reg.str("tenantId") == "" {
			t.Fatalf("registration answer: %s", reg.raw)
		}
		// Single use: the same key again, and through the other path.
		for _, path := range []string{"/api/v1/provision/agent", "/api/v1/provisioning/register"} {
			if r := call(t, e, "POST", path, "", map[string]string{"key": key, "agentName": "press-8"}); r.status != http.StatusUnauthorized ||
				r.str("error", "code") != "provisioning_key_refused" {
				t.Fatalf("second use of a key at %s: %d %s", path, r.status, r.raw)
			}
		}
		// Unknown and malformed keys are refused alike.
		for _, k := range []string{"pk_AAAAAAAA_" + strings.Repeat("B", 40), "garbage"} {
			if r := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": k, "agentName": "x"}); r.status != http.StatusUnauthorized ||
				r.str("error", "code") != "provisioning_key_refused" {
				t.Fatalf("key %q: %d %s", k, r.status, r.raw)
			}
		}
		if r := call(t, e, "GET", "/api/v1/agents/"+agent, tok, nil); r.status != http.StatusOK || r.str("name") != "press-7" {
			t.Fatalf("get agent: %d %s", r.status, r.raw)
		}

		// The device credentials are what the broker checks.
		ctx := t.Context()
		id, err := acc.agents.AuthenticateDevice(ctx, apiKey, password)
		if err != nil || id.AgentUUID != agent {
			t.Fatalf("device credentials refused: %+v %v", id, err)
		}
		if _, err := acc.agents.AuthenticateDevice(ctx, apiKey, password+"x"); !errors.Is(err, brokerauth.ErrDenied) {
			t.Fatalf("wrong MQTT password: %v", err)
		}

		// Two registrations racing with one key: exactly one wins.
		race := provisioningKey(t, e, tok)
		var wg sync.WaitGroup
		statuses := make([]int, 6)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": race, "agentName": "racer"}).status
			}()
		}
		wg.Wait()
		won := 0
		for _, s := range statuses {
			if s == http.StatusCreated {
				won++
			} else if s != http.StatusUnauthorized {
				t.Fatalf("racing registration answered %d", s)
			}
		}
		if won != 1 {
			t.Fatalf("%d registrations won with one key (statuses %v), want 1", won, statuses)
		}

		// Re-provisioning a registered agent takes a key made for it: any
		// other key is refused and stays unused.
		plain := provisioningKey(t, e, tok)
		if r := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": plain, "agentName": "press-7", "agentUuid": agent}); r.status != http.StatusConflict {
			t.Fatalf("taking over an agent with an ordinary key: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": plain, "agentName": "fresh"}); r.status != http.StatusCreated {
			t.Fatalf("the refused key was consumed: %d %s", r.status, r.raw)
		}
		forAgent := call(t, e, "POST", "/api/v1/provisioning/keys", tok, map[string]string{"agentUuid": agent})
		if forAgent.status != http.StatusCreated || forAgent.str("agentUuid") != agent {
			t.Fatalf("key for an agent: %d %s", forAgent.status, forAgent.raw)
		}
		if r := call(t, e, "PATCH", "/api/v1/agents/"+agent+"/active", tok, map[string]bool{"active": false}); r.status != http.StatusOK {
			t.Fatalf("disable: %d %s", r.status, r.raw)
		}
		again := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": forAgent.str("key"), "agentName": "press-7b"})
		if again.status != http.StatusCreated || again.str("agentUuid") != agent {
			t.Fatalf("re-provisioning with the agent's key: %d %s", again.status, again.raw)
		}
		if _, err := acc.agents.AuthenticateDevice(ctx, apiKey, password); !errors.Is(err, brokerauth.ErrDenied) {
			t.Fatalf("the agent's key from before re-provisioning: %v", err)
		}
		if r := call(t, e, "GET", "/api/v1/agents/"+agent, tok, nil); r.body["active"] != false {
			t.Fatalf("re-provisioning enabled a disabled agent: %s", r.raw)
		}
		if r := call(t, e, "PATCH", "/api/v1/agents/"+agent+"/active", tok, map[string]bool{"active": true}); r.status != http.StatusOK {
			t.Fatalf("enable: %d %s", r.status, r.raw)
		}
		apiKey, password = again.str("apiKey"), again.str("mqtt", "password")

		// Revoking a device key stops it at once; the agent's others work.
		extra := call(t, e, "POST", "/api/v1/auth/api-keys", tok, map[string]string{"name": "spare", "agentUuid": agent})
		if extra.status != http.StatusCreated {
			t.Fatalf("second device key: %d %s", extra.status, extra.raw)
		}
		if r := call(t, e, "GET", "/api/v1/agents/"+agent+"/keys", tok, nil); !strings.Contains(r.raw, extra.str("kid")) || strings.Contains(r.raw, extra.str("apiKey")) {
			t.Fatalf("device key list: %s", r.raw)
		}
		if r := call(t, e, "DELETE", "/api/v1/agents/"+agent+"/keys/"+extra.str("kid"), tok, nil); r.status != http.StatusNoContent {
			t.Fatalf("revoke device key: %d %s", r.status, r.raw)
		}
		if _, err := acc.agents.AuthenticateDevice(ctx, extra.str("apiKey"), extra.str("mqtt", "password")); !errors.Is(err, brokerauth.ErrDenied) {
			t.Fatalf("revoked device key: %v", err)
		}
		if _, err := acc.agents.AuthenticateDevice(ctx, apiKey, password); err != nil {
			t.Fatalf("the agent's other key after a revocation: %v", err)
		}
		// Deleting the agent kills its device key.
		if r := call(t, e, "DELETE", "/api/v1/agents/"+agent, tok, nil); r.status != http.StatusNoContent {
			t.Fatalf("delete agent: %d %s", r.status, r.raw)
		}
		if _, err := acc.agents.AuthenticateDevice(ctx, apiKey, password); !errors.Is(err, brokerauth.ErrDenied) {
			t.Fatalf("device key of a deleted agent: %v", err)
		}
		ev := call(t, e, "GET", "/api/v1/audit/events?kind=agent.registered", tok, nil)
		if evs, _ := ev.body["events"].([]any); len(evs) != 4 {
			t.Fatalf("registration audit events: %s", ev.raw)
		}
	})
}

func TestLicenceEnforcementIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		// A licence for two agents, in a file so that it can be replaced.
		lic := testLicence(t, 2)
		path := filepath.Join(t.TempDir(), "licence.jwt")
		if err := os.WriteFile(path, []byte(lic.Key), 0o600); err != nil {
			t.Fatal(err)
		}
		lic.Key = path
		e, acc := accessEngine(t, d, testTokens(t), lic)
		tok := admin(t, e)
		var creds []reply
		for i := range 2 {
			r := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": "a" + string(rune('0'+i))})
			if r.status != http.StatusCreated {
				t.Fatalf("registration %d: %d %s", i+1, r.status, r.raw)
			}
			creds = append(creds, r)
		}
		third := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": "a3"})
		if third.status != http.StatusForbidden || third.str("error", "code") != licence.CodeAgentLimit {
			t.Fatalf("third registration under max-agents 2: %d %s", third.status, third.raw)
		}
		if r := call(t, e, "POST", "/api/v1/agents", tok, map[string]string{"name": "by hand"}); r.status != http.StatusForbidden {
			t.Fatalf("third agent created by hand: %d %s", r.status, r.raw)
		}
		if u := call(t, e, "GET", "/api/v1/billing/usage", tok, nil); u.status != http.StatusOK || u.body["agents"] != float64(2) || u.body["maxAgents"] != float64(2) {
			t.Fatalf("usage: %d %s", u.status, u.raw)
		}

		// The licence goes away: restricted mode.
		if err := os.WriteFile(path, []byte("not a licence"), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := call(t, e, "POST", "/api/v1/billing/refresh-license", tok, nil); r.status != http.StatusOK || r.str("state") != "restricted" {
			t.Fatalf("refresh licence: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "DELETE", "/api/v1/agents/"+creds[1].str("agentUuid"), tok, nil); r.status != http.StatusNoContent {
			t.Fatalf("delete agent: %d", r.status)
		}
		r := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": "a4"})
		if r.status != http.StatusForbidden || r.str("error", "code") != licence.CodeRestricted {
			t.Fatalf("registration while restricted: %d %s", r.status, r.raw)
		}
		// The agent registered before still authenticates at the broker
		// and still reaches its device routes.
		if _, err := acc.agents.AuthenticateDevice(t.Context(), creds[0].str("apiKey"), creds[0].str("mqtt", "password")); err != nil {
			t.Fatalf("existing agent refused while restricted: %v", err)
		}
		if w := deviceCall(t, e, "GET", "/api/v1/device/"+creds[0].str("agentUuid")+"/state", creds[0].str("apiKey"), nil); w.Code != http.StatusOK {
			t.Fatalf("existing agent's state poll while restricted: %d %s", w.Code, w.Body)
		}
	})
}

// TestFleetsAndJobsWhileRestrictedIntegration: fleets are not premium and
// jobs count against nothing, so both answer as usual in restricted mode,
// and an agent registered before takes its job.
func TestFleetsAndJobsWhileRestrictedIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		lic := testLicence(t, 2)
		path := filepath.Join(t.TempDir(), "licence.jwt")
		if err := os.WriteFile(path, []byte(lic.Key), 0o600); err != nil {
			t.Fatal(err)
		}
		lic.Key = path
		e, _ := fullEngine(t, d, lic)
		tok := admin(t, e)
		reg := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": "press"})
		if reg.status != http.StatusCreated {
			t.Fatalf("registration: %d %s", reg.status, reg.raw)
		}
		if err := os.WriteFile(path, []byte("not a licence"), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := call(t, e, "POST", "/api/v1/billing/refresh-license", tok, nil); r.status != http.StatusOK || r.str("state") != "restricted" {
			t.Fatalf("refresh licence: %d %s", r.status, r.raw)
		}
		fleet := call(t, e, "POST", "/api/v1/fleets", tok, map[string]any{"name": "line"})
		if fleet.status != http.StatusCreated {
			t.Fatalf("create a fleet while restricted: %d %s", fleet.status, fleet.raw)
		}
		agent := reg.str("agentUuid")
		if r := call(t, e, "POST", "/api/v1/fleets/"+fleet.str("id")+"/agents", tok, map[string]any{"agentUuid": agent}); r.status != http.StatusOK {
			t.Fatalf("add an agent to a fleet while restricted: %d %s", r.status, r.raw)
		}
		job := call(t, e, "POST", "/api/v1/jobs/execute", tok, map[string]any{"handler": "sync", "targets": map[string]any{"fleet": fleet.str("id")}})
		if job.status != http.StatusCreated {
			t.Fatalf("dispatch a job while restricted: %d %s", job.status, job.raw)
		}
		if w := deviceCall(t, e, "GET", "/api/v1/agents/"+agent+"/jobs/next", reg.str("apiKey"), nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), job.str("jobId")) {
			t.Fatalf("the agent's job poll while restricted: %d %s", w.Code, w.Body)
		}
	})
}

// fullEngine is the handler of the role as New builds it, on d and an
// in-process stream store, with licence lic loaded.
func fullEngine(t *testing.T, d *db.DB, lic config.Licence) (http.Handler, *rt.Runtime) {
	t.Helper()
	h, r, _ := fullRole(t, d, lic)
	return h, r
}

// fullRole is fullEngine with the role's telemetry pipeline, which tests
// can hand MQTT messages.
func fullRole(t *testing.T, d *db.DB, lic config.Licence) (http.Handler, *rt.Runtime, *pipeline) {
	t.Helper()
	return fullRoleWith(t, d, lic, nil)
}

// fullRoleWith is fullRole with tune, when not nil, applied to the
// configuration before the role is built.
func fullRoleWith(t *testing.T, d *db.DB, lic config.Licence, tune func(*config.Config)) (http.Handler, *rt.Runtime, *pipeline) {
	t.Helper()
	h, r, pipe, _ := roleServices(t, d, lic, tune)
	return h, r, pipe
}

// roleServices is fullRoleWith that also returns every service New built,
// for tests that run some of them.
func roleServices(t *testing.T, d *db.DB, lic config.Licence, tune func(*config.Config)) (http.Handler, *rt.Runtime, *pipeline, []lifecycle.Service) {
	t.Helper()
	return roleServicesOn(t, d, nil, nil, lic, tune)
}

// roleServicesOn is roleServices on the stream store streams and the
// runtime r; nil builds a memory store and a runtime that logs nothing.
func roleServicesOn(t *testing.T, d *db.DB, streams streamstore.Store, r *rt.Runtime, lic config.Licence, tune func(*config.Config)) (http.Handler, *rt.Runtime, *pipeline, []lifecycle.Service) {
	t.Helper()
	return roleServicesWith(t, rt.Backends{DB: d, Streams: streams}, r, lic, tune)
}

// roleServicesWith is roleServicesOn on the backends b (a nil b.Streams
// builds a memory store).
func roleServicesWith(t *testing.T, b rt.Backends, r *rt.Runtime, lic config.Licence, tune func(*config.Config)) (http.Handler, *rt.Runtime, *pipeline, []lifecycle.Service) {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	cfg.JWT.Secret = config.Secret(testSecret)
	cfg.Licence = lic
	cfg.Auth.RateLimitAuth = 0
	cfg.Auth.AllowRegistration = true
	if tune != nil {
		tune(cfg)
	}
	if b.Streams == nil {
		mem, err := memstore.New(memstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b.Streams = mem
	}
	if r == nil {
		r = &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	}
	services, err := New(cfg, r, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler
	var pipe *pipeline
	for _, s := range services {
		switch s := s.(type) {
		case *pipeline:
			pipe = s
		case *licenceLoader:
			if err := s.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
		case *httpx.Server:
			h = s.Handler()
		}
	}
	if h == nil || pipe == nil {
		t.Fatal("New built no HTTP server or no pipeline")
	}
	return h, r, pipe, services
}

// TestTenantScopedRoutesIntegration: every route that names a record by id
// answers 404 to another tenant. The routes are read from the router, so
// the test fails when a new one has no record to be tried with.
func TestTenantScopedRoutesIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _ := fullEngine(t, d, testLicence(t, 0))
		tokB := admin(t, e)
		ra := call(t, e, "POST", "/api/v1/auth/register", "", map[string]string{"email": "a@example.com", "password": "correct horse battery"})
		tokA := ra.str("accessToken")

		// Tenant B's records.
		agentB := call(t, e, "POST", "/api/v1/agents", tokB, map[string]any{"name": "b-agent", "tags": map[string]string{"site": "b"},
			"location": map[string]any{"latitude": 1, "longitude": 2}})
		if agentB.status != http.StatusCreated {
			t.Fatalf("create agent: %d %s", agentB.status, agentB.raw)
		}
		uuidB := agentB.str("uuid")
		devKeyB := call(t, e, "POST", "/api/v1/auth/api-keys", tokB, map[string]string{"name": "b", "agentUuid": uuidB})
		if r := call(t, e, "POST", "/api/v1/readings", tokB, map[string]any{"agentUuid": uuidB, "metricName": "plc.temp", "value": 1.5}); r.status != http.StatusCreated && r.status != http.StatusOK {
			t.Fatalf("insert a reading: %d %s", r.status, r.raw)
		}
		pk := call(t, e, "POST", "/api/v1/provisioning/keys", tokB, map[string]string{"name": "b"})
		userB := call(t, e, "GET", "/api/v1/auth/me", tokB, nil)
		keyB := call(t, e, "POST", "/api/v1/api-keys", tokB, map[string]string{"name": "b"})
		invB := call(t, e, "POST", "/api/v1/invites", tokB, map[string]string{"email": "invitee@example.com"})
		brokerUserB := call(t, e, "PUT", "/api/v1/broker-auth/user/scada-b", tokB, map[string]any{"rules": []map[string]any{{"pattern": "#", "subscribe": true}}})
		if brokerUserB.status != http.StatusCreated {
			t.Fatalf("create broker user: %d %s", brokerUserB.status, brokerUserB.raw)
		}
		for _, p := range []string{"/api/v1/secrets/plc1", "/api/v1/agents/" + uuidB + "/secrets/plc1"} {
			if r := call(t, e, "PUT", p, tokB, map[string]any{"value": "b's secret"}); r.status != http.StatusCreated {
				t.Fatalf("create secret %s: %d %s", p, r.status, r.raw)
			}
		}
		// A version of B's target state, so its history has a version 1.
		if r := call(t, e, "PUT", "/api/v1/agents/"+uuidB+"/target-state", tokB, map[string]any{"state": map[string]any{}}); r.status != http.StatusOK {
			t.Fatalf("set tenant B's target state: %d %s", r.status, r.raw)
		}
		fleetB := call(t, e, "POST", "/api/v1/fleets", tokB, map[string]any{"name": "b-fleet"})
		templateB := call(t, e, "POST", "/api/v1/jobs/templates", tokB, map[string]any{"name": "b-sync", "handler": "sync"})
		jobB := call(t, e, "POST", "/api/v1/agents/"+uuidB+"/jobs", tokB, map[string]any{"handler": "sync"})
		layoutB := call(t, e, "POST", "/api/v1/dashboard-layouts/"+uuidB, tokB, map[string]any{"name": "b-board", "layout": map[string]any{"schemaVersion": 1}})
		ruleB := call(t, e, "POST", "/api/v1/anomaly/rules", tokB, map[string]any{"name": "b-hot", "type": "threshold", "metric": "temp*",
			"op": "above", "threshold": 80})
		alertB := call(t, e, "POST", "/api/v1/anomaly/alerts", tokB, map[string]any{"name": "b-live", "target": map[string]any{"type": "live"}})
		// The evaluator opens incidents and the MQTT subscriber stores
		// events; here tenant B's are written as they would.
		var tenantB string
		if err := d.SQL().QueryRowContext(t.Context(), `SELECT tenant_uuid FROM agents WHERE uuid = $1`, uuidB).Scan(&tenantB); err != nil {
			t.Fatal(err)
		}
		incidentB := "c1000000-0000-4000-8000-00000000000b"
		at := d.Dialect().TimeArg(time.Now())
		if _, err := d.SQL().ExecContext(t.Context(), `INSERT INTO anomaly_incidents (id, tenant_uuid, rule_id, rule_key, rule_name, rule_type, severity,
agent_uuid, device_name, metric, value, score, peak_score, opened_at) VALUES ($1, $2, $3, $3, 'b-hot', 'threshold', 'warning', $4, 'plc', 'plc.temp', 90, 10, 10, $5)`,
			incidentB, tenantB, ruleB.str("id"), uuidB, at); err != nil {
			t.Fatal(err)
		}
		if _, err := d.SQL().ExecContext(t.Context(), `INSERT INTO agent_events (tenant_uuid, agent_uuid, kind, event_id, severity, occurred_at, received_at, data)
VALUES ($1, $2, 'anomaly_alert', 'b-event', 'critical', $3, $3, '{}')`, tenantB, uuidB, at); err != nil {
			t.Fatal(err)
		}
		for what, r := range map[string]reply{"fleet": fleetB, "job template": templateB, "job": jobB, "dashboard layout": layoutB,
			"anomaly rule": ruleB, "anomaly alert rule": alertB} {
			if r.status != http.StatusCreated {
				t.Fatalf("create tenant B's %s: %d %s", what, r.status, r.raw)
			}
		}
		exportB := call(t, e, "POST", "/api/v1/export/jobs", tokB, nil)
		if exportB.status != http.StatusAccepted {
			t.Fatalf("create tenant B's export job: %d %s", exportB.status, exportB.raw)
		}
		// idOf names tenant B's record of each family of :id routes.
		idOf := func(path string) string {
			switch {
			case strings.HasPrefix(path, "/api/v1/fleets/"):
				return fleetB.str("id")
			case strings.HasPrefix(path, "/api/v1/jobs/templates/"):
				return templateB.str("id")
			case strings.HasPrefix(path, "/api/v1/anomaly/rules/"):
				return ruleB.str("id")
			case strings.HasPrefix(path, "/api/v1/anomaly/incidents/"):
				return incidentB
			case strings.HasPrefix(path, "/api/v1/anomaly/alerts/"):
				return alertB.str("id")
			case strings.HasPrefix(path, "/api/v1/export/jobs/"):
				return exportB.str("id")
			}
			return ""
		}
		byPath := map[string]string{
			"/api/v1/provisioning/keys/:id": pk.str("id"),
			"/api/v1/provision/keys/:id":    pk.str("id"),
			"/api/v1/users/:id":             userB.str("id"),
			"/api/v1/api-keys/:id":          keyB.str("apiKey", "id"),
			"/api/v1/invites/:id":           invB.str("id"),
		}
		bodies := map[string]any{
			"PATCH /api/v1/agents/:uuid":                 map[string]string{"name": "stolen"},
			"PATCH /api/v1/agents/:uuid/active":          map[string]bool{"active": false},
			"POST /api/v1/agents/:uuid/tags":             map[string]any{"tags": map[string]string{"x": "y"}},
			"PUT /api/v1/users/:id":                      map[string]string{"role": "member"},
			"POST /api/v1/agents/:uuid/target-state":     map[string]any{"state": map[string]any{}},
			"PUT /api/v1/agents/:uuid/target-state":      map[string]any{"state": map[string]any{}},
			"PUT /api/v1/broker-auth/user/:username":     map[string]any{"rules": []map[string]any{{"pattern": "#", "publish": true}}},
			"POST /api/v1/agents/:uuid/devices":          map[string]any{"name": "plc1", "protocol": "modbus"},
			"PUT /api/v1/agents/:uuid/devices/:name":     map[string]any{"name": "plc1", "protocol": "modbus"},
			"PUT /api/v1/secrets/:name":                  map[string]any{"value": "a's own"},
			"PUT /api/v1/agents/:uuid/secrets/:name":     map[string]any{"value": "stolen"},
			"PATCH /api/v1/fleets/:id":                   map[string]any{"name": "stolen"},
			"PUT /api/v1/fleets/:id":                     map[string]any{"name": "stolen"},
			"POST /api/v1/fleets/:id/agents":             map[string]any{"agentUuid": uuidB},
			"PUT /api/v1/jobs/templates/:id":             map[string]any{"name": "stolen", "handler": "sync"},
			"POST /api/v1/agents/:uuid/jobs":             map[string]any{"handler": "sync"},
			"POST /api/v1/dashboard-layouts/:deviceUuid": map[string]any{"name": "stolen", "layout": map[string]any{"schemaVersion": 1}},
			"PUT /api/v1/dashboard-layouts/:layoutId":    map[string]any{"name": "stolen"},
			"PUT /api/v1/anomaly/rules/:id": map[string]any{"name": "stolen", "type": "threshold", "metric": "t", "op": "above",
				"threshold": 1},
			"PUT /api/v1/anomaly/alerts/:id": map[string]any{"name": "stolen", "target": map[string]any{"type": "live"}},
		}
		covered := 0
		routes := e.(*gin.Engine).Routes()
		for _, rt := range routes {
			// Device routes take a device key, not a user's credential;
			// TestDeviceRoutesIntegration covers their scoping.
			// The console's files carry no tenant's data.
			if !strings.Contains(rt.Path, "/:") || strings.HasPrefix(rt.Path, "/api/v1/device/") || !strings.HasPrefix(rt.Path, "/api/") ||
				rt.Path == "/api/v1/agents/:uuid/jobs/next" || rt.Path == "/api/v1/agents/:uuid/jobs/:jobId/status" ||
				// :name is a label name, no record; TestPrometheusAPIPromtoolIntegration
				// checks another tenant's key sees none of the values.
				rt.Path == "/api/v1/prom/api/v1/label/:name/values" {
				continue
			}
			name := rt.Method + " " + rt.Path
			path := strings.NewReplacer(":uuid", uuidB, ":agent_uuid", uuidB, ":kid", devKeyB.str("kid"), ":username", "scada-b",
				":protocol", "modbus", ":deviceName", "plc", ":name", "plc1",
				":jobId", jobB.str("jobId"), ":version", "1", ":deviceUuid", uuidB, ":layoutId", layoutB.str("id"), ":incidentId", incidentB,
				":id", byPath[rt.Path]+idOf(rt.Path)).Replace(rt.Path)
			if strings.Contains(path, "/:") || strings.HasSuffix(path, "/") || strings.Contains(path, "//") {
				t.Errorf("%s: no record of tenant B to try it with; add one to this test", name)
				continue
			}
			covered++
			want := http.StatusNotFound
			if name == "PUT /api/v1/secrets/:name" {
				// Tenant-wide secrets are named within the caller's
				// tenant: A creates its own, B's stays (checked below).
				want = http.StatusCreated
				path = strings.Replace(path, "plc1", "a-own", 1)
			}
			r := call(t, e, rt.Method, path, tokA, bodies[name])
			if name == "PUT /api/v1/broker-auth/user/:username" {
				// MQTT has one namespace of user names: creating a name
				// another tenant holds is a conflict, and changes nothing.
				want = http.StatusConflict
			}
			if r.status != want {
				t.Errorf("%s as tenant A on tenant B's record: %d %s, want %d", name, r.status, r.raw, want)
			}
		}
		t.Logf("%d routes with ids tried", covered)
		if r := call(t, e, "GET", "/api/v1/broker-auth/acl?username=scada-b", tokB, nil); r.status != http.StatusOK || !strings.Contains(r.raw, `"subscribe":true`) {
			t.Errorf("tenant B's broker user after tenant A's attempts: %d %s", r.status, r.raw)
		}
		for _, p := range []string{"/api/v1/secrets", "/api/v1/agents/" + uuidB + "/secrets"} {
			if r := call(t, e, "GET", p, tokB, nil); r.status != http.StatusOK || !strings.Contains(r.raw, `"plc1"`) {
				t.Errorf("tenant B's secrets after tenant A's attempts, %s: %d %s", p, r.status, r.raw)
			}
		}
		// B's own requests still work, so the 404s above are about tenants.
		for _, path := range []string{"/api/v1/agents/" + uuidB, "/api/v1/readings/" + uuidB + "/latest", "/api/v1/agents/" + uuidB + "/tags",
			"/api/v1/agents/" + uuidB + "/target-state/history/1",
			"/api/v1/dashboard-layouts/" + uuidB, "/api/v1/dashboard-layouts/" + uuidB + "/all",
			"/api/v1/anomaly/incidents/" + incidentB, "/api/v1/agents/" + uuidB + "/events"} {
			if r := call(t, e, "GET", path, tokB, nil); r.status != http.StatusOK {
				t.Errorf("GET %s as tenant B: %d %s", path, r.status, r.raw)
			}
		}
		// Lists and queries do not show B's records to A.
		for _, tt := range []struct{ method, path string }{
			{"GET", "/api/v1/agents"}, {"GET", "/api/v1/agents/locations"}, {"POST", "/api/v1/agents/query"},
			{"GET", "/api/v1/provisioning/keys"}, {"GET", "/api/v1/users"}, {"GET", "/api/v1/api-keys"},
			{"GET", "/api/v1/readings/latest"}, {"GET", "/api/v1/broker-auth/user"}, {"GET", "/api/v1/broker-auth/acl"},
			{"GET", "/api/v1/dashboard-layouts"}, {"GET", "/api/v1/dashboard-layouts?deviceUuid=" + uuidB},
			{"GET", "/api/v1/anomaly/rules"}, {"GET", "/api/v1/anomaly/alerts"}, {"GET", "/api/v1/anomaly/incidents"},
			{"GET", "/api/v1/anomaly-incidents"}, {"GET", "/api/v1/anomaly-alerts"}, {"GET", "/api/v1/anomaly/top-metrics"},
		} {
			var body any
			if tt.method == "POST" {
				body = map[string]any{"tags": map[string]string{}}
			}
			r := call(t, e, tt.method, tt.path, tokA, body)
			if r.status != http.StatusOK || strings.Contains(r.raw, uuidB) || strings.Contains(r.raw, pk.str("id")) ||
				strings.Contains(r.raw, ruleB.str("id")) || strings.Contains(r.raw, alertB.str("id")) || strings.Contains(r.raw, incidentB) ||
				strings.Contains(r.raw, "admin@example.com") || strings.Contains(r.raw, "scada-b") {
				t.Errorf("%s %s as tenant A: %d %s", tt.method, tt.path, r.status, r.raw)
			}
		}
		if r := call(t, e, "POST", "/api/v1/auth/api-keys", tokA, map[string]string{"name": "x", "agentUuid": uuidB}); r.status != http.StatusNotFound {
			t.Errorf("device key for another tenant's agent: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/agents/query", tokB, map[string]any{"tags": map[string]string{"site": "b"}}); !strings.Contains(r.raw, uuidB) {
			t.Errorf("tag query: %s", r.raw)
		}
	})
}

// TestBrokerCallbackDeniesWhenDatabaseDownIntegration: with the registry's
// database gone, the broker callback answers deny, never allow.
func TestBrokerCallbackDeniesWhenDatabaseDownIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, acc := accessEngine(t, d, testTokens(t), testLicence(t, 0))
		tok := admin(t, e)
		reg := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": "a"})
		cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
		if err != nil {
			t.Fatal(err)
		}
		cfg.MQTT.AuthCacheTTLSeconds = 0 // every connect asks the database
		cfg.BrokerAuth.AllowedNetworks = "192.0.2.0/24"
		ba, err := NewBrokerAuth(cfg, acc.r, acc.b.DB)
		if err != nil {
			t.Fatal(err)
		}
		cb := gin.New()
		if err := apibrokerauth.Register(cb, ba.Authorizer, cfg.BrokerAuth, WriteError); err != nil {
			t.Fatal(err)
		}
		body := map[string]string{"username": reg.str("apiKey"), "password": reg.str("mqtt", "password"), "clientid": reg.str("mqtt", "clientId")}
		if r := call(t, cb, "POST", "/broker-auth/user", "", body); r.status != http.StatusOK {
			t.Fatalf("callback with the database up: %d %s", r.status, r.raw)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if r := call(t, cb, "POST", "/broker-auth/user", "", body); r.status != http.StatusForbidden || strings.Contains(r.raw, `"allow"`) {
			t.Fatalf("callback with the database down: %d %s, want a deny", r.status, r.raw)
		}
	})
}

// TestAgentBoundAPIKeyIntegration: a user API key bound to an agent reaches
// that agent's routes only, and failed credentials are counted per address.
func TestAgentBoundAPIKeyIntegration(t *testing.T) {
	e, _ := accessEngine(t, dbtest.Migrated(t, "sqlite"), testTokens(t), testLicence(t, 0), func(c *config.Config) { c.Auth.RateLimitAuth = 5 })
	tok := admin(t, e)
	a := call(t, e, "POST", "/api/v1/agents", tok, map[string]string{"name": "a"})
	b := call(t, e, "POST", "/api/v1/agents", tok, map[string]string{"name": "b"})
	key := call(t, e, "POST", "/api/v1/api-keys", tok, map[string]string{"name": "for a", "agentUuid": a.str("uuid")})
	if key.status != http.StatusCreated {
		t.Fatalf("create a bound key: %d %s", key.status, key.raw)
	}
	bound := key.str("key")
	for _, tt := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/api/v1/agents/" + a.str("uuid"), http.StatusOK},
		{"GET", "/api/v1/agents/" + b.str("uuid"), http.StatusForbidden},
		{"DELETE", "/api/v1/agents/" + b.str("uuid"), http.StatusForbidden},
		{"GET", "/api/v1/users", http.StatusForbidden},
		{"GET", "/api/v1/agents", http.StatusForbidden},
	} {
		if r := call(t, e, tt.method, tt.path, bound, nil); r.status != tt.want {
			t.Errorf("%s %s with a key bound to agent a: %d %s, want %d", tt.method, tt.path, r.status, r.raw, tt.want)
		}
	}
	// Refused credentials from one address: the sixth gets 429 before any
	// lookup, and so does a valid one from that address.
	forged := "ek_AAAAAAAA_" + strings.Repeat("B", 40)
	for i := 1; i <= 6; i++ {
		req := httptest.NewRequest("GET", "/api/v1/auth/me", nil)
		req.Header.Set("Authorization", "Bearer "+forged)
		req.RemoteAddr = "198.51.100.9:1000"
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		want := http.StatusUnauthorized
		if i == 6 {
			want = http.StatusTooManyRequests
		}
		if w.Code != want {
			t.Fatalf("refused credential %d: %d %s, want %d", i, w.Code, w.Body, want)
		}
	}
	req := httptest.NewRequest("GET", "/api/v1/auth/me", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.RemoteAddr = "198.51.100.9:1000"
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a valid token from the blocked address: %d", w.Code)
	}
}
