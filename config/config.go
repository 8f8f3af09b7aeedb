// Package config is edgeplat's typed configuration: one struct per section,
// built-in defaults, the table binding every key to its environment variable,
// loading with viper, and validation that reports every problem at once.
//
// Precedence, low to high: built-in default < ingestion profile < config
// file < environment < command-line flag.
package config

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config is the whole effective configuration of one process.
type Config struct {
	Sections
	// Role is the subcommand this configuration was loaded for.
	Role string

	values       map[string]any
	sources      map[string]Source
	envWarnings  []EnvWarning
	fileWarnings []string
}

// Sections holds one typed struct per section; it is embedded in Config so
// callers write cfg.DB.Host.
type Sections struct {
	Log         Log         `mapstructure:"log"`
	Lifecycle   Lifecycle   `mapstructure:"lifecycle"`
	DB          DB          `mapstructure:"db"`
	StreamStore StreamStore `mapstructure:"streamstore"`
	MQTT        MQTT        `mapstructure:"mqtt"`
	JWT         JWT         `mapstructure:"jwt"`
	IDP         IDP         `mapstructure:"idp"`
	Auth        Auth        `mapstructure:"auth"`
	BrokerAuth  BrokerAuth  `mapstructure:"broker_auth"`
	Licence     Licence     `mapstructure:"licence"`
	API         API         `mapstructure:"api"`
	Spool       Spool       `mapstructure:"spool"`
	Ingest      Ingest      `mapstructure:"ingest"`
	Agent       Agent       `mapstructure:"agent"`
	AllInOne    AllInOne    `mapstructure:"all_in_one"`
}

// FileWarnings lists the keys of the config file that Load ignored
// because their settings were removed (see Retired).
func (c *Config) FileWarnings() []string { return c.fileWarnings }

// SourceOf reports where the value of key came from.
func (c *Config) SourceOf(key string) Source { return c.sources[key] }

// Log configures the process logger.
type Log struct {
	Level  string `mapstructure:"level"`
	Format string `mapstructure:"format"`
}

// Lifecycle configures start and stop.
type Lifecycle struct {
	ShutdownGrace time.Duration `mapstructure:"shutdown_grace"`
	// HTTPBodyTimeout bounds how long a request body may take to arrive.
	HTTPBodyTimeout time.Duration `mapstructure:"http_body_timeout"`
}

// DB configures the cloud database.
type DB struct {
	Driver             string `mapstructure:"driver"`
	Host               string `mapstructure:"host"`
	Port               int    `mapstructure:"port"`
	Name               string `mapstructure:"name"`
	User               string `mapstructure:"user"`
	Password           Secret `mapstructure:"password"`
	SSL                string `mapstructure:"ssl"`
	PoolSize           int    `mapstructure:"pool_size"`
	StatementTimeoutMS int    `mapstructure:"statement_timeout_ms"`
	JIT                bool   `mapstructure:"jit"`
	SQLitePath         string `mapstructure:"sqlite_path"`
}

// StreamStore configures the stream store.
type StreamStore struct {
	Driver                string `mapstructure:"driver"`
	Host                  string `mapstructure:"host"`
	Port                  int    `mapstructure:"port"`
	Password              Secret `mapstructure:"password"`
	DB                    int    `mapstructure:"db"`
	TLS                   bool   `mapstructure:"tls"`
	IngestionStreamMaxLen int    `mapstructure:"ingestion_stream_maxlen"`
}

// MQTT configures the Cloud API's broker client.
type MQTT struct {
	BrokerURL               string `mapstructure:"broker_url"`
	Username                string `mapstructure:"username"`
	Password                Secret `mapstructure:"password"`
	ClientID                string `mapstructure:"client_id"`
	QoS                     int    `mapstructure:"qos"`
	SharedSubscriptionGroup string `mapstructure:"shared_subscription_group"`
	MaxReconnectAttempts    int    `mapstructure:"max_reconnect_attempts"`
	FatalRecoveryCooldownMS int    `mapstructure:"fatal_recovery_cooldown_ms"`
	AuthCacheTTLSeconds     int    `mapstructure:"auth_cache_ttl_seconds"`
	CAFile                  string `mapstructure:"ca_file"`
	CertFile                string `mapstructure:"cert_file"`
	KeyFile                 string `mapstructure:"key_file"`
}

