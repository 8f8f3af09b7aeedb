package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/profiles"
	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite golden files")

// clearEnv unsets every variable the table binds, so a developer's shell
// cannot change test results.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range Keys {
		for _, env := range append([]string{k.Env}, k.Aliases...) {
			if _, ok := os.LookupEnv(env); ok {
				t.Setenv(env, "")
				os.Unsetenv(env)
			}
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "edgeplat.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsLoadForEveryRole(t *testing.T) {
	clearEnv(t)
	for _, role := range Roles() {
		t.Run(role, func(t *testing.T) {
			cfg, err := Load(LoadOptions{Role: role})
			if err != nil {
				t.Fatalf("defaults must be valid: %v", err)
			}
			if cfg.Lifecycle.ShutdownGrace != 10*time.Second {
				t.Errorf("shutdown grace = %s, want 10s", cfg.Lifecycle.ShutdownGrace)
			}
		})
	}
}

func TestRoleDefaults(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		role  string
		check func(*Config) string
	}{
		{RoleAPI, func(c *Config) string {
			if c.DB.PoolSize != 20 || c.DB.Driver != "postgres" || c.API.Port != 3002 {
				return "api wants pool 20, postgres, port 3002"
			}
			return ""
		}},
		{RoleIngest, func(c *Config) string {
			// balanced profile: 24 connections, 6 workers.
			if c.DB.PoolSize != 24 || c.Ingest.WorkerCount != 6 || c.Ingest.Port != 3003 {
				return "ingest wants balanced profile values"
			}
			return ""
		}},
		{RoleAgent, func(c *Config) string {
			if c.Agent.Port != 48484 || c.Agent.SecurityMode != "LOCALHOST_ONLY" || c.Agent.KeyMode() {
				return "agent wants 48484 in LOCALHOST_ONLY"
			}
			return ""
		}},
		{RoleAllInOne, func(c *Config) string {
			if c.DB.Driver != "sqlite" || c.StreamStore.Driver != "memory" {
				return "all-in-one wants embedded drivers"
			}
			if c.DB.SQLitePath != filepath.Join("edgeplat-data", "edgeplat.db") || c.MQTT.BrokerURL != "tcp://127.0.0.1:1883" {
				return "all-in-one derives paths and broker URL, got " + c.DB.SQLitePath + " " + c.MQTT.BrokerURL
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			cfg, err := Load(LoadOptions{Role: tt.role})
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(cfg); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// TestPrecedence walks the layers from low to high on one key each step.
func TestPrecedence(t *testing.T) {
	const key = "ingest.batch_size" // default 100, profile batch: 500
	tests := []struct {
		name    string
		file    string
		env     map[string]string
		flag    string
		want    int
		wantSrc string
	}{
		{name: "default", env: map[string]string{"INGESTION_PROFILE": "none"}, want: 100, wantSrc: "default"},
		{name: "profile over default", env: map[string]string{"INGESTION_PROFILE": "batch"}, want: 500, wantSrc: "profile batch"},
		{name: "profile chosen in file", file: "ingest:\n  profile: benchmark\n", want: 1000, wantSrc: "profile benchmark"},
		{name: "file over profile", file: "ingest:\n  profile: batch\n  batch_size: 42\n", want: 42, wantSrc: "file"},
		{name: "env over file", file: "ingest:\n  batch_size: 42\n", env: map[string]string{"BATCH_SIZE": "43"}, want: 43, wantSrc: "env BATCH_SIZE"},
		{name: "flag over env", file: "ingest:\n  batch_size: 42\n", env: map[string]string{"BATCH_SIZE": "43"}, flag: "44", want: 44, wantSrc: "flag --batch-size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.Int("batch-size", 100, "")
			if tt.flag != "" {
				if err := fs.Parse([]string{"--batch-size=" + tt.flag}); err != nil {
					t.Fatal(err)
				}
			}
			opts := LoadOptions{Role: RoleIngest, Flags: fs, FlagKeys: map[string]string{"batch-size": key}}
			if tt.file != "" {
				opts.File = writeFile(t, tt.file)
			}
			cfg, err := Load(opts)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Ingest.BatchSize != tt.want {
				t.Errorf("batch size = %d, want %d", cfg.Ingest.BatchSize, tt.want)
			}
			if got := cfg.SourceOf(key).String(); got != tt.wantSrc {
				t.Errorf("source = %q, want %q", got, tt.wantSrc)
			}
		})
	}
}

func TestInvalidValuesNameKeyEnvAndValue(t *testing.T) {
	tests := []struct {
		name string
		role string
		env  map[string]string
		file string
		want []string
	}{
		{name: "port range", role: RoleAPI, env: map[string]string{"DB_PORT": "70000"},
			want: []string{"db.port (DB_PORT) must be 1..65535, got 70000"}},
		{name: "not an integer", role: RoleAPI, env: map[string]string{"DB_PORT": "abc"},
			want: []string{`db.port (DB_PORT) must be an integer, got "abc" (from env DB_PORT)`}},
		{name: "all problems at once", role: RoleAPI, env: map[string]string{"DB_PORT": "0", "MQTT_QOS": "3", "EDGEPLAT_LOG_FORMAT": "xml"},
			want: []string{"db.port (DB_PORT) must be 1..65535, got 0", "mqtt.qos (MQTT_QOS) must be 0..2, got 3", `log.format (EDGEPLAT_LOG_FORMAT) must be one of auto, text, json, got "xml"`}},
		{name: "bad bool", role: RoleAPI, env: map[string]string{"DISK_SPOOL_ENABLED": "maybe"},
			want: []string{`spool.enabled (DISK_SPOOL_ENABLED) must be true or false, got "maybe"`}},
		{name: "bad duration", role: RoleAPI, env: map[string]string{"JWT_ACCESS_TOKEN_EXPIRY": "soon"},
			want: []string{`jwt.access_token_expiry (JWT_ACCESS_TOKEN_EXPIRY) must be a duration`}},
		{name: "short jwt secret", role: RoleAPI, env: map[string]string{"JWT_SECRET": "short"},
			want: []string{"jwt.secret (JWT_SECRET) must be at least 32 bytes, got 5"}},
		{name: "unknown profile", role: RoleIngest, env: map[string]string{"INGESTION_PROFILE": "turbo"},
			want: []string{`ingest.profile (INGESTION_PROFILE) must be one of balanced, batch, benchmark, hp, streaming or none, got "turbo"`}},
		{name: "broker url", role: RoleAPI, env: map[string]string{"MQTT_BROKER_URL": "http://x:1"},
			want: []string{`mqtt.broker_url (MQTT_BROKER_URL) must be one of tcp, mqtt, ssl, tls, mqtts, ws, wss, got "http"`}},
		{name: "dedup mode", role: RoleAPI, env: map[string]string{"DEDUP_MODE": "bitmap"},
			want: []string{`api.dedup_mode (DEDUP_MODE) must be one of key, sequence, got "bitmap"`}},
		{name: "readings retention under a day", role: RoleAPI, env: map[string]string{"EDGEPLAT_API_READINGS_RETENTION": "12h"},
			want: []string{"api.readings_retention (EDGEPLAT_API_READINGS_RETENTION) must be 0 (keep) or at least 24h, got 12h0m0s"}},
		{name: "api key mode needs key", role: RoleAgent, env: map[string]string{"API_SECURITY_MODE": "API_KEY"},
			want: []string{"agent.api_key (API_KEY) must be set when agent.security_mode is API_KEY"}},
		{name: "short agent api key", role: RoleAgent, env: map[string]string{"API_SECURITY_MODE": "API_KEY", "API_KEY": "fifteen-chars!!"},
			want: []string{"agent.api_key (API_KEY) must be at least 16 characters when the agent API listens beyond loopback (key mode binds 0.0.0.0), got 15"}},
		{name: "short agent api key with enable_auth", role: RoleAgent, env: map[string]string{"ENABLE_AUTH": "true", "API_KEY": "short"},
			want: []string{"agent.api_key (API_KEY) must be at least 16 characters"}},
		{name: "short agent api key in all-in-one", role: RoleAllInOne, env: map[string]string{"API_SECURITY_MODE": "API_KEY", "API_KEY": "short"},
			want: []string{"agent.api_key (API_KEY) must be at least 16 characters"}},
		{name: "autoscale bounds", role: RoleIngest, env: map[string]string{"AUTOSCALE_MIN_WORKERS": "9", "AUTOSCALE_MAX_WORKERS": "3"},
			want: []string{"ingest.autoscale.min_workers (AUTOSCALE_MIN_WORKERS) must not exceed ingest.autoscale.max_workers (3), got 9"}},
		{name: "all-in-one ports collide", role: RoleAllInOne, env: map[string]string{"DEVICE_API_PORT": "3002"},
			want: []string{"agent.port (DEVICE_API_PORT) must differ from api.port, both are 3002"}},
		{name: "all-in-one admin", role: RoleAllInOne, env: map[string]string{"EDGEPLAT_ADMIN_EMAIL": "ops at example", "EDGEPLAT_ADMIN_PASSWORD": "short"},
			want: []string{`all_in_one.admin_email (EDGEPLAT_ADMIN_EMAIL) must be an e-mail address, got "ops at example"`,
				"all_in_one.admin_password (EDGEPLAT_ADMIN_PASSWORD) must be 8 characters to 256 bytes long, got 5 characters"}},
		{name: "unknown file key", role: RoleAPI, file: "db:\n  hots: x\n",
			want: []string{"unknown key db.hots (did you mean db.host?)"}},
		{name: "file value type", role: RoleAPI, file: "db:\n  port: [1, 2]\n",
			want: []string{"db.port (DB_PORT) must be an integer, got [1 2] (from file)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			opts := LoadOptions{Role: tt.role}
			if tt.file != "" {
				opts.File = writeFile(t, tt.file)
			}
			_, err := Load(opts)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDedupMode(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		file string
		want string
	}{
		{name: "default", want: DedupModeKey},
		{name: "env", env: map[string]string{"DEDUP_MODE": "sequence"}, want: DedupModeSequence},
		{name: "file", file: "api:\n  dedup_mode: sequence\n", want: DedupModeSequence},
		{name: "env over file", file: "api:\n  dedup_mode: sequence\n", env: map[string]string{"DEDUP_MODE": "key"}, want: DedupModeKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			opts := LoadOptions{Role: RoleAPI}
			if tt.file != "" {
				opts.File = writeFile(t, tt.file)
			}
			cfg, err := Load(opts)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.API.DedupMode != tt.want {
				t.Errorf("api.dedup_mode = %q, want %q", cfg.API.DedupMode, tt.want)
			}
		})
	}
}

// TestPortEnvIsRoleScoped: PORT is the API port to serve-api and the ingest
// port to ingest, and nothing to all-in-one, which serves both.
func TestPortEnvIsRoleScoped(t *testing.T) {
	clearEnv(t)
	t.Setenv("PORT", "4000")
	api, err := Load(LoadOptions{Role: RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	ing, err := Load(LoadOptions{Role: RoleIngest})
	if err != nil {
		t.Fatal(err)
	}
	aio, err := Load(LoadOptions{Role: RoleAllInOne})
	if err != nil {
		t.Fatal(err)
	}
	if api.API.Port != 4000 || ing.Ingest.Port != 4000 {
		t.Errorf("PORT not applied: api %d ingest %d", api.API.Port, ing.Ingest.Port)
	}
	if ing.API.Port != 3002 || aio.API.Port != 3002 || aio.Ingest.Port != 3003 {
		t.Errorf("PORT leaked: ingest's api %d, all-in-one api %d ingest %d", ing.API.Port, aio.API.Port, aio.Ingest.Port)
	}
}

func TestAliasEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("DB_INSERT_METHOD", "insert")
	cfg, err := Load(LoadOptions{Role: RoleIngest})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ingest.InsertMode != "insert" {
		t.Errorf("insert mode = %q, want the DB_INSERT_METHOD alias to apply", cfg.Ingest.InsertMode)
	}
	t.Setenv("READINGS_BULK_INSERT_MODE", "realtime")
	if cfg, _ = Load(LoadOptions{Role: RoleIngest}); cfg.Ingest.InsertMode != "realtime" {
		t.Errorf("insert mode = %q, want READINGS_BULK_INSERT_MODE to win over its alias", cfg.Ingest.InsertMode)
	}
}

func TestDurationDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "15m": 15 * time.Minute, "1h30m": 90 * time.Minute} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "-1d", "7days", "1.5d"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) should fail", bad)
		}
	}
}

func TestPrintMasksSecrets(t *testing.T) {
	clearEnv(t)
	t.Setenv("DB_PASSWORD", "hunter2-very-secret")
	t.Setenv("JWT_SECRET", strings.Repeat("s", 40))
	cfg, err := Load(LoadOptions{Role: RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := cfg.WritePrintable(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, "hunter2") || strings.Contains(s, "sssss") {
		t.Fatalf("secret printed:\n%s", s)
	}
	for _, want := range []string{`password: "<redacted>"  # env DB_PASSWORD`, `port: 5432  # default`, "ingest:"} {
		if want == "ingest:" {
			if strings.Contains(s, "\ningest:") {
				t.Error("serve-api output shows the ingest section it does not read")
			}
			continue
		}
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if got := cfg.DB.Password.String(); got != "<redacted>" {
		t.Errorf("Secret.String() = %q", got)
	}
}

func TestProfilesOnlyNameKnownKeys(t *testing.T) {
	for _, name := range profiles.Names() {
		vals, err := profiles.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(vals) == 0 {
			t.Errorf("profile %s is empty", name)
		}
		for key, v := range vals {
			k, ok := KeyByName(key)
			if !ok {
				t.Errorf("profile %s sets unknown key %s", name, key)
				continue
			}
			if _, err := parse(k, v); err != nil {
				t.Errorf("profile %s: %s %v", name, key, err)
			}
		}
	}
}

func TestKeyTableIsWellFormed(t *testing.T) {
	seenName := map[string]bool{}
	seenEnv := map[string][]string{}
	for _, k := range Keys {
		if seenName[k.Name] {
			t.Errorf("duplicate key %s", k.Name)
		}
		seenName[k.Name] = true
		if k.Doc == "" {
			t.Errorf("%s has no doc", k.Name)
		}
		if _, err := parse(k, k.Default); err != nil {
			t.Errorf("%s default: %v", k.Name, err)
		}
		seenEnv[k.Env] = append(seenEnv[k.Env], k.Name)
	}
	for env, names := range seenEnv {
		if len(names) > 1 {
			// Only role-scoped bindings may share a variable, and never
			// within one role.
			for _, role := range Roles() {
				n := 0
				for _, name := range names {
					k, _ := KeyByName(name)
					if len(k.envFor(role)) > 0 {
						n++
					}
				}
				if n > 1 {
					t.Errorf("%s binds %v in role %s", env, names, role)
				}
			}
		}
	}
}

func TestConfigurationDoc(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "configuration.md")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run: go test ./config -run TestConfigurationDoc -update)", err)
	}
	if !bytes.Equal(committed, buf.Bytes()) {
		t.Error("docs/configuration.md is stale; run: go test ./config -run TestConfigurationDoc -update")
	}
	// Every spec name the foundation issue lists must be documented.
	for _, env := range []string{"DB_HOST", "DB_PORT", "DB_NAME", "DB_USER", "DB_PASSWORD", "DB_SSL", "DB_POOL_SIZE", "JWT_SECRET",
		"MQTT_BROKER_URL", "MQTT_QOS", "STREAMSTORE_HOST", "STREAMSTORE_PORT", "INGESTION_PROFILE", "PORT", "API_SECURITY_MODE", "API_KEY"} {
		if !bytes.Contains(committed, []byte("`"+env+"`")) {
			t.Errorf("docs/configuration.md does not document %s", env)
		}
	}
}

// TestAgentAPIKeyLengthFollowsTheBind: the 16-character floor applies only
// where the API is open beyond loopback.
func TestAgentAPIKeyLengthFollowsTheBind(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		wantOK bool
	}{
		{"key mode, 16 characters", map[string]string{"API_SECURITY_MODE": "API_KEY", "API_KEY": "0123456789abcdef"}, true},
		{"key mode, 15 characters", map[string]string{"API_SECURITY_MODE": "API_KEY", "API_KEY": "0123456789abcde"}, false},
		{"enable_auth, 15 characters", map[string]string{"ENABLE_AUTH": "true", "API_KEY": "0123456789abcde"}, false},
		{"loopback only, short key unused", map[string]string{"API_KEY": "short"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := Load(LoadOptions{Role: RoleAgent})
			if tt.wantOK && err != nil {
				t.Fatalf("want it accepted, got %v", err)
			}
			if !tt.wantOK && (err == nil || !strings.Contains(err.Error(), "agent.api_key (API_KEY)")) {
				t.Fatalf("want an error naming agent.api_key (API_KEY), got %v", err)
			}
		})
	}
}
