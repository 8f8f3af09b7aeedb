package config

import "strings"

// Kind is the type a key's value is parsed as. Parsing is done here, not by
// viper's weak typing, so a bad value is reported with its key and env name.
type Kind int

// Kinds of configuration values.
const (
	String Kind = iota
	Int
	Bool
	Float
	Duration // Go duration ("90s", "15m") or whole days ("7d")
)

func (k Kind) String() string {
	return [...]string{"string", "integer", "boolean", "number", "duration"}[k]
}

// Role names, as the subcommands spell them.
const (
	RoleAPI      = "serve-api"
	RoleIngest   = "ingest"
	RoleAgent    = "agent"
	RoleAllInOne = "all-in-one"
)

// Key is one configuration setting: its dotted name (the YAML path), its
// environment variable, its built-in default and its documentation. Keys is
// the single source for defaults, env binding, validation messages and
// docs/configuration.md.
type Key struct {
	Name string
	// Env is the primary environment variable; Aliases are read when Env is
	// unset (some settings have long had two names).
	Env     string
	Aliases []string
	Kind    Kind
	Default any
	// RoleDefaults replaces Default for the listed roles: all-in-one runs on
	// embedded components, and the API and ingest pools differ in size.
	RoleDefaults map[string]any
	// EnvRoles restricts the env binding to these roles. PORT means the API
	// port to serve-api and the ingest port to ingest; all-in-one serves both,
	// so it reads neither from PORT.
	EnvRoles []string
	Secret   bool
	Doc      string
	// EmptyEnv makes a variable that is set but empty count as the empty
	// value; otherwise it counts as unset (viper's rule). For keys whose
	// empty value means "none" rather than "the default".
	EmptyEnv bool
}

func init() {
	for i := range Keys {
		if Keys[i].Env == "" {
			Keys[i].Env = "EDGEPLAT_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(Keys[i].Name))
		}
	}
}

