package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	memstore "github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// statusAfter makes n calls and returns the status of the last.
func statusAfter(n int, do func() int) int {
	status := 0
	for range n {
		status = do()
	}
	return status
}

// TestRateLimitSettingsIntegration: each rate limit, lowered from its
// default, refuses the call past it with 429, and a limit of 0 refuses
// none.
func TestRateLimitSettingsIntegration(t *testing.T) {
	login := map[string]string{"email": "nobody@example.com", "password": "not the password"}
	tests := []struct {
		name  string
		tune  func(*config.Config)
		calls func(t *testing.T, e http.Handler) func() int
	}{
		{"RATE_LIMIT_GLOBAL_PER_MIN", func(c *config.Config) { c.Auth.RateLimitGlobal = 3 }, func(t *testing.T, e http.Handler) func() int {
			return func() int { return call(t, e, "POST", "/api/v1/auth/login", "", login).status }
		}},
		{"RATE_LIMIT_AUTH_PER_MIN", func(c *config.Config) { c.Auth.RateLimitAuth = 3 }, func(t *testing.T, e http.Handler) func() int {
			return func() int { return call(t, e, "POST", "/api/v1/auth/login", "", login).status }
		}},
		{"RATE_LIMIT_ADMIN_PER_MIN", func(c *config.Config) { c.Auth.RateLimitAdmin = 3 }, func(t *testing.T, e http.Handler) func() int {
			tok := admin(t, e)
			return func() int { return call(t, e, "GET", "/api/v1/users", tok, nil).status }
		}},
		{"RATE_LIMIT_DEVICE_PER_MIN", func(c *config.Config) { c.Auth.RateLimitDevice = 3 }, func(t *testing.T, e http.Handler) func() int {
			tok := admin(t, e)
			return deviceRequests(t, e, tok)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, limit := range []bool{true, false} {
				e, _, _ := fullRoleWith(t, dbtest.Migrated(t, "sqlite"), testLicence(t, 0), func(c *config.Config) {
					if limit {
						tt.tune(c)
					}
				})
				do := tt.calls(t, e)
				if got := statusAfter(3, do); got == http.StatusTooManyRequests {
					t.Fatalf("limited at the 3rd call")
				}
				got := do()
				if limit && got != http.StatusTooManyRequests {
					t.Errorf("%s=3: 4th call answered %d, want 429", tt.name, got)
				}
				if !limit && got == http.StatusTooManyRequests {
					t.Errorf("default %s: 4th call answered 429", tt.name)
				}
			}
		})
	}
}

