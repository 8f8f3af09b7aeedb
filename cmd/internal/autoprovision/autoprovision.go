// Package autoprovision provisions all-in-one's own agent against its own
// Cloud API at start: it creates the first admin, logs in, creates a
// provisioning key and hands it to the agent, over loopback HTTP as an
// operator would. See docs/all-in-one.md.
package autoprovision

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
)

// autoProvisionMarker is written to the data directory once auto-provisioning
// has provisioned the agent. Finding it next to an agent that is not
// provisioned means the operator deprovisioned or factory-reset the agent
// since, and all-in-one must not undo that at its next start.
const autoProvisionMarker = "agent-auto-provisioned"

// autoProvisionDevice is the name and type the agent registers under, so the
// all-in-one agent is recognisable in the cloud's agent list.
const autoProvisionDevice = "all-in-one"

// provisioner provisions all-in-one's own agent against its own Cloud
// API, so a newcomer sees an agent in the cloud without bootstrapping an
// admin, creating a provisioning key and calling the agent by hand. It does
// over loopback HTTP exactly what an operator would, so it exercises the
// same paths and needs no access to either role's internals.
type provisioner struct {
	log      *slog.Logger
	apiURL   string // the Cloud API's base URL, handed to the agent too
	agentURL string
	agentKey string // X-Api-Key in the agent's key mode
	email    string
	password string // empty: generate one when creating the admin
	marker   string
	out      io.Writer // where a generated password is shown, once
	tenant   func(ctx context.Context, id string) string
	healthy  func(ctx context.Context) bool
	// adminKept warns when the configured admin credentials do not apply
	// to an existing admin.
	adminKept func(ctx context.Context)
	client    *http.Client
}

// errGiveUp marks a failure that retrying cannot fix: the operator has to
// act (set a password, fix an address), so auto-provisioning stops.
var errGiveUp = errors.New("auto-provisioning stopped")

func newProvisioner(cfg *config.Config, r *rt.Runtime, d *db.DB, out io.Writer) *provisioner {
	p := &provisioner{
		log:      r.Component("auto-provision"),
		apiURL:   "http://" + net.JoinHostPort(dialHost(cfg.API.Bind), strconv.Itoa(cfg.API.Port)),
		agentURL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Agent.Port)),
		email:    cfg.AllInOne.AdminEmail,
		password: cfg.AllInOne.AdminPassword.Reveal(),
		marker:   filepath.Join(cfg.AllInOne.DataDir, autoProvisionMarker),
		out:      out,
		// Hashing a password takes a while on a small board; anything
		// slower than this is a hung request, retried.
		client: &http.Client{Timeout: 30 * time.Second},
	}
	if cfg.Agent.KeyMode() {
		p.agentKey = cfg.Agent.APIKey.Reveal()
	}
	p.healthy = func(ctx context.Context) bool { return r.Health.Report(ctx).Healthy }
	p.adminKept = func(ctx context.Context) { warnAdminKept(ctx, p.log, cfg, d) }
	// The API shows a tenant by its id only; the name is what an operator
	// recognises. The database is open by the time this runs.
	p.tenant = func(ctx context.Context, id string) string {
		var name string
		if err := d.SQL().QueryRowContext(ctx, `SELECT name FROM tenants WHERE uuid = $1`, id).Scan(&name); err != nil {
			return ""
		}
		return name
	}
	return p
}

// Service provisions all-in-one's agent as configured by cfg; d is the
// Cloud API's database, open by the time the service runs, and out shows
// a generated admin password. The provisioning runs in the background of
// Run, so it neither delays the start of the later services nor holds up
// shutdown: every request and wait ends with the context.
func Service(cfg *config.Config, r *rt.Runtime, d *db.DB, out io.Writer) lifecycle.Service {
	p := newProvisioner(cfg, r, d, out)
	return &lifecycle.Funcs{
		ServiceName: "agent-auto-provision",
		RunFunc: func(ctx context.Context) error {
			p.run(ctx)
			<-ctx.Done()
			return nil
		},
	}
}