// JWT configures token signing.
type JWT struct {
	Secret             Secret        `mapstructure:"secret"`
	PrivateKey         Secret        `mapstructure:"private_key"`
	PublicKey          string        `mapstructure:"public_key"`
	AccessTokenExpiry  time.Duration `mapstructure:"access_token_expiry"`
	RefreshTokenExpiry time.Duration `mapstructure:"refresh_token_expiry"`
}

// IDP configures the optional external identity provider.
type IDP struct {
	Enabled  bool   `mapstructure:"enabled"`
	Domain   string `mapstructure:"domain"`
	Audience string `mapstructure:"audience"`
	Issuer   string `mapstructure:"issuer"`
}

// Auth configures the Cloud API's accounts: mail, links, proxies and rate
// limits.
type Auth struct {
	AllowRegistration bool          `mapstructure:"allow_registration"`
	PublicURL         string        `mapstructure:"public_url"`
	SMTPHost          string        `mapstructure:"smtp_host"`
	SMTPPort          int           `mapstructure:"smtp_port"`
	SMTPUsername      string        `mapstructure:"smtp_username"`
	SMTPPassword      Secret        `mapstructure:"smtp_password"`
	SMTPFrom          string        `mapstructure:"smtp_from"`
	ResetTokenExpiry  time.Duration `mapstructure:"reset_token_expiry"`
	InviteExpiry      time.Duration `mapstructure:"invite_expiry"`
	TrustedProxies    string        `mapstructure:"trusted_proxies"`
	RateLimitGlobal   int           `mapstructure:"rate_limit_global"`
	RateLimitAuth     int           `mapstructure:"rate_limit_auth"`
	RateLimitDevice   int           `mapstructure:"rate_limit_device"`
	RateLimitAdmin    int           `mapstructure:"rate_limit_admin"`
}

// BrokerAuth configures the callbacks an external MQTT broker makes to
// authenticate and authorize devices.
type BrokerAuth struct {
	Secret          Secret `mapstructure:"secret"`
	AllowedNetworks string `mapstructure:"allowed_networks"`
	BrokerURL       string `mapstructure:"broker_url"`
}

// Licence configures the signed licence the API enforces.
type Licence struct {
	Key       string `mapstructure:"key"`
	PublicKey string `mapstructure:"public_key"`
}

// API configures the Cloud API's HTTP server and telemetry pipeline.
type API struct {
	Port         int           `mapstructure:"port"`
	Bind         string        `mapstructure:"bind"`
	DedupTTL     time.Duration `mapstructure:"dedup_ttl"`
	DedupMode    string        `mapstructure:"dedup_mode"`
	MaxBodyBytes int           `mapstructure:"max_body_bytes"`
	// StreamEntryFormat is the form of the ingestion stream entries the
	// pipeline writes (docs/stream-contract.md).
	StreamEntryFormat string `mapstructure:"stream_entry_format"`
	// ClockMaxFuture and ClockMaxPast are the acceptance window of reading
	// timestamps around their receive time.
	ClockMaxFuture time.Duration `mapstructure:"clock_max_future"`
	ClockMaxPast   time.Duration `mapstructure:"clock_max_past"`
	// AgentOfflineAfter is the silence after which an agent is offline.
	AgentOfflineAfter time.Duration `mapstructure:"agent_offline_after"`
	// DeliveryReceipts sends agents receipts for the telemetry the stream
	// holds, so they delete it only then (docs/agent-delivery.md).
	DeliveryReceipts bool `mapstructure:"delivery_receipts"`
	// The AI assistant's provider, an OpenAI-compatible chat-completions
	// endpoint, and its bounds (docs/ai-assistant.md). No URL: chat is
	// off and suggestions stay deterministic.
	AIProviderURL string        `mapstructure:"ai_provider_url"`
	AIModel       string        `mapstructure:"ai_model"`
	AIAPIKey      Secret        `mapstructure:"ai_api_key"`
	AITimeout     time.Duration `mapstructure:"ai_timeout"`
	AITokenBudget int           `mapstructure:"ai_token_budget"`
	AIRateLimit   int           `mapstructure:"ai_rate_limit"`
	// EventsRetention is how long the event log keeps state snapshots and
	// audit records (docs/events.md); 0 keeps them.
	EventsRetention time.Duration `mapstructure:"events_retention"`
	// ReadingsRetention is how long raw readings are kept: older daily
	// partitions are dropped, on SQLite older rows deleted
	// (docs/database.md); 0 keeps them.
	ReadingsRetention time.Duration `mapstructure:"readings_retention"`
	// RollupHourlyRetention and RollupDailyRetention are how long the
	// hourly and daily rollups of readings are kept (docs/readings-api.md,
	// section Rollups); 0 keeps them.
	RollupHourlyRetention time.Duration `mapstructure:"rollup_hourly_retention"`
	RollupDailyRetention  time.Duration `mapstructure:"rollup_daily_retention"`
	// GrafanaURL and GrafanaToken reach the Grafana of the external
	// dashboards routes (docs/external-dashboards.md); without a URL they
	// answer 503.
	GrafanaURL   string `mapstructure:"grafana_url"`
	GrafanaToken Secret `mapstructure:"grafana_token"`
	// ExportDir, ExportLinkTTL and ExportRetention are the background
	// exports' directory, download link lifetime and file retention
	// (docs/export.md).
	ExportDir       string        `mapstructure:"export_dir"`
	ExportLinkTTL   time.Duration `mapstructure:"export_link_ttl"`
	ExportRetention time.Duration `mapstructure:"export_retention"`
}