// Keys lists every setting. Keys without a bare environment name read
// EDGEPLAT_<KEY> (db.sqlite_path: EDGEPLAT_DB_SQLITE_PATH). Sections (the part of Name before the first dot)
// map to the typed structs in config.go.
var Keys = []Key{
	// log
	{Name: "log.level", Kind: String, Default: "info", Doc: "Log level: debug, info, warn or error."},
	{Name: "log.format", Kind: String, Default: "auto", Doc: "Log format: auto (text on a terminal, JSON otherwise), text or json."},

	// lifecycle
	{Name: "lifecycle.shutdown_grace", Kind: Duration, Default: "10s", Doc: "How long services may take to stop after SIGINT/SIGTERM before the process exits anyway."},
	{Name: "lifecycle.http_body_timeout", Kind: Duration, Default: "30s", Doc: "How long a request body may take to arrive on every role's HTTP server (from the end of its headers); a slower body is answered 408. Responses, such as the live event stream, are not bounded by it."},

	// db
	{Name: "db.driver", Kind: String, Default: "postgres", RoleDefaults: map[string]any{RoleAllInOne: "sqlite"}, Doc: "Cloud database: postgres, or sqlite for a single node."},
	{Name: "db.host", Env: "DB_HOST", Kind: String, Default: "localhost", Doc: "PostgreSQL host."},
	{Name: "db.port", Env: "DB_PORT", Kind: Int, Default: 5432, Doc: "PostgreSQL port."},
	{Name: "db.name", Env: "DB_NAME", Kind: String, Default: "edgeplat", Doc: "PostgreSQL database name."},
	{Name: "db.user", Env: "DB_USER", Kind: String, Default: "edgeplat", Doc: "PostgreSQL user."},
	{Name: "db.password", Env: "DB_PASSWORD", Kind: String, Default: "", Secret: true, Doc: "PostgreSQL password."},
	{Name: "db.ssl", Env: "DB_SSL", Kind: String, Default: "disable", Doc: "PostgreSQL TLS mode: disable, prefer, require, verify-ca or verify-full (true means require, false disable)."},
	{Name: "db.pool_size", Env: "DB_POOL_SIZE", Kind: Int, Default: 20, RoleDefaults: map[string]any{RoleIngest: 50}, Doc: "Maximum open database connections (API 20, ingest 50; the ingestion profile sets its own)."},
	{Name: "db.statement_timeout_ms", Env: "DB_STATEMENT_TIMEOUT_MS", Kind: Int, Default: 45000, Doc: "Statement timeout in milliseconds; 0 disables."},
	{Name: "db.jit", Env: "DB_JIT", Kind: Bool, Default: false, Doc: "PostgreSQL JIT compilation of this process's statements; false turns it off for its connections, true leaves the server's setting. Off by default: the planner estimates the readings reads far above what they cost, and compiling took longer than running them (docs/database.md)."},
	{Name: "db.sqlite_path", Kind: String, Default: "edgeplat.db", Doc: "SQLite file when db.driver is sqlite; all-in-one puts it under --data-dir."},

	// streamstore
	{Name: "streamstore.driver", Kind: String, Default: "redis", RoleDefaults: map[string]any{RoleAllInOne: "memory"}, Doc: "Stream store: redis, or memory (in-process, single node)."},
	{Name: "streamstore.host", Env: "STREAMSTORE_HOST", Kind: String, Default: "localhost", Doc: "Stream store host; a comma-separated list of seed nodes selects Redis Cluster."},
	{Name: "streamstore.port", Env: "STREAMSTORE_PORT", Kind: Int, Default: 6379, Doc: "Stream store port."},
	{Name: "streamstore.password", Env: "STREAMSTORE_PASSWORD", Kind: String, Default: "", Secret: true, Doc: "Stream store password."},
	{Name: "streamstore.db", Env: "STREAMSTORE_DB", Kind: Int, Default: 0, Doc: "Stream store logical database number."},
	{Name: "streamstore.tls", Kind: Bool, Default: false, Doc: "Connect to the stream store over TLS."},
	{Name: "streamstore.ingestion_stream_maxlen", Env: "STREAMSTORE_INGESTION_STREAM_MAXLEN", Kind: Int, Default: 10000, Doc: "Length at which an ingestion stream counts as full (back-pressure, never trimming unprocessed entries)."},

	// mqtt: the settings without a long-standing name take the
	// MQTT_ names operators expect next to MQTT_BROKER_URL; their earlier
	// EDGEPLAT_MQTT_ names stay as aliases.
	{Name: "mqtt.broker_url", Env: "MQTT_BROKER_URL", Kind: String, Default: "tcp://localhost:1883", Doc: "Broker URL: tcp://, ssl:// or tls://, ws:// or wss://. all-in-one points it at its embedded broker."},
	{Name: "mqtt.username", Env: "MQTT_USERNAME", Aliases: []string{"EDGEPLAT_MQTT_USERNAME"}, Kind: String, Default: "", Doc: "Broker username."},
	{Name: "mqtt.password", Env: "MQTT_PASSWORD", Aliases: []string{"EDGEPLAT_MQTT_PASSWORD"}, Kind: String, Default: "", Secret: true, Doc: "Broker password."},
	{Name: "mqtt.client_id", Env: "MQTT_CLIENT_ID", Aliases: []string{"EDGEPLAT_MQTT_CLIENT_ID"}, Kind: String, Default: "", Doc: "Client id; empty derives a stable one so the persistent session survives restarts: serve-api's from the installation id in its database and the host name (a database in use before installation ids keeps the host-name id), other roles' from the host name."},
	{Name: "mqtt.qos", Env: "MQTT_QOS", Kind: Int, Default: 1, Doc: "QoS for subscriptions and publishes: 0, 1 or 2."},
	{Name: "mqtt.shared_subscription_group", Env: "MQTT_SHARED_SUBSCRIPTION_GROUP", Kind: String, Default: "", Doc: "Subscribe through $share/<group>/ so API replicas split the telemetry load."},
	{Name: "mqtt.max_reconnect_attempts", Env: "MQTT_MAX_RECONNECT_ATTEMPTS", Kind: Int, Default: 20, Doc: "Consecutive failed reconnects before the client turns fatal; 0 is unlimited."},
	{Name: "mqtt.fatal_recovery_cooldown_ms", Env: "MQTT_FATAL_RECOVERY_COOLDOWN_MS", Kind: Int, Default: 60000, Doc: "Wait in the fatal state before reconnecting again, in milliseconds."},
	{Name: "mqtt.auth_cache_ttl_seconds", Env: "MQTT_AUTH_CACHE_TTL_SECONDS", Kind: Int, Default: 300, Doc: "How long broker auth-callback answers are cached, in seconds."},
	{Name: "mqtt.ca_file", Env: "MQTT_CA_FILE", Aliases: []string{"EDGEPLAT_MQTT_CA_FILE"}, Kind: String, Default: "", Doc: "PEM file of CAs trusted for the broker's certificate."},
	{Name: "mqtt.cert_file", Env: "MQTT_CERT_FILE", Aliases: []string{"EDGEPLAT_MQTT_CERT_FILE"}, Kind: String, Default: "", Doc: "PEM client certificate for mutual TLS."},
	{Name: "mqtt.key_file", Env: "MQTT_KEY_FILE", Aliases: []string{"EDGEPLAT_MQTT_KEY_FILE"}, Kind: String, Default: "", Doc: "PEM private key of the client certificate."},

	// jwt
	{Name: "jwt.secret", Env: "JWT_SECRET", Kind: String, Default: "", Secret: true, Doc: "HS256 signing secret, at least 32 bytes."},
	{Name: "jwt.private_key", Env: "JWT_PRIVATE_KEY", Kind: String, Default: "", Secret: true, Doc: "RS256 private key (PEM text or file path); selects RS256."},
	{Name: "jwt.public_key", Env: "JWT_PUBLIC_KEY", Kind: String, Default: "", Doc: "RS256 public key (PEM text or file path)."},
	{Name: "jwt.access_token_expiry", Env: "JWT_ACCESS_TOKEN_EXPIRY", Kind: Duration, Default: "15m", Doc: "Access token lifetime."},
	{Name: "jwt.refresh_token_expiry", Env: "JWT_REFRESH_TOKEN_EXPIRY", Kind: Duration, Default: "7d", Doc: "Refresh token lifetime."},

	// idp
	{Name: "idp.enabled", Env: "IDP_ENABLED", Kind: Bool, Default: false, Doc: "Accept identity-provider tokens and enable /auth/idp-exchange."},
	{Name: "idp.domain", Env: "IDP_DOMAIN", Kind: String, Default: "", Doc: "Identity provider domain."},
	{Name: "idp.audience", Env: "IDP_AUDIENCE", Kind: String, Default: "", Doc: "Expected audience of identity-provider tokens."},
	{Name: "idp.issuer", Env: "IDP_ISSUER", Kind: String, Default: "", Doc: "Expected issuer of identity-provider tokens."},

	// auth
	{Name: "auth.allow_registration", Env: "ALLOW_REGISTRATION", Kind: Bool, Default: false, Doc: "Let anyone create a tenant with POST /auth/register (each becomes its admin). Off by default: tenants share the installation's licence and agent limit, so opening sign-up is the operator's decision."},
	{Name: "auth.public_url", Env: "PUBLIC_URL", Kind: String, Default: "", Doc: "Base URL of the dashboard, used in password-reset and invitation links; without it the link is relative."},
	{Name: "auth.smtp_host", Env: "SMTP_HOST", Kind: String, Default: "", Doc: "SMTP server for password-reset and invitation mail; without it the link is logged instead."},
	{Name: "auth.smtp_port", Env: "SMTP_PORT", Kind: Int, Default: 587, Doc: "SMTP server port (STARTTLS is used when offered)."},
	{Name: "auth.smtp_username", Env: "SMTP_USERNAME", Kind: String, Default: "", Doc: "SMTP user name; empty for no authentication."},
	{Name: "auth.smtp_password", Env: "SMTP_PASSWORD", Kind: String, Default: "", Secret: true, Doc: "SMTP password."},
	{Name: "auth.smtp_from", Env: "SMTP_FROM", Kind: String, Default: "edgeplat@localhost", Doc: "Sender address of the mail the API sends."},
	{Name: "auth.reset_token_expiry", Env: "PASSWORD_RESET_TOKEN_EXPIRY", Kind: Duration, Default: "1h", Doc: "Lifetime of a password-reset link."},
	{Name: "auth.invite_expiry", Env: "INVITE_EXPIRY", Kind: Duration, Default: "7d", Doc: "Lifetime of an invitation."},
	{Name: "auth.trusted_proxies", Env: "TRUSTED_PROXIES", Kind: String, Default: "", Doc: "Comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For is believed (rate limits, audit); empty trusts none."},
	{Name: "auth.rate_limit_global", Env: "RATE_LIMIT_GLOBAL_PER_MIN", Kind: Int, Default: 1000, Doc: "Requests per minute per credential or client IP, all routes; 0 disables."},
	{Name: "auth.rate_limit_auth", Env: "RATE_LIMIT_AUTH_PER_MIN", Kind: Int, Default: 10, Doc: "Requests per minute per client IP to the /auth endpoints, and failed logins per account; 0 disables."},
	{Name: "auth.rate_limit_device", Env: "RATE_LIMIT_DEVICE_PER_MIN", Kind: Int, Default: 10000, Doc: "Requests per minute per device API key; 0 disables."},
	{Name: "auth.rate_limit_admin", Env: "RATE_LIMIT_ADMIN_PER_MIN", Kind: Int, Default: 100, Doc: "Requests per minute per admin to the admin-only routes; 0 disables."},

	// broker_auth
	{Name: "broker_auth.secret", Env: "BROKER_AUTH_SECRET", Kind: String, Default: "", Secret: true, Doc: "Shared secret the broker sends (X-Broker-Auth-Secret or Authorization: Bearer) on the /broker-auth callbacks; calls without it must come from broker_auth.allowed_networks."},
	{Name: "broker_auth.allowed_networks", Env: "BROKER_AUTH_ALLOWED_NETWORKS", Kind: String, Default: "127.0.0.1/32,::1/128", EmptyEnv: true, Doc: "Comma-separated CIDRs from which the /broker-auth callbacks are accepted without the secret; empty (also a variable set to empty) accepts none."},
	{Name: "broker_auth.broker_url", Env: "PROVISIONING_MQTT_BROKER_URL", Kind: String, Default: "", Doc: "Broker URL handed to agents at registration; empty means mqtt.broker_url."},

	// licence
	{Name: "licence.key", Env: "LICENSE_KEY", Kind: String, Default: "", Secret: true, Doc: "The licence: a signed JWT, as text or a file path. Without a valid one the API runs restricted: existing agents keep reporting, registrations and premium routes answer 403."},
	{Name: "licence.public_key", Env: "LICENSE_PUBLIC_KEY", Kind: String, Default: "", Doc: "Public key (PEM text or file path, Ed25519 or RSA) licences are verified with."},

	// api
	{Name: "api.port", Env: "PORT", EnvRoles: []string{RoleAPI}, Kind: Int, Default: 3002, Doc: "Cloud API HTTP port (PORT is read by serve-api only)."},
	{Name: "api.bind", Kind: String, Default: "0.0.0.0", RoleDefaults: map[string]any{RoleAllInOne: "127.0.0.1"}, Doc: "Address the Cloud API listens on."},
	{Name: "api.dedup_ttl", Env: "DEDUP_TTL", Kind: Duration, Default: "24h", Doc: "How long a telemetry msgId is remembered to drop repeats (scoped by tenant and agent); in sequence mode, counted from the last message of its block."},
	{Name: "api.dedup_mode", Env: "DEDUP_MODE", Kind: String, Default: "key", Doc: "How msgIds are remembered: key (one Redis key per msgId, about 177 bytes each) or sequence (one bit per msgId in a bitmap per agent, key id and block of 65,536 sequence numbers: at most 8 KiB per block, exact, and a late replay of an older sequence is never taken for a repeat). Every API replica must use the same mode; see docs/stream-contract.md."},
	{Name: "api.stream_entry_format", Kind: String, Default: "compact", Doc: "Form of the ingestion stream entries serve-api writes: compact (binary, about a quarter of the bytes, decoded by ingest without parsing text) or json (for operators who read streams by hand). Ingest reads both; ingest versions before the compact form read json only, so upgrade ingest first; see docs/stream-contract.md."},
	{Name: "api.max_body_bytes", Kind: Int, Default: 1 << 20, Doc: "Largest accepted request body, in bytes."},
	{Name: "api.clock_max_future", Kind: Duration, Default: "5m", Doc: "How far ahead of the receive time a reading's timestamp may be: later readings (an agent clock running ahead) are refused and counted; see docs/readings-api.md."},
	{Name: "api.clock_max_past", Kind: Duration, Default: "24h", Doc: "Readings older than this at receipt are accepted (a backlog replay) but counted, as a sign of an agent clock running behind or a long outage; see docs/readings-api.md."},
	{Name: "api.agent_offline_after", Kind: Duration, Default: "30s", Doc: "Silence after which an agent shows offline: no state report, system metrics or telemetry for this long (default 3 x the agents' 10 s report interval); see docs/agents-api.md."},
	{Name: "api.delivery_receipts", Kind: Bool, Default: true, Doc: "Send each agent delivery receipts for the telemetry the stream store holds, at most one per agent per second; agents keep what they sent until its receipt (docs/agent-delivery.md). Off: agents that expect receipts send their records again after their wait, and the cloud de-duplicates them."},
	{Name: "api.ai_provider_url", Kind: String, Default: "", Doc: "Base URL of an OpenAI-compatible chat-completions API for the AI assistant (POST <url>/chat/completions; a URL ending in /chat/completions is used as it is). Empty: POST /ai/chat answers 503 ai_not_configured and dashboard suggestions stay deterministic; see docs/ai-assistant.md."},
	{Name: "api.ai_model", Kind: String, Default: "", Doc: "Model name sent to the AI provider; required with api.ai_provider_url."},
	{Name: "api.ai_api_key", Kind: String, Default: "", Secret: true, Doc: "Bearer key sent to the AI provider; empty sends none."},
	{Name: "api.ai_timeout", Kind: Duration, Default: "30s", Doc: "Longest wait for one AI provider call; past it the request answers 504 ai_provider_timeout."},
	{Name: "api.ai_token_budget", Kind: Int, Default: 20000, Doc: "Tokens one AI request may spend across its provider calls, as the provider counts them; spent before an answer: 422 ai_budget_exhausted."},
	{Name: "api.ai_rate_limit", Kind: Int, Default: 30, Doc: "AI requests per minute per tenant (chat and suggestions together); 0 disables."},
	{Name: "api.events_retention", Kind: Duration, Default: "2160h", Doc: "How long the event log keeps agents' state snapshots and audit records (GET /api/v1/audit/events reads the same records): older ones are deleted hourly, each agent's newest snapshot excepted; 0 keeps them. Default 90 days; see docs/events.md."},
	{Name: "api.readings_retention", Kind: Duration, Default: "720h", Doc: "How long raw readings are kept. serve-api checks hourly: on PostgreSQL it drops each daily partition of readings (or TimescaleDB chunk) entirely older than this and keeps partitions made 7 days ahead; on SQLite it deletes older rows in batches of 5000. 0 keeps everything; otherwise at least 24h. Default 30 days; see docs/database.md."},
	{Name: "api.rollup_hourly_retention", Kind: Duration, Default: "8760h", Doc: "How long the hourly rollups of readings are kept (hourly statistics and hour-step queries older than raw retention read them); an hour goes only once its day is rolled up. 0 keeps them; otherwise at least 24h. Default 365 days; see docs/readings-api.md, section Rollups."},
	{Name: "api.rollup_daily_retention", Kind: Duration, Default: "0s", Doc: "How long the daily rollups of readings are kept; 0 (the default) keeps them forever, otherwise at least 24h. See docs/readings-api.md, section Rollups."},
	{Name: "api.grafana_url", Env: "GRAFANA_URL", Kind: String, Default: "", Doc: "Base URL of the Grafana whose dashboards and alert rules the external-dashboards routes list and change (docs/external-dashboards.md); empty: those routes answer 503."},
	{Name: "api.grafana_token", Env: "GRAFANA_TOKEN", Kind: String, Default: "", Secret: true, Doc: "Grafana service account token the external-dashboards routes send as a bearer token; it needs the rights to search dashboards and to read and write alert rules."},
	{Name: "api.export_dir", Kind: String, Default: "", Doc: "Directory of the background exports' files (docs/export.md), one folder per tenant; API replicas must share it. Empty: edgeplat-export in the system's temporary directory."},
	{Name: "api.export_link_ttl", Kind: Duration, Default: "1h", Doc: "How long an export's download link works after GET /export/jobs/:id hands it out (never past the file's retention)."},
	{Name: "api.export_retention", Kind: Duration, Default: "24h", Doc: "How long a finished export job and its file are kept; then both are deleted."},

	// spool
	{Name: "spool.enabled", Env: "DISK_SPOOL_ENABLED", Kind: Bool, Default: false, Doc: "Spool telemetry to disk while the stream store or database is failing."},
	{Name: "spool.path", Env: "DISK_SPOOL_PATH", Kind: String, Default: "/tmp/service-spool", Doc: "Spool directory."},
	{Name: "spool.max_size_mb", Env: "DISK_SPOOL_MAX_SIZE_MB", Kind: Int, Default: 500, Doc: "Spool size cap in MB; the oldest file is deleted past it."},

	// ingest
	{Name: "ingest.port", Env: "PORT", EnvRoles: []string{RoleIngest}, Kind: Int, Default: 3003, Doc: "Ingestion service HTTP port for /health and /metrics (PORT is read by ingest only)."},
	{Name: "ingest.bind", Kind: String, Default: "0.0.0.0", RoleDefaults: map[string]any{RoleAllInOne: "127.0.0.1"}, Doc: "Address the ingestion service listens on."},
	{Name: "ingest.profile", Env: "INGESTION_PROFILE", Kind: String, Default: "balanced", Doc: "Ingestion profile: batch, balanced, streaming, benchmark, hp, or none for the plain defaults."},
	{Name: "ingest.worker_count", Env: "WORKER_COUNT", Kind: Int, Default: 2, Doc: "Initial number of stream workers."},
	{Name: "ingest.batch_size", Env: "BATCH_SIZE", Kind: Int, Default: 100, Doc: "Stream entries read per batch."},
	{Name: "ingest.max_retries", Env: "MAX_RETRIES", Kind: Int, Default: 3, Doc: "Insert retries of a message the database refuses for its content before it goes to the dead-letter stream. An unavailable database never counts."},
	{Name: "ingest.flush_interval_ms", Env: "FLUSH_INTERVAL_MS", Kind: Int, Default: 500, Doc: "Longest wait for a batch to fill, in milliseconds."},
	{Name: "ingest.reclaim_idle_ms", Env: "RECLAIM_IDLE_MS", Kind: Int, Default: 60000, Doc: "Pending entries idle this long (ms) are reclaimed from a crashed worker."},
	{Name: "ingest.insert_mode", Env: "READINGS_BULK_INSERT_MODE", Aliases: []string{"DB_INSERT_METHOD"}, Kind: String, Default: "copy", Doc: "copy (binary COPY from copy_min_rows rows), insert, or realtime (small parameterised inserts)."},
	{Name: "ingest.copy_min_rows", Env: "READINGS_COPY_MIN_ROWS", Kind: Int, Default: 1000, Doc: "Rows in a batch from which copy mode uses COPY."},
	{Name: "ingest.realtime_max_rows", Env: "READINGS_REALTIME_MAX_ROWS", Kind: Int, Default: 100, Doc: "Largest batch written in realtime mode."},
	{Name: "ingest.realtime_rows_per_insert", Env: "READINGS_REALTIME_ROWS_PER_INSERT", Kind: Int, Default: 10, Doc: "Rows per INSERT statement in realtime and insert modes."},
	{Name: "ingest.db_saturation_high_watermark_pct", Env: "DB_SATURATION_HIGH_WATERMARK_PCT", Kind: Int, Default: 80, Doc: "Pool use (%) above which workers back off."},
	{Name: "ingest.db_backpressure_sleep_ms", Env: "DB_BACKPRESSURE_SLEEP_MS", Kind: Int, Default: 250, Doc: "Back-off sleep while the pool is saturated, in milliseconds."},
	{Name: "ingest.write_concurrency", Kind: Int, Default: 0, Doc: "Most batches written to the database at once; 0 (auto) means the number of CPUs in copy mode and no limit in insert and realtime modes. One batch more than this may be in flight (read and decoded, ready for the first slot that frees) while other workers wait before reading, their entries still in the stream, so the ingest's memory follows this bound and not the worker count. More concurrent COPYs than the client can feed only contend for the same index pages (on 2 CPUs, 12 concurrent COPYs reached 0.55 of the one-connection ceiling, 2 reached 1.09)."},
	{Name: "ingest.memory_limit_mb", Kind: Int, Default: 0, Doc: "Soft memory limit of the ingest process in MiB, applied when the ingest role starts (Go's runtime/debug.SetMemoryLimit): near it the garbage collector runs more often rather than letting the heap grow to twice the live batches. 0 sets none. The GOMEMLIMIT variable, when set, wins over it. In all-in-one it bounds the whole process."},
	{Name: "ingest.autoscale.min_workers", Env: "AUTOSCALE_MIN_WORKERS", Kind: Int, Default: 1, Doc: "Fewest workers the autoscaler keeps."},
	{Name: "ingest.autoscale.max_workers", Env: "AUTOSCALE_MAX_WORKERS", Kind: Int, Default: 20, Doc: "Most workers the autoscaler starts."},
	{Name: "ingest.autoscale.lag_target_ms", Env: "AUTOSCALE_LAG_TARGET_MS", Kind: Int, Default: 5000, Doc: "Consumer lag the autoscaler aims for, in milliseconds."},
	{Name: "ingest.autoscale.lag_scale_up_ms", Env: "AUTOSCALE_LAG_SCALE_UP_MS", Kind: Int, Default: 5000, Doc: "Lag above which a worker is added, in milliseconds."},
	{Name: "ingest.autoscale.lag_critical_ms", Env: "AUTOSCALE_LAG_CRITICAL_MS", Kind: Int, Default: 10000, Doc: "Lag treated as critical, in milliseconds."},
	{Name: "ingest.autoscale.scale_down_stable_checks", Env: "AUTOSCALE_SCALE_DOWN_STABLE_CHECKS", Kind: Int, Default: 6, Doc: "Consecutive calm samples before a worker is removed."},
	{Name: "ingest.autoscale.cooldown_ms", Env: "AUTOSCALE_COOLDOWN_MS", Kind: Int, Default: 3000, Doc: "Least time between two scaling steps, in milliseconds."},
	{Name: "ingest.autoscale.db_block_pct", Env: "AUTOSCALE_DB_BLOCK_PCT", Kind: Int, Default: 80, Doc: "Pool use (%) above which no worker is added."},

	// agent
	{Name: "agent.port", Env: "DEVICE_API_PORT", Kind: Int, Default: 48484, Doc: "Agent local API port."},
	{Name: "agent.security_mode", Env: "API_SECURITY_MODE", Kind: String, Default: "LOCALHOST_ONLY", Doc: "LOCALHOST_ONLY (bind 127.0.0.1, no key) or API_KEY (bind 0.0.0.0, X-Api-Key required)."},
	{Name: "agent.api_key", Env: "API_KEY", Kind: String, Default: "", Secret: true, Doc: "Key required in API_KEY mode; at least 16 characters whenever the agent API listens beyond loopback."},
	{Name: "agent.enable_auth", Env: "ENABLE_AUTH", Kind: Bool, Default: false, Doc: "With API_KEY set, also selects key mode."},
	{Name: "agent.data_dir", Env: "AGENT_DATA_DIR", Kind: String, Default: "/var/lib/edgeplat/agent", Doc: "Agent state directory (mode 0700); all-in-one puts it under --data-dir."},
	{Name: "agent.admin_username", Env: "AGENT_ADMIN_USERNAME", Kind: String, Default: "", Doc: "First admin UI user, created at start when no admin exists."},
	{Name: "agent.admin_password", Env: "AGENT_ADMIN_PASSWORD", Kind: String, Default: "", Secret: true, Doc: "Password of agent.admin_username (at least 6 characters)."},
	{Name: "agent.apps_volume_roots", Kind: String, Default: "", Doc: "Comma-separated directories under which an app's host-path volumes must lie (docs/apps.md); empty: <agent.data_dir>/volumes."},
	{Name: "agent.docker_host", Kind: String, Default: "", Doc: "Container runtime address used until one is saved through /v1/docker/config (unix:///path or tcp://host:port); empty: unix:///var/run/docker.sock."},
	{Name: "agent.jobs_shell", Kind: Bool, Default: false, Doc: "Lets the cloud's shell jobs run commands (sh -c) on the device as the agent's user; local configuration only, never set by the cloud."},
	{Name: "agent.simulation_mode", Env: "SIMULATION_MODE", Kind: Bool, Default: false, Doc: "Simulation mode: enables the /v1/simulation routes and the \"simulated\" protocol, whose scenarios feed generated readings through the real pipeline (docs/simulation.md); off, both answer as absent."},
	{Name: "agent.development", Kind: Bool, Default: false, Doc: "Development mode: enables POST /v1/test/anomaly, which injects test points into the anomaly detector (docs/anomaly-agent.md); off in production."},

	// all_in_one
	{Name: "all_in_one.data_dir", Kind: String, Default: "./edgeplat-data", Doc: "all-in-one: directory for the SQLite files and agent state."},
	{Name: "all_in_one.mqtt_port", Kind: Int, Default: 1883, Doc: "all-in-one: embedded MQTT broker TCP port."},
	{Name: "all_in_one.mqtt_bind", Kind: String, Default: "127.0.0.1", Doc: "all-in-one: address the embedded broker listens on."},
	{Name: "all_in_one.mqtt_max_packet_bytes", Kind: Int, Default: 4<<20 + 128<<10, Doc: "all-in-one: largest MQTT packet the embedded broker reads; a larger one closes the connection when its header arrives. Default: the API's 4 MiB telemetry payload limit plus 128 KiB for topic and headers."},
	{Name: "all_in_one.mqtt_connect_timeout_seconds", Kind: Int, Default: 10, Doc: "all-in-one: seconds a new connection to the embedded broker has to send its CONNECT packet before it is closed."},
	{Name: "all_in_one.mqtt_receive_maximum", Kind: Int, Default: 1024, Doc: "all-in-one: QoS 1/2 publishes one client may have unacknowledged towards the embedded broker."},
	{Name: "all_in_one.mqtt_max_inflight", Kind: Int, Default: 4096, Doc: "all-in-one: QoS 1/2 messages the embedded broker holds for one client (an offline persistent session included) until it acknowledges them."},
	{Name: "all_in_one.mqtt_max_queued", Kind: Int, Default: 4096, Doc: "all-in-one: packets waiting to be written to one client of the embedded broker; past it, messages to that client are dropped."},
	{Name: "all_in_one.mqtt_session_expiry_seconds", Kind: Int, Default: 86400, Doc: "all-in-one: longest time the embedded broker keeps a disconnected persistent session."},
	{Name: "all_in_one.auto_provision", Kind: Bool, Default: true, Doc: "all-in-one: on start, provision the built-in agent against the built-in Cloud API unless it is provisioned already, creating the first admin (all_in_one.admin_email) when the installation has none. Off leaves both to the operator."},
	{Name: "all_in_one.admin_email", Env: "EDGEPLAT_ADMIN_EMAIL", Kind: String, Default: "admin@edgeplat.local", Doc: "all-in-one: e-mail of the Cloud API admin that auto-provisioning creates when none exists, and logs in as."},
	{Name: "all_in_one.admin_password", Env: "EDGEPLAT_ADMIN_PASSWORD", Kind: String, Default: "", Secret: true, Doc: "all-in-one: password of all_in_one.admin_email (at least 8 characters). Empty: a random one is generated and printed once, when the admin is created; once an admin exists, auto-provisioning needs it to log in."},
}