func (p *provisioner) run(ctx context.Context) {
	defer p.client.CloseIdleConnections()
	// Before anything is provisioned: the database is open once Run
	// runs, and no admin has been created by this start yet.
	p.adminKept(ctx)
	if !p.waitReady(ctx) {
		return
	}
	backoff := 500 * time.Millisecond
	for {
		err := p.attempt(ctx)
		switch {
		case err == nil, ctx.Err() != nil:
			return
		case errors.Is(err, errGiveUp):
			p.log.Warn("agent not provisioned", "err", err)
			return
		}
		p.log.Warn("auto-provisioning failed; retrying", "err", err, "in", backoff)
		if !lifecycle.Sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// waitReady polls the API's and the agent's readiness until both answer.
// They run in this process, so this is a short wait unless a start-up
// step is slow; nothing is logged unless it becomes a long one.
func (p *provisioner) waitReady(ctx context.Context) bool {
	t0 := time.Now()
	interval := 100 * time.Millisecond
	told := false
	for {
		// The API's /health answers from the shared health registry, and
		// logs each 503: asking the registry first keeps a slow start
		// quiet, and the probes then prove the ports answer.
		if p.healthy(ctx) && p.ready(ctx, p.apiURL+"/health") && p.agentReady(ctx) {
			return true
		}
		if !told && time.Since(t0) > 30*time.Second {
			p.log.Info("waiting for the Cloud API and the agent to be ready before provisioning the agent")
			told = true
		}
		if !lifecycle.Sleep(ctx, interval) {
			return false
		}
		interval = min(2*interval, 2*time.Second)
	}
}

func (p *provisioner) ready(ctx context.Context, url string) bool {
	code, _, err := p.call(ctx, http.MethodGet, url, "", nil)
	return err == nil && code == http.StatusOK
}

// agentReady asks the health report rather than /v1/readiness: it is the
// same check, answered 200 with the verdict inside, so polling an agent
// that is still starting does not log a failed request each time.
func (p *provisioner) agentReady(ctx context.Context) bool {
	var h struct {
		Ready bool `json:"ready"`
	}
	return p.expect(ctx, http.MethodGet, p.agentURL+"/v1/health/report", "", nil, http.StatusOK, &h) == nil && h.Ready
}

type provisionStatus struct {
	Provisioned bool   `json:"provisioned"`
	UUID        string `json:"uuid"`
	APIEndpoint string `json:"apiEndpoint"`
}

// attempt provisions the agent unless it is, or was on purpose, provisioned
// already. Errors other than errGiveUp are worth retrying.
func (p *provisioner) attempt(ctx context.Context) error {
	var st provisionStatus
	if err := p.expect(ctx, http.MethodGet, p.agentURL+"/v1/provision/status", "", nil, http.StatusOK, &st); err != nil {
		return fmt.Errorf("agent provisioning status: %w", err)
	}
	if st.Provisioned {
		p.log.Info("agent is provisioned already", "agent", st.UUID, "api_endpoint", st.APIEndpoint)
		return nil
	}
	if _, err := os.Stat(p.marker); err == nil {
		p.log.Info("agent was deprovisioned after all-in-one provisioned it; leaving it standalone",
			"agent", st.UUID, "hint", "POST /v1/provision to the agent, or delete "+p.marker+" and restart")
		return nil
	}
	if st.APIEndpoint != "" {
		if !sameAPI(st.APIEndpoint, p.apiURL) {
			p.log.Info("agent holds credentials of another cloud; leaving it", "agent", st.UUID, "api_endpoint", st.APIEndpoint)
			return nil
		}
		// An earlier attempt registered and stopped in a later phase: the
		// agent resumes from its stored credentials, without a key.
		return p.provision(ctx, map[string]string{}, "")
	}

	token, tenantID, err := p.login(ctx)
	if err != nil {
		return err
	}
	var key struct {
		Key string `json:"key"`
	}
	// Single use, and short-lived in case the agent never uses it.
	if err := p.expect(ctx, http.MethodPost, p.apiURL+"/api/v1/provisioning/keys", token,
		map[string]any{"name": "all-in-one auto-provisioning", "expiresIn": 900}, http.StatusCreated, &key); err != nil {
		return fmt.Errorf("create provisioning key: %w", err)
	}
	return p.provision(ctx, map[string]string{"provisioningApiKey": key.Key, "apiEndpoint": p.apiURL,
		"deviceName": autoProvisionDevice, "deviceType": autoProvisionDevice}, tenantID)
}

// login makes sure an admin exists and signs in as it, returning the
// access token and the tenant id.
func (p *provisioner) login(ctx context.Context) (token, tenant string, err error) {
	password, generated := p.password, false
	if password == "" {
		password, generated = rand.Text(), true
	}
	creds := map[string]string{"email": p.email, "password": password}
	code, body, err := p.call(ctx, http.MethodPost, p.apiURL+"/api/v1/auth/bootstrap-admin", "", creds)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("bootstrap admin: %w", err)
	case code == http.StatusCreated:
		p.log.Info("created the Cloud API admin", "email", p.email, "generated_password", generated)
		if generated {
			p.showPassword(password)
			// A retry after a later step failed logs in with it; another
			// generated one would meet the admin just made.
			p.password = password
		}
	case code == http.StatusConflict && generated:
		return "", "", fmt.Errorf("%w: the Cloud API has an admin already, and auto-provisioning needs its password to log in: "+
			"set %s and %s, or set %s=false", errGiveUp,
			config.Label("all_in_one.admin_email"), config.Label("all_in_one.admin_password"), config.EnvNames("all_in_one.auto_provision"))
	case code == http.StatusConflict:
		// An admin exists; the configured credentials may well be its.
	case code == http.StatusUnprocessableEntity:
		return "", "", fmt.Errorf("%w: the Cloud API refused the admin %s: %s", errGiveUp, p.email, apiMessage(body))
	default:
		return "", "", fmt.Errorf("bootstrap admin: %d %s", code, apiMessage(body))
	}

	var session struct {
		AccessToken string `json:"accessToken"`
		User        struct {
			TenantID string `json:"tenantId"`
		} `json:"user"`
	}
	code, body, err = p.call(ctx, http.MethodPost, p.apiURL+"/api/v1/auth/login", "", creds)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("log in: %w", err)
	case code == http.StatusUnauthorized:
		// Another try would count as one more failed login against the
		// account, and the answer will not change.
		return "", "", fmt.Errorf("%w: cannot log in to the Cloud API as %s: check %s and %s", errGiveUp, p.email, config.EnvNames("all_in_one.admin_email"), config.EnvNames("all_in_one.admin_password"))
	case code != http.StatusOK:
		return "", "", fmt.Errorf("log in: %d %s", code, apiMessage(body))
	}
	if err := json.Unmarshal(body, &session); err != nil || session.AccessToken == "" {
		return "", "", fmt.Errorf("log in: unexpected answer %.200q", body)
	}
	return session.AccessToken, session.User.TenantID, nil
}