// TestTrustedProxiesSetting: with TRUSTED_PROXIES naming the proxy, clients
// behind it are told apart by X-Forwarded-For; without, they all share the
// proxy's address and its limit.
func TestTrustedProxiesSetting(t *testing.T) {
	for _, trust := range []bool{false, true} {
		e, _, _ := fullRoleWith(t, dbtest.Migrated(t, "sqlite"), testLicence(t, 0), func(c *config.Config) {
			c.Auth.RateLimitGlobal = 1
			if trust {
				c.Auth.TrustedProxies = "192.0.2.0/24" // httptest's peer address
			}
		})
		statuses := make([]int, 0, 2)
		for _, client := range []string{"198.51.100.7", "198.51.100.8"} {
			req := httptest.NewRequest("POST", "/api/v1/auth/login", strings.NewReader(`{"email":"x@example.com","password":"wrong password"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Forwarded-For", client)
			w := httptest.NewRecorder()
			e.ServeHTTP(w, req)
			statuses = append(statuses, w.Code)
		}
		limited := statuses[1] == http.StatusTooManyRequests
		if limited == trust {
			t.Errorf("trusted proxies %v: second client answered %v", trust, statuses)
		}
	}
}

// TestMaxBodyBytesSetting: a body over EDGEPLAT_API_MAX_BODY_BYTES is
// refused with 413; the default takes it.
func TestMaxBodyBytesSetting(t *testing.T) {
	body := `{"email":"a@example.com","password":"` + strings.Repeat("x", 4096) + `"}`
	for limit, want := range map[int]bool{2048: true, 1 << 20: false} {
		e, _, _ := fullRoleWith(t, dbtest.Migrated(t, "sqlite"), testLicence(t, 0), func(c *config.Config) { c.API.MaxBodyBytes = limit })
		r := call(t, e, "POST", "/api/v1/auth/login", "", body)
		if (r.status == http.StatusRequestEntityTooLarge) != want {
			t.Errorf("API.MaxBodyBytes %d, 4 KiB body: %d %s", limit, r.status, r.raw)
		}
	}
}

// TestClockWindowSettings: EDGEPLAT_API_CLOCK_MAX_FUTURE and _PAST set the
// window around the receive time outside which readings count as skewed.
func TestClockWindowSettings(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		api  config.API
		ts   time.Time
		want int
	}{
		{"future 1m, reading 2m ahead", config.API{ClockMaxFuture: time.Minute, ClockMaxPast: 24 * time.Hour}, now.Add(2 * time.Minute), 1},
		{"future 5m, reading 2m ahead", config.API{ClockMaxFuture: 5 * time.Minute, ClockMaxPast: 24 * time.Hour}, now.Add(2 * time.Minute), 0},
		{"past 1h, reading 2h old", config.API{ClockMaxFuture: 5 * time.Minute, ClockMaxPast: time.Hour}, now.Add(-2 * time.Hour), -1},
		{"past 24h, reading 2h old", config.API{ClockMaxFuture: 5 * time.Minute, ClockMaxPast: 24 * time.Hour}, now.Add(-2 * time.Hour), 0},
	}
	for _, tt := range tests {
		g := newClockGuard(tt.api, nil)
		if got := g.window.Check(tt.ts, now); got != tt.want {
			t.Errorf("%s: Check = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestAccountLinkSettingsIntegration: PUBLIC_URL starts the links mailed,
// PASSWORD_RESET_TOKEN_EXPIRY and INVITE_EXPIRY are how long they work.
func TestAccountLinkSettingsIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "sqlite")
	a := testAccess(t, rt.Backends{DB: d}, testTokens(t),
		func(c *config.Config) {
			c.Auth.PublicURL = "https://dash.plant.example/"
			c.Auth.ResetTokenExpiry = 17 * time.Minute
			c.Auth.InviteExpiry = 49 * time.Hour
		})
	mail := &mailbox{}
	a.mailer = mail
	e := mountAccess(t, a)
	tok := admin(t, e)
	call(t, e, "POST", "/api/v1/auth/password/reset", "", map[string]string{"email": "admin@example.com"})
	waitMail(t, mail, 1)
	if last := mail.last(); !strings.Contains(last, "https://dash.plant.example/reset-password?token=") || !strings.Contains(last, "within 17m0s") {
		t.Errorf("reset mail does not follow PUBLIC_URL and PASSWORD_RESET_TOKEN_EXPIRY:\n%s", last)
	}
	inv := call(t, e, "POST", "/api/v1/invites", tok, map[string]string{"email": "new@example.com", "role": "member"})
	if inv.status != http.StatusCreated {
		t.Fatalf("invite: %d %s", inv.status, inv.raw)
	}
	waitMail(t, mail, 2)
	if last := mail.last(); !strings.Contains(last, "https://dash.plant.example/accept-invite?token=") || !strings.Contains(last, "within 49h0m0s") {
		t.Errorf("invitation mail does not follow PUBLIC_URL and INVITE_EXPIRY:\n%s", last)
	}
	exp, err := time.Parse(time.RFC3339Nano, inv.str("expiresAt"))
	if err != nil || exp.Before(time.Now().Add(48*time.Hour)) || exp.After(time.Now().Add(50*time.Hour)) {
		t.Errorf("invitation expiresAt %q, want in 49h", inv.str("expiresAt"))
	}
}

func waitMail(t *testing.T, m *mailbox, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for m.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d mails sent, want %d", m.count(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (m *mailbox) last() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent[len(m.sent)-1]
}

// smtpServer is the smallest SMTP server go-mail talks to: it offers AUTH
// PLAIN and records the credentials, the envelope sender and the message.
type smtpServer struct {
	ln   net.Listener
	mu   sync.Mutex
	auth string
	from string
	data string
}

func newSMTPServer(t *testing.T) *smtpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *smtpServer) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	say := func(line string) { _, _ = c.Write([]byte(line + "\r\n")) }
	say("220 test ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		switch verb {
		case "EHLO", "HELO":
			say("250-test")
			say("250-8BITMIME")
			say("250 AUTH PLAIN")
		case "AUTH":
			f := strings.Fields(line)
			if len(f) == 3 {
				raw, _ := base64.StdEncoding.DecodeString(f[2])
				s.mu.Lock()
				s.auth = string(raw)
				s.mu.Unlock()
			}
			say("235 ok")
		case "MAIL":
			s.mu.Lock()
			s.from = line
			s.mu.Unlock()
			say("250 ok")
		case "RCPT", "RSET", "NOOP":
			say("250 ok")
		case "DATA":
			say("354 go on")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(l)
			}
			s.mu.Lock()
			s.data = b.String()
			s.mu.Unlock()
			say("250 queued")
		case "QUIT":
			say("221 bye")
			return
		default:
			say("502 no")
		}
	}
}

// TestSMTPSettings: SMTP_HOST and SMTP_PORT are where the API's mail goes,
// SMTP_USERNAME and SMTP_PASSWORD how it logs in, SMTP_FROM its sender.
func TestSMTPSettings(t *testing.T) {
	s := newSMTPServer(t)
	host, port, _ := net.SplitHostPort(s.ln.Addr().String())
	p, _ := strconv.Atoi(port)
	m := newMailer(config.Auth{SMTPHost: host, SMTPPort: p, SMTPUsername: "mailer", SMTPPassword: "m4il-pw", SMTPFrom: "plant7@example.com"})
	if m == nil {
		t.Fatal("no mailer with SMTP_HOST set")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := m.Send(ctx, "ops@example.com", "Reset your edgeplat password", "Open the link\n"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.auth != "\x00mailer\x00m4il-pw" {
		t.Errorf("AUTH PLAIN = %q, want SMTP_USERNAME and SMTP_PASSWORD", s.auth)
	}
	if !strings.Contains(s.from, "<plant7@example.com>") || !strings.Contains(s.data, "From: <plant7@example.com>") {
		t.Errorf("sender %q, message:\n%s\nwant SMTP_FROM", s.from, s.data)
	}
	if newMailer(config.Auth{SMTPPort: p}) != nil {
		t.Error("a mailer without SMTP_HOST")
	}
}

// TestListenSettings: serve-api listens on api.port (PORT) at api.bind.
func TestListenSettings(t *testing.T) {
	port := coretest.FreePort(t)
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	cfg.JWT.Secret = config.Secret(testSecret)
	cfg.API.Port, cfg.API.Bind = port, "127.0.0.1"
	streams, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	services, err := New(cfg, r, rt.Backends{DB: dbtest.Migrated(t, "sqlite"), Streams: streams}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := coretest.Listen(t, services), "127.0.0.1:"+strconv.Itoa(port); got != want {
		t.Errorf("listening on %s, want %s", got, want)
	}
}

// TestProvisioningBrokerURLSetting: PROVISIONING_MQTT_BROKER_URL is the
// broker registration hands to agents, in place of mqtt.broker_url.
func TestProvisioningBrokerURLSetting(t *testing.T) {
	for _, url := range []string{"", "ssl://mqtt.plant.example:8883"} {
		var mqttURL string
		e, _, _ := fullRoleWith(t, dbtest.Migrated(t, "sqlite"), testLicence(t, 0), func(c *config.Config) {
			c.BrokerAuth.BrokerURL = url
			mqttURL = c.MQTT.BrokerURL
		})
		tok := admin(t, e)
		dev := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": "press"})
		want := url
		if want == "" {
			want = mqttURL
		}
		if got := dev.str("mqtt", "brokerUrl"); got != want {
			t.Errorf("BrokerAuth.BrokerURL %q: agents are handed %q, want %q (%s)", url, got, want, dev.raw)
		}
	}
}

// TestAllowRegistrationSetting: ALLOW_REGISTRATION opens POST
// /auth/register to anyone; off (the default), it answers 403.
func TestAllowRegistrationSetting(t *testing.T) {
	for allow, want := range map[bool]int{true: http.StatusCreated, false: http.StatusForbidden} {
		e, _ := accessEngine(t, dbtest.Migrated(t, "sqlite"), testTokens(t), config.Licence{}, func(c *config.Config) { c.Auth.AllowRegistration = allow })
		r := call(t, e, "POST", "/api/v1/auth/register", "", map[string]string{"email": "x@example.com", "password": "correct horse battery"})
		if r.status != want {
			t.Errorf("AllowRegistration %v: register = %d %s, want %d", allow, r.status, r.raw, want)
		}
	}
}

// pipelineFromEnv builds the role's pipeline from the environment.
func pipelineFromEnv(t *testing.T) *pipeline {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	pipe, err := newPipeline(cfg, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pipe
}

// TestDedupTTLSetting: DEDUP_TTL is how long the pipeline asks the store
// to remember a msgId.
func TestDedupTTLSetting(t *testing.T) {
	t.Setenv("DEDUP_TTL", "90m")
	pipe := pipelineFromEnv(t)
	req, err := pipe.request(envelope.Topic{Tenant: "AAAAAAAAAAAAAAAAAAAAAA", Agent: "BBBBBBBBBBBBBBBBBBBBBA"},
		envelope.Batch{MsgID: "v2_Ab12Cd34_7", Messages: []telemetry.Message{{DeviceName: "plc1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if req.DedupTTL != 90*time.Minute {
		t.Errorf("dedup TTL %s, want DEDUP_TTL 90m", req.DedupTTL)
	}
}

// TestSpoolSettings: DISK_SPOOL_ENABLED gives the pipeline a spool in
// DISK_SPOOL_PATH capped at DISK_SPOOL_MAX_SIZE_MB; without it there is
// none.
func TestSpoolSettings(t *testing.T) {
	dir := t.TempDir()
	for _, on := range []bool{false, true} {
		t.Setenv("DISK_SPOOL_ENABLED", strconv.FormatBool(on))
		t.Setenv("DISK_SPOOL_PATH", dir)
		t.Setenv("DISK_SPOOL_MAX_SIZE_MB", "3")
		pipe := pipelineFromEnv(t)
		switch {
		case !on && pipe.spoolOp != nil:
			t.Errorf("spool %+v with DISK_SPOOL_ENABLED=false", *pipe.spoolOp)
		case on && (pipe.spoolOp == nil || pipe.spoolOp.Dir != dir || pipe.spoolOp.MaxBytes != 3<<20):
			t.Errorf("spool %+v, want %s capped at 3 MiB", pipe.spoolOp, dir)
		}
	}
}

// deviceRequests registers an agent and returns a call of a device
// route with its API key, answering the status: what the device rate
// limit counts.
func deviceRequests(t *testing.T, e http.Handler, tok string) func() int {
	t.Helper()
	dev := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": "press"})
	if dev.status != http.StatusCreated {
		t.Fatalf("register: %d %s", dev.status, dev.raw)
	}
	return func() int {
		req := httptest.NewRequest("GET", "/api/v1/device/"+dev.str("agentUuid")+"/state", nil)
		req.Header.Set("X-Device-API-Key", dev.str("apiKey"))
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		return w.Code
	}
}