// Values of api.dedup_mode.
const (
	// DedupModeKey remembers each msgId as its own key.
	DedupModeKey = "key"
	// DedupModeSequence remembers each msgId as one bit of a bitmap per
	// agent, key id and block of sequence numbers.
	DedupModeSequence = "sequence"
)

// Values of api.stream_entry_format.
const (
	// StreamEntryCompact writes the compact binary form.
	StreamEntryCompact = "compact"
	// StreamEntryJSON writes the JSON form.
	StreamEntryJSON = "json"
)

// Spool configures the disk spool used while a backend is failing.
type Spool struct {
	Enabled   bool   `mapstructure:"enabled"`
	Path      string `mapstructure:"path"`
	MaxSizeMB int    `mapstructure:"max_size_mb"`
}

// Ingest configures the ingestion service.
type Ingest struct {
	Port                         int       `mapstructure:"port"`
	Bind                         string    `mapstructure:"bind"`
	Profile                      string    `mapstructure:"profile"`
	WorkerCount                  int       `mapstructure:"worker_count"`
	BatchSize                    int       `mapstructure:"batch_size"`
	MaxRetries                   int       `mapstructure:"max_retries"`
	FlushIntervalMS              int       `mapstructure:"flush_interval_ms"`
	ReclaimIdleMS                int       `mapstructure:"reclaim_idle_ms"`
	InsertMode                   string    `mapstructure:"insert_mode"`
	CopyMinRows                  int       `mapstructure:"copy_min_rows"`
	RealtimeMaxRows              int       `mapstructure:"realtime_max_rows"`
	RealtimeRowsPerInsert        int       `mapstructure:"realtime_rows_per_insert"`
	DBSaturationHighWatermarkPct int       `mapstructure:"db_saturation_high_watermark_pct"`
	DBBackpressureSleepMS        int       `mapstructure:"db_backpressure_sleep_ms"`
	WriteConcurrency             int       `mapstructure:"write_concurrency"`
	MemoryLimitMB                int       `mapstructure:"memory_limit_mb"`
	Autoscale                    Autoscale `mapstructure:"autoscale"`
}

// Autoscale configures the ingestion worker autoscaler.
type Autoscale struct {
	MinWorkers            int `mapstructure:"min_workers"`
	MaxWorkers            int `mapstructure:"max_workers"`
	LagTargetMS           int `mapstructure:"lag_target_ms"`
	LagScaleUpMS          int `mapstructure:"lag_scale_up_ms"`
	LagCriticalMS         int `mapstructure:"lag_critical_ms"`
	ScaleDownStableChecks int `mapstructure:"scale_down_stable_checks"`
	CooldownMS            int `mapstructure:"cooldown_ms"`
	DBBlockPct            int `mapstructure:"db_block_pct"`
}