// provision calls the agent's POST /v1/provision, which registers with the
// cloud, fetches the target state and reports over MQTT.
func (p *provisioner) provision(ctx context.Context, req map[string]string, tenantID string) error {
	code, body, err := p.call(ctx, http.MethodPost, p.agentURL+"/v1/provision", "", req)
	switch {
	case err != nil:
		return fmt.Errorf("provision the agent: %w", err)
	case code == http.StatusConflict:
		// Provisioned in the meantime, by hand.
		p.log.Info("agent was provisioned meanwhile; nothing to do")
		return nil
	case code == http.StatusBadRequest:
		return fmt.Errorf("%w: the agent refused the provisioning request: %s", errGiveUp, apiMessage(body))
	case code != http.StatusOK:
		// 502 is a cloud phase that failed; a retry resumes it.
		return fmt.Errorf("provision the agent: %d %s", code, apiMessage(body))
	}
	var out struct {
		Device struct {
			UUID string `json:"uuid"`
			Name string `json:"deviceName"`
		} `json:"device"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return fmt.Errorf("provision the agent: unexpected answer %.200q", body)
	}
	if err := os.WriteFile(p.marker, []byte(out.Device.UUID+"\n"), 0o600); err != nil {
		// The agent is provisioned; without the marker a later deprovision
		// is undone at the next start, which is worth a warning, not a retry.
		p.log.Warn("cannot record the auto-provisioning", "path", p.marker, "err", err)
	}
	attrs := []any{"agent", out.Device.UUID, "device_name", out.Device.Name, "api_endpoint", p.apiURL}
	if tenantID != "" {
		attrs = append(attrs, "tenant", p.tenant(ctx, tenantID), "tenant_id", tenantID)
	}
	p.log.Info("agent provisioned", attrs...)
	return nil
}

// showPassword prints a generated admin password where the operator sees
// it, once: it is stored only as a hash, so this is the only chance. It
// goes to the command's output, never through the logger, so log
// collection does not keep it.
func (p *provisioner) showPassword(password string) {
	lines := []string{
		"Cloud API admin: " + p.email,
		"password: " + password + " (shown once)",
		"log in: POST " + p.apiURL + "/api/v1/auth/login",
		"set " + config.EnvNames("all_in_one.admin_password") + " to choose your own on a new data directory",
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l))
	}
	var b strings.Builder
	rule := "+" + strings.Repeat("-", width+2) + "+\n"
	b.WriteString("\n" + rule)
	for _, l := range lines {
		fmt.Fprintf(&b, "| %-*s |\n", width, l)
	}
	b.WriteString(rule + "\n")
	if _, err := io.WriteString(p.out, b.String()); err != nil {
		p.log.Warn("cannot show the generated admin password", "err", err)
	}
}

// expect calls url and decodes a want answer into out.
func (p *provisioner) expect(ctx context.Context, method, url, bearer string, in any, want int, out any) error {
	code, body, err := p.call(ctx, method, url, bearer, in)
	if err != nil {
		return err
	}
	if code != want {
		return fmt.Errorf("%d %s", code, apiMessage(body))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("unexpected answer %.200q: %w", body, err)
	}
	return nil
}

// call sends one request and returns the status and the body, at most 1 MiB.
func (p *provisioner) call(ctx context.Context, method, url, bearer string, in any) (int, []byte, error) {
	var rd io.Reader
	if in != nil {
		doc, err := json.Marshal(in)
		if err != nil {
			panic("BUG: marshal request: " + err.Error())
		}
		rd = bytes.NewReader(doc)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if p.agentKey != "" && strings.HasPrefix(url, p.agentURL) {
		req.Header.Set("X-Api-Key", p.agentKey)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, body, nil
}

// apiMessage picks the message out of an error answer of either role.
func apiMessage(body []byte) string {
	var doc struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &doc) == nil {
		switch e := doc.Error.(type) {
		case string:
			return e
		case map[string]any:
			if m, ok := e["message"].(string); ok {
				return m
			}
		}
		if doc.Message != "" {
			return doc.Message
		}
	}
	return fmt.Sprintf("%.200q", body)
}

// sameAPI compares two Cloud API URLs the way the agent does: with or
// without a trailing slash or /api/v1.
func sameAPI(a, b string) bool {
	norm := func(s string) string {
		return strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "/"), "/api/v1")
	}
	return norm(a) == norm(b)
}

// dialHost returns an address a local client can dial to reach a listener
// bound to bind.
func dialHost(bind string) string {
	if bind == "" || bind == "0.0.0.0" || bind == "::" {
		return "127.0.0.1"
	}
	return bind
}
