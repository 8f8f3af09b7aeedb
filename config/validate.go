package config

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// problem is one validation error and the key it is about, so Load can
// leave out problems of a key whose value did not even parse.
type problem struct {
	key string
	err error
}

// problems collects validation errors so they are all reported at once.
type problems []problem

func (p *problems) add(key, format string, args ...any) {
	k, ok := KeyByName(key)
	if !ok {
		panic("BUG: validation of unknown key " + key)
	}
	*p = append(*p, problem{key: key, err: fmt.Errorf("%s %s", k.Label(), fmt.Sprintf(format, args...))})
}

// errs returns the problems' errors, leaving out those about the keys in
// skip.
func (p problems) errs(skip map[string]bool) []error {
	var out []error
	for _, x := range p {
		if !skip[x.key] {
			out = append(out, x.err)
		}
	}
	return out
}

// rule records err, made by one of the exported rules below, which name
// their key themselves.
func (p *problems) rule(key string, err error) {
	if err != nil {
		*p = append(*p, problem{key: key, err: err})
	}
}

func (p *problems) port(key string, v int) {
	if v < 1 || v > 65535 {
		p.add(key, "must be 1..65535, got %d", v)
	}
}

func (p *problems) between(key string, v, lo, hi int) {
	if v < lo || v > hi {
		p.add(key, "must be %d..%d, got %d", lo, hi, v)
	}
}