// Agent configures the edge agent.
type Agent struct {
	Port          int    `mapstructure:"port"`
	SecurityMode  string `mapstructure:"security_mode"`
	APIKey        Secret `mapstructure:"api_key"`
	EnableAuth    bool   `mapstructure:"enable_auth"`
	DataDir       string `mapstructure:"data_dir"`
	AdminUsername string `mapstructure:"admin_username"`
	AdminPassword Secret `mapstructure:"admin_password"`
	// JobsShell lets the cloud's shell jobs run commands on the device
	// (docs/agent.md, section Jobs). It is read from the local
	// configuration only: no cloud document or settings call sets it.
	JobsShell bool `mapstructure:"jobs_shell"`
	// AppsVolumeRoots are the directories an app's host-path volumes may
	// lie under, comma-separated; empty is <DataDir>/volumes.
	AppsVolumeRoots string `mapstructure:"apps_volume_roots"`
	// DockerHost is the container runtime's address until one is saved
	// through the agent API; empty is the default socket.
	DockerHost string `mapstructure:"docker_host"`
	// Development enables the test routes (POST /v1/test/anomaly) that
	// inject data a device never produced; off in production.
	Development bool `mapstructure:"development"`
	// SimulationMode enables the simulated protocol and the
	// /v1/simulation routes (docs/simulation.md); off, neither exists.
	SimulationMode bool `mapstructure:"simulation_mode"`
}

// VolumeRoots are the allowed roots of apps' host-path volumes.
func (a Agent) VolumeRoots() []string {
	var out []string
	for r := range strings.SplitSeq(a.AppsVolumeRoots, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, filepath.Clean(r))
		}
	}
	if len(out) == 0 {
		out = []string{filepath.Join(a.DataDir, "volumes")}
	}
	return out
}

// AllInOne configures the single-process mode.
type AllInOne struct {
	DataDir  string `mapstructure:"data_dir"`
	MQTTPort int    `mapstructure:"mqtt_port"`
	MQTTBind string `mapstructure:"mqtt_bind"`
	// The embedded broker's limits (roles/broker/limits.go).
	MQTTMaxPacketBytes        int `mapstructure:"mqtt_max_packet_bytes"`
	MQTTConnectTimeoutSeconds int `mapstructure:"mqtt_connect_timeout_seconds"`
	MQTTReceiveMaximum        int `mapstructure:"mqtt_receive_maximum"`
	MQTTMaxInflight           int `mapstructure:"mqtt_max_inflight"`
	MQTTMaxQueued             int `mapstructure:"mqtt_max_queued"`
	MQTTSessionExpirySeconds  int `mapstructure:"mqtt_session_expiry_seconds"`
	// AutoProvision, AdminEmail and AdminPassword drive the provisioning
	// of the built-in agent against the built-in Cloud API at start.
	AutoProvision bool   `mapstructure:"auto_provision"`
	AdminEmail    string `mapstructure:"admin_email"`
	AdminPassword Secret `mapstructure:"admin_password"`
}

// Millis converts a millisecond setting to a Duration.
func Millis(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

// applyRole derives settings that follow from the role. all-in-one keeps
// everything under its data directory and talks to its own broker, unless
// the operator set a value explicitly.
func applyRole(role string, values map[string]any, sources map[string]Source) {
	if role != RoleAllInOne {
		return
	}
	dir := values["all_in_one.data_dir"].(string)
	bind := values["all_in_one.mqtt_bind"].(string)
	port := values["all_in_one.mqtt_port"].(int)
	derived := map[string]any{
		"db.sqlite_path":  filepath.Join(dir, "edgeplat.db"),
		"agent.data_dir":  filepath.Join(dir, "agent"),
		"spool.path":      filepath.Join(dir, "spool"),
		"mqtt.broker_url": "tcp://" + net.JoinHostPort(loopbackFor(bind), strconv.Itoa(port)),
	}
	for key, val := range derived {
		if sources[key].Layer == "default" {
			values[key] = val
			sources[key] = Source{Layer: "derived", Detail: "from all_in_one settings"}
		}
	}
}

// loopbackFor returns an address a local client can dial to reach a
// listener bound to bind.
func loopbackFor(bind string) string {
	if bind == "" || bind == "0.0.0.0" || bind == "::" {
		return "127.0.0.1"
	}
	return bind
}