// RetiredKey is a setting that was removed because it had no effect.
type RetiredKey struct {
	Name   string
	Env    string
	Reason string
}

// Retired lists the removed settings. A deployment that still sets one
// keeps starting: its variable, or its key in a config file, draws a
// warning with the reason instead of the error an unknown file key gets,
// because refusing to start over a setting that never did anything would
// turn a clean-up into an outage.
var Retired = []RetiredKey{
	{Name: "mqtt.persist_to_db", Env: "MQTT_PERSIST_TO_DB", Reason: "state and metrics reports are always stored"},
	{Name: "streamstore.pipeline_flush_interval_ms", Env: "STREAMSTORE_PIPELINE_FLUSH_INTERVAL_MS",
		Reason: "stream writes are never held back to share a round trip; the API sends what its subscriber has received as one batch"},
}

func retiredKey(name string) (RetiredKey, bool) {
	for _, r := range Retired {
		if r.Name == name {
			return r, true
		}
	}
	return RetiredKey{}, false
}

func (r RetiredKey) warning() string {
	return "setting " + r.Name + " was removed (" + r.Reason + "); it is ignored"
}

// roleSections lists the sections each role reads; --print-config shows and
// Validate checks only these.
var roleSections = map[string][]string{
	RoleAPI:      {"log", "lifecycle", "db", "streamstore", "mqtt", "jwt", "idp", "auth", "broker_auth", "licence", "api", "spool"},
	RoleIngest:   {"log", "lifecycle", "db", "streamstore", "ingest", "spool"},
	RoleAgent:    {"log", "lifecycle", "agent"},
	RoleAllInOne: {"log", "lifecycle", "db", "streamstore", "mqtt", "jwt", "idp", "auth", "broker_auth", "licence", "api", "spool", "ingest", "agent", "all_in_one"},
}

// Roles lists the role names Load accepts.
func Roles() []string { return []string{RoleAPI, RoleIngest, RoleAgent, RoleAllInOne} }

// KeyByName finds a key in Keys.
func KeyByName(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

func (k Key) section() string {
	for i := 0; i < len(k.Name); i++ {
		if k.Name[i] == '.' {
			return k.Name[:i]
		}
	}
	return k.Name
}

func (k Key) defaultFor(role string) any {
	if d, ok := k.RoleDefaults[role]; ok {
		return d
	}
	return k.Default
}

// EnvFor returns the environment variables role reads for the key, the
// primary one first; none when the binding belongs to other roles.
func (k Key) EnvFor(role string) []string { return k.envFor(role) }

func (k Key) envFor(role string) []string {
	if len(k.EnvRoles) > 0 && !contains(k.EnvRoles, role) {
		return nil
	}
	return append([]string{k.Env}, k.Aliases...)
}

// Label names a key and its env var the way every error message does:
// "db.port (DB_PORT)".
func (k Key) Label() string {
	if k.Env == "" {
		return k.Name
	}
	return k.Name + " (" + k.Env + ")"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