func (p *problems) oneOf(key, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	p.add(key, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
}

func (p *problems) notEmpty(key, v string) {
	if strings.TrimSpace(v) == "" {
		p.add(key, "must not be empty")
	}
}

func (p *problems) bind(key, v string) {
	if net.ParseIP(v) == nil && v != "localhost" {
		p.add(key, "must be an IP address to listen on, got %q", v)
	}
}

// Validate checks the sections the role reads and returns every problem in
// one joined error.
func (c *Config) Validate() error {
	return errors.Join(c.validate().errs(nil)...)
}

func (c *Config) validate() problems {
	var p problems
	for _, section := range roleSections[c.Role] {
		switch section {
		case "log":
			p.oneOf("log.level", strings.ToLower(c.Log.Level), "debug", "info", "warn", "warning", "error")
			p.oneOf("log.format", c.Log.Format, "auto", "text", "json")
		case "lifecycle":
			if d := c.Lifecycle.ShutdownGrace; d <= 0 || d.Minutes() > 10 {
				p.add("lifecycle.shutdown_grace", "must be more than 0 and at most 10m, got %s", d)
			}
			if d := c.Lifecycle.HTTPBodyTimeout; d <= 0 || d.Minutes() > 60 {
				p.add("lifecycle.http_body_timeout", "must be more than 0 and at most 1h, got %s", d)
			}
		case "db":
			c.DB.validate(&p)
		case "streamstore":
			c.StreamStore.validate(&p)
		case "mqtt":
			c.MQTT.validate(&p)
		case "jwt":
			if c.JWT.Secret.IsSet() {
				p.rule("jwt.secret", ValidateJWTSecret(c.JWT.Secret.Reveal()))
			}
			if c.JWT.AccessTokenExpiry <= 0 {
				p.add("jwt.access_token_expiry", "must be positive, got %s", c.JWT.AccessTokenExpiry)
			}
			if c.JWT.RefreshTokenExpiry <= c.JWT.AccessTokenExpiry {
				p.add("jwt.refresh_token_expiry", "must be longer than jwt.access_token_expiry (%s), got %s", c.JWT.AccessTokenExpiry, c.JWT.RefreshTokenExpiry)
			}
		case "idp":
			if c.IDP.Enabled {
				p.notEmpty("idp.issuer", c.IDP.Issuer)
				p.notEmpty("idp.audience", c.IDP.Audience)
			}
		case "auth":
			c.Auth.validate(&p)
		case "broker_auth":
			if _, err := ParseCIDRList(c.BrokerAuth.AllowedNetworks); err != nil {
				p.add("broker_auth.allowed_networks", "%v", err)
			}
		case "api":
			p.port("api.port", c.API.Port)
			p.bind("api.bind", c.API.Bind)
			p.between("api.max_body_bytes", c.API.MaxBodyBytes, 1024, 1<<30)
			if d := c.API.DedupTTL; d < time.Second || d > 30*24*time.Hour {
				p.add("api.dedup_ttl", "must be between 1s and 30d, got %s", d)
			}
			p.rule("api.dedup_mode", ValidateDedupMode(c.API.DedupMode))
			p.oneOf("api.stream_entry_format", c.API.StreamEntryFormat, StreamEntryCompact, StreamEntryJSON)
			if d := c.API.ClockMaxFuture; d <= 0 {
				p.add("api.clock_max_future", "must be positive, got %s", d)
			}
			if d := c.API.ClockMaxPast; d <= 0 {
				p.add("api.clock_max_past", "must be positive, got %s", d)
			}
			if d := c.API.AgentOfflineAfter; d < time.Second || d > 24*time.Hour {
				p.add("api.agent_offline_after", "must be between 1s and 24h, got %s", d)
			}
			c.API.validateAI(&p)
			if d := c.API.EventsRetention; d != 0 && d < time.Hour {
				p.add("api.events_retention", "must be 0 (keep) or at least 1h, got %s", d)
			}
			if d := c.API.ReadingsRetention; d != 0 && d < 24*time.Hour {
				p.add("api.readings_retention", "must be 0 (keep) or at least 24h, got %s", d)
			}
			if d := c.API.RollupHourlyRetention; d != 0 && d < 24*time.Hour {
				p.add("api.rollup_hourly_retention", "must be 0 (keep) or at least 24h, got %s", d)
			}
			if d := c.API.RollupDailyRetention; d != 0 && d < 24*time.Hour {
				p.add("api.rollup_daily_retention", "must be 0 (keep) or at least 24h, got %s", d)
			}
			if d := c.API.ExportLinkTTL; d < time.Minute || d > 30*24*time.Hour {
				p.add("api.export_link_ttl", "must be between 1m and 30d, got %s", d)
			}
			if d := c.API.ExportRetention; d < time.Minute || d > 365*24*time.Hour {
				p.add("api.export_retention", "must be between 1m and 365d, got %s", d)
			}
		case "spool":
			if c.Spool.Enabled {
				p.notEmpty("spool.path", c.Spool.Path)
			}
			p.between("spool.max_size_mb", c.Spool.MaxSizeMB, 1, 1<<20)
		case "ingest":
			c.Ingest.validate(&p)
		case "agent":
			c.Agent.validate(&p)
		case "all_in_one":
			c.validateAllInOne(&p)
		}
	}
	return p
}

func (d DB) validate(p *problems) {
	p.oneOf("db.driver", d.Driver, "postgres", "sqlite")
	switch d.Driver {
	case "postgres":
		p.notEmpty("db.host", d.Host)
		p.port("db.port", d.Port)
		p.notEmpty("db.name", d.Name)
		p.notEmpty("db.user", d.User)
		p.oneOf("db.ssl", d.SSL, "disable", "prefer", "require", "verify-ca", "verify-full", "true", "false")
	case "sqlite":
		p.notEmpty("db.sqlite_path", d.SQLitePath)
	}
	p.between("db.pool_size", d.PoolSize, 1, 1000)
	p.between("db.statement_timeout_ms", d.StatementTimeoutMS, 0, 24*3600*1000)
}

func (s StreamStore) validate(p *problems) {
	p.oneOf("streamstore.driver", s.Driver, "redis", "memory")
	if s.Driver == "redis" {
		p.notEmpty("streamstore.host", s.Host)
		p.port("streamstore.port", s.Port)
		p.between("streamstore.db", s.DB, 0, 1<<16)
	}
	p.between("streamstore.ingestion_stream_maxlen", s.IngestionStreamMaxLen, 1, 1<<30)
}

func (m MQTT) validate(p *problems) {
	u, err := url.Parse(m.BrokerURL)
	switch {
	case err != nil || u.Host == "":
		p.add("mqtt.broker_url", "must be a URL such as tcp://host:1883, got %q", m.BrokerURL)
	default:
		p.oneOf("mqtt.broker_url", u.Scheme, "tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss")
	}
	p.between("mqtt.qos", m.QoS, 0, 2)
	p.between("mqtt.max_reconnect_attempts", m.MaxReconnectAttempts, 0, 1<<20)
	p.between("mqtt.fatal_recovery_cooldown_ms", m.FatalRecoveryCooldownMS, 0, 24*3600*1000)
	p.between("mqtt.auth_cache_ttl_seconds", m.AuthCacheTTLSeconds, 0, 7*24*3600)
	if (m.CertFile == "") != (m.KeyFile == "") {
		p.add("mqtt.cert_file", "and %s must be set together", Label("mqtt.key_file"))
	}
	if strings.ContainsAny(m.SharedSubscriptionGroup, "/+#") {
		p.add("mqtt.shared_subscription_group", "must not contain /, + or #, got %q", m.SharedSubscriptionGroup)
	}
}

func (in Ingest) validate(p *problems) {
	p.port("ingest.port", in.Port)
	p.bind("ingest.bind", in.Bind)
	p.between("ingest.worker_count", in.WorkerCount, 1, 256)
	p.between("ingest.batch_size", in.BatchSize, 1, 100000)
	p.between("ingest.max_retries", in.MaxRetries, 0, 100)
	p.between("ingest.flush_interval_ms", in.FlushIntervalMS, 0, 600000)
	p.between("ingest.reclaim_idle_ms", in.ReclaimIdleMS, 1000, 24*3600*1000)
	p.oneOf("ingest.insert_mode", in.InsertMode, "copy", "insert", "realtime")
	p.between("ingest.copy_min_rows", in.CopyMinRows, 1, 10000000)
	p.between("ingest.realtime_max_rows", in.RealtimeMaxRows, 1, 100000)
	p.between("ingest.realtime_rows_per_insert", in.RealtimeRowsPerInsert, 1, 10000)
	p.between("ingest.db_saturation_high_watermark_pct", in.DBSaturationHighWatermarkPct, 1, 100)
	p.between("ingest.db_backpressure_sleep_ms", in.DBBackpressureSleepMS, 0, 60000)
	p.between("ingest.write_concurrency", in.WriteConcurrency, 0, 256)
	p.between("ingest.memory_limit_mb", in.MemoryLimitMB, 0, 1<<20)
	a := in.Autoscale
	p.between("ingest.autoscale.min_workers", a.MinWorkers, 1, 256)
	p.between("ingest.autoscale.max_workers", a.MaxWorkers, 1, 256)
	if a.MinWorkers > a.MaxWorkers {
		p.add("ingest.autoscale.min_workers", "must not exceed ingest.autoscale.max_workers (%d), got %d", a.MaxWorkers, a.MinWorkers)
	}
	p.between("ingest.autoscale.lag_target_ms", a.LagTargetMS, 1, 3600000)
	p.between("ingest.autoscale.lag_scale_up_ms", a.LagScaleUpMS, 1, 3600000)
	p.between("ingest.autoscale.lag_critical_ms", a.LagCriticalMS, 1, 3600000)
	p.between("ingest.autoscale.scale_down_stable_checks", a.ScaleDownStableChecks, 1, 10000)
	p.between("ingest.autoscale.cooldown_ms", a.CooldownMS, 0, 3600000)
	p.between("ingest.autoscale.db_block_pct", a.DBBlockPct, 1, 100)
}

func (a Agent) validate(p *problems) {
	p.port("agent.port", a.Port)
	p.oneOf("agent.security_mode", a.SecurityMode, "LOCALHOST_ONLY", "API_KEY")
	if a.SecurityMode == "API_KEY" && !a.APIKey.IsSet() {
		p.add("agent.api_key", "must be set when agent.security_mode is API_KEY")
	}
	if a.EnableAuth && !a.APIKey.IsSet() {
		p.add("agent.api_key", "must be set when agent.enable_auth is true")
	}
	// Key mode binds every interface, so the key is all that stands
	// between the network and the device: a short one falls to guessing.
	if n := utf8.RuneCountInString(a.APIKey.Reveal()); a.KeyMode() && a.APIKey.IsSet() && n < MinAgentAPIKeyLen {
		p.add("agent.api_key", "must be at least %d characters when the agent API listens beyond loopback (key mode binds 0.0.0.0), got %d", MinAgentAPIKeyLen, n)
	}
	p.notEmpty("agent.data_dir", a.DataDir)
	for r := range strings.SplitSeq(a.AppsVolumeRoots, ",") {
		if r = strings.TrimSpace(r); r != "" && !filepath.IsAbs(r) {
			p.add("agent.apps_volume_roots", "must be absolute paths, got %q", r)
		}
	}
	if h := a.DockerHost; h != "" && !strings.HasPrefix(h, "unix:///") && !strings.HasPrefix(h, "tcp://") {
		p.add("agent.docker_host", "must be unix:///path or tcp://host:port, got %q", h)
	}
	if a.AdminUsername != "" && len(a.AdminPassword.Reveal()) < MinAgentPasswordLen {
		p.add("agent.admin_password", "must be at least %d characters when agent.admin_username is set", MinAgentPasswordLen)
	}
	if len(a.AdminPassword.Reveal()) > 72 {
		p.add("agent.admin_password", "must be at most 72 bytes (the most a bcrypt hash takes)")
	}
}

// MinAgentPasswordLen is the shortest password of an agent admin user, set
// through agent.admin_password or the agent's admin API.
const MinAgentPasswordLen = 6

// MinJWTSecretLen is the shortest jwt.secret accepted: HS256 with a
// shorter key is open to offline guessing of the key from one token.
const MinJWTSecretLen = 32

// ValidateJWTSecret is the rule for jwt.secret. Load applies it; code that
// builds a config.JWT itself (tests, the token command) calls it too, so
// the rule is written once.
func ValidateJWTSecret(secret string) error {
	if len(secret) < MinJWTSecretLen {
		return fmt.Errorf("%s must be at least %d bytes, got %d", Label("jwt.secret"), MinJWTSecretLen, len(secret))
	}
	return nil
}

// ValidateDedupMode is the rule for api.dedup_mode, for Load and for code
// that builds a Config itself.
func ValidateDedupMode(mode string) error {
	if mode != DedupModeKey && mode != DedupModeSequence {
		return fmt.Errorf("%s must be one of %s, %s, got %q", Label("api.dedup_mode"), DedupModeKey, DedupModeSequence, mode)
	}
	return nil
}

// MinAgentAPIKeyLen is the shortest agent.api_key accepted in key mode;
// `openssl rand -hex 24` (docs/agent.md) gives 48.
const MinAgentAPIKeyLen = 16

// KeyMode reports whether the agent API requires X-Api-Key: API_KEY mode,
// or ENABLE_AUTH with a key.
func (a Agent) KeyMode() bool {
	return a.SecurityMode == "API_KEY" || (a.EnableAuth && a.APIKey.IsSet())
}

func (c *Config) validateAllInOne(p *problems) {
	p.notEmpty("all_in_one.data_dir", c.AllInOne.DataDir)
	p.port("all_in_one.mqtt_port", c.AllInOne.MQTTPort)
	p.bind("all_in_one.mqtt_bind", c.AllInOne.MQTTBind)
	p.between("all_in_one.mqtt_max_packet_bytes", c.AllInOne.MQTTMaxPacketBytes, 1024, 256<<20)
	p.between("all_in_one.mqtt_connect_timeout_seconds", c.AllInOne.MQTTConnectTimeoutSeconds, 1, 3600)
	p.between("all_in_one.mqtt_receive_maximum", c.AllInOne.MQTTReceiveMaximum, 1, 65535)
	p.between("all_in_one.mqtt_max_inflight", c.AllInOne.MQTTMaxInflight, 1, 65535)
	p.between("all_in_one.mqtt_max_queued", c.AllInOne.MQTTMaxQueued, 1, 1<<20)
	p.between("all_in_one.mqtt_session_expiry_seconds", c.AllInOne.MQTTSessionExpirySeconds, 1, 1<<31-1)
	seen := map[int]string{}
	for _, kp := range []struct {
		key  string
		port int
	}{{"api.port", c.API.Port}, {"ingest.port", c.Ingest.Port}, {"agent.port", c.Agent.Port}, {"all_in_one.mqtt_port", c.AllInOne.MQTTPort}} {
		if other, dup := seen[kp.port]; dup {
			p.add(kp.key, "must differ from %s, both are %d", other, kp.port)
		}
		seen[kp.port] = kp.key
	}
	if c.AllInOne.AutoProvision {
		// The Cloud API checks these too, but only once the process is up:
		// a typo found here stops start-up instead of leaving a warning in
		// the log and an agent that never provisions.
		if a, err := mail.ParseAddress(c.AllInOne.AdminEmail); err != nil || a.Address != c.AllInOne.AdminEmail || a.Name != "" {
			p.add("all_in_one.admin_email", "must be an e-mail address, got %q", c.AllInOne.AdminEmail)
		}
		if pw := c.AllInOne.AdminPassword.Reveal(); pw != "" && (utf8.RuneCountInString(pw) < 8 || len(pw) > 256) {
			p.add("all_in_one.admin_password", "must be 8 characters to 256 bytes long, got %d characters", utf8.RuneCountInString(pw))
		}
	}
	if c.DB.Driver != "sqlite" {
		p.add("db.driver", "must be sqlite in all-in-one, got %q", c.DB.Driver)
	}
	if c.StreamStore.Driver != "memory" {
		p.add("streamstore.driver", "must be memory in all-in-one, got %q", c.StreamStore.Driver)
	}
}

func (a Auth) validate(p *problems) {
	if a.PublicURL != "" {
		if u, err := url.Parse(a.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("auth.public_url", "must be an http or https URL, got %q", a.PublicURL)
		}
	}
	p.port("auth.smtp_port", a.SMTPPort)
	if a.ResetTokenExpiry < time.Minute || a.ResetTokenExpiry > 7*24*time.Hour {
		p.add("auth.reset_token_expiry", "must be between 1m and 7d, got %s", a.ResetTokenExpiry)
	}
	if a.InviteExpiry < time.Hour || a.InviteExpiry > 90*24*time.Hour {
		p.add("auth.invite_expiry", "must be between 1h and 90d, got %s", a.InviteExpiry)
	}
	if _, err := ParseCIDRList(a.TrustedProxies); err != nil {
		p.add("auth.trusted_proxies", "%v", err)
	}
	p.between("auth.rate_limit_global", a.RateLimitGlobal, 0, 1<<30)
	p.between("auth.rate_limit_auth", a.RateLimitAuth, 0, 1<<30)
	p.between("auth.rate_limit_device", a.RateLimitDevice, 0, 1<<30)
	p.between("auth.rate_limit_admin", a.RateLimitAdmin, 0, 1<<30)
}

// ParseCIDRList parses a comma-separated list of CIDRs or bare addresses
// (a bare address is a network of one).
func ParseCIDRList(s string) ([]*net.IPNet, error) {
	var nets []*net.IPNet
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			ip := net.ParseIP(f)
			if ip == nil {
				return nil, fmt.Errorf("%q is neither an IP address nor a CIDR", f)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			nets = append(nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR", f)
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// validateAI checks the AI assistant's settings. The timeout's floor is
// low so that tests can see a provider time out without waiting.
func (a API) validateAI(p *problems) {
	if a.AIProviderURL != "" {
		u, err := url.Parse(a.AIProviderURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("api.ai_provider_url", "must be an http or https URL, got %q", a.AIProviderURL)
		}
		p.notEmpty("api.ai_model", a.AIModel)
	}
	if d := a.AITimeout; d < 100*time.Millisecond || d > 10*time.Minute {
		p.add("api.ai_timeout", "must be between 100ms and 10m, got %s", d)
	}
	p.between("api.ai_token_budget", a.AITokenBudget, 100, 10_000_000)
	p.between("api.ai_rate_limit", a.AIRateLimit, 0, 1_000_000)
}
