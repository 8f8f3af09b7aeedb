package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestMQTTSettingsReadSpecStyleNames: the broker client's settings read
// MQTT_USERNAME, MQTT_PASSWORD, ... as the examples name them, and their
// former EDGEPLAT_MQTT_ names still work, losing to the new ones.
func TestMQTTSettingsReadSpecStyleNames(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want MQTT
	}{
		{name: "new names", env: map[string]string{"MQTT_USERNAME": "u", "MQTT_PASSWORD": "p", "MQTT_CLIENT_ID": "c",
			"MQTT_CA_FILE": "/ca", "MQTT_CERT_FILE": "/cert", "MQTT_KEY_FILE": "/key"},
			want: MQTT{Username: "u", Password: "p", ClientID: "c", CAFile: "/ca", CertFile: "/cert", KeyFile: "/key"}},
		{name: "old names", env: map[string]string{"EDGEPLAT_MQTT_USERNAME": "u", "EDGEPLAT_MQTT_PASSWORD": "p", "EDGEPLAT_MQTT_CLIENT_ID": "c",
			"EDGEPLAT_MQTT_CA_FILE": "/ca", "EDGEPLAT_MQTT_CERT_FILE": "/cert", "EDGEPLAT_MQTT_KEY_FILE": "/key"},
			want: MQTT{Username: "u", Password: "p", ClientID: "c", CAFile: "/ca", CertFile: "/cert", KeyFile: "/key"}},
		{name: "new over old", env: map[string]string{"MQTT_PASSWORD": "new", "EDGEPLAT_MQTT_PASSWORD": "old"},
			want: MQTT{Password: "new"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, err := Load(LoadOptions{Role: RoleAPI})
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.MQTT
			if got.Username != tt.want.Username || got.Password != tt.want.Password || got.ClientID != tt.want.ClientID ||
				got.CAFile != tt.want.CAFile || got.CertFile != tt.want.CertFile || got.KeyFile != tt.want.KeyFile {
				t.Errorf("mqtt = %+v (password %q), want %+v (password %q)", got, got.Password.Reveal(), tt.want, tt.want.Password.Reveal())
			}
		})
	}
}

func TestEnvWarnings(t *testing.T) {
	tests := []struct {
		name string
		role string
		env  map[string]string
		want []EnvWarning // Reason is checked to be non-empty only
	}{
		{name: "typo of a spec name", role: RoleAPI, env: map[string]string{"DB_HOTS": "db1"},
			want: []EnvWarning{{Var: "DB_HOTS", DidYouMean: "DB_HOST"}}},
		{name: "typo of a long spec name", role: RoleIngest, env: map[string]string{"STREAMSTORE_PROT": "6380"},
			want: []EnvWarning{{Var: "STREAMSTORE_PROT", DidYouMean: "STREAMSTORE_PORT"}}},
		{name: "spec name with the prefix", role: RoleAPI, env: map[string]string{"EDGEPLAT_DB_HOST": "db1"},
			want: []EnvWarning{{Var: "EDGEPLAT_DB_HOST", DidYouMean: "DB_HOST"}}},
		{name: "typo of a prefixed name", role: RoleAPI, env: map[string]string{"EDGEPLAT_LOG_LEVLE": "debug"},
			want: []EnvWarning{{Var: "EDGEPLAT_LOG_LEVLE", DidYouMean: "EDGEPLAT_LOG_LEVEL"}}},
		{name: "typo of a spec name with the prefix", role: RoleAPI, env: map[string]string{"EDGEPLAT_JWT_SECRT": "x"},
			want: []EnvWarning{{Var: "EDGEPLAT_JWT_SECRT", DidYouMean: "JWT_SECRET"}}},
		{name: "unknown prefixed name", role: RoleAgent, env: map[string]string{"EDGEPLAT_FROBNICATE": "1"},
			want: []EnvWarning{{Var: "EDGEPLAT_FROBNICATE"}}},
		{name: "PORT in all-in-one", role: RoleAllInOne, env: map[string]string{"PORT": "8080"},
			want: []EnvWarning{{Var: "PORT"}}},
		{name: "PORT in serve-api", role: RoleAPI, env: map[string]string{"PORT": "8080"}},
		{name: "a setting of another role", role: RoleAgent, env: map[string]string{"DB_HOST": "db1", "EDGEPLAT_ADMIN_EMAIL": "a@b.c"}},
		{name: "old MQTT names", role: RoleAPI, env: map[string]string{"EDGEPLAT_MQTT_PASSWORD": "x"}},
		{name: "test harness", role: RoleAPI, env: map[string]string{"EDGEPLAT_TEST_PG_HOST": "x", "EDGEPLAT_REQUIRE_SERVICES": "1"}},
		{name: "empty is unset", role: RoleAPI, env: map[string]string{"DB_HOTS": ""}},
		{name: "other programs' variables", role: RoleAllInOne, env: map[string]string{
			"HOME": "/root", "PATH": "/bin", "USER": "ops", "HOSTNAME": "h", "SHELL": "/bin/sh", "TERM": "xterm", "LANG": "C",
			"LOGNAME": "ops", "PWD": "/", "TZ": "UTC", "GOPATH": "/go", "CI": "true", "EDITOR": "vi", "DISPLAY": ":0",
			"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_PORT": "tcp://10.0.0.1:443", "POSTGRES_PASSWORD": "x",
			"REDIS_PORT": "6379", "DATABASE_URL": "postgres://", "NODE_ENV": "production", "JAVA_HOME": "/j", "LC_ALL": "C"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var environ []string
			for k, v := range tt.env {
				environ = append(environ, k+"="+v)
			}
			got := envWarnings(tt.role, environ)
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %v, want %v", got, tt.want)
			}
			for i, w := range tt.want {
				if got[i].Var != w.Var || got[i].DidYouMean != w.DidYouMean || got[i].Reason == "" {
					t.Errorf("warning %q, want var %s, did you mean %q", got[i], w.Var, w.DidYouMean)
				}
			}
		})
	}
}

// TestLoadReportsEnvWarnings: Load hands the warnings of the process
// environment to its caller, which logs them.
func TestLoadReportsEnvWarnings(t *testing.T) {
	clearEnv(t)
	t.Setenv("DB_HOTS", "db1")
	cfg, err := Load(LoadOptions{Role: RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range cfg.EnvWarnings() {
		found = found || w.String() == "DB_HOTS: no setting has this name; did you mean DB_HOST?"
	}
	if !found {
		t.Errorf("warnings %v lack DB_HOTS", cfg.EnvWarnings())
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"DB_HOST", "DB_HOST", 0}, {"DB_HOTS", "DB_HOST", 1}, {"DB_HST", "DB_HOST", 1},
		{"DB_HOSTT", "DB_HOST", 1}, {"DB_POST", "DB_HOST", 1}, {"PORT", "", 4}, {"ab", "ba", 1}, {"abc", "ca", 3},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestAllProblemsAtOnceIncludingTypeErrors: a value that does not parse
// no longer hides the other problems; every one comes back in one joined
// error, type errors included, each naming key and variable once.
func TestAllProblemsAtOnceIncludingTypeErrors(t *testing.T) {
	clearEnv(t)
	t.Setenv("DB_PORT", "abc")
	t.Setenv("MQTT_QOS", "3")
	t.Setenv("JWT_SECRET", "short")
	t.Setenv("DISK_SPOOL_ENABLED", "maybe")
	t.Setenv("STREAMSTORE_PORT", "70000")
	file := writeFile(t, "db:\n  hots: x\napi:\n  max_body_bytes: lots\n")
	_, err := Load(LoadOptions{Role: RoleAPI, File: file})
	if err == nil {
		t.Fatal("want an error")
	}
	want := []string{
		`db.port (DB_PORT) must be an integer, got "abc" (from env DB_PORT)`,
		`spool.enabled (DISK_SPOOL_ENABLED) must be true or false, got "maybe" (from env DISK_SPOOL_ENABLED)`,
		`api.max_body_bytes (EDGEPLAT_API_MAX_BODY_BYTES) must be an integer, got "lots" (from file)`,
		"unknown key db.hots (did you mean db.host?)",
		"mqtt.qos (MQTT_QOS) must be 0..2, got 3",
		"jwt.secret (JWT_SECRET) must be at least 32 bytes, got 5",
		"streamstore.port (STREAMSTORE_PORT) must be 1..65535, got 70000",
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error lacks %q:\n%s", w, msg)
		}
	}
	if n := len(strings.Split(msg, "\n")); n != len(want) {
		t.Errorf("%d problems, want %d:\n%s", n, len(want), msg)
	}
	if strings.Count(msg, "db.port (DB_PORT)") != 1 {
		t.Errorf("db.port reported more than once:\n%s", msg)
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != len(want) {
		t.Errorf("want one joined error of %d problems, got %T", len(want), err)
	}
}

// TestUnknownProfileDoesNotHideOtherProblems: the profile is looked up
// before the values are parsed; an unknown one is one problem among
// others.
func TestUnknownProfileDoesNotHideOtherProblems(t *testing.T) {
	clearEnv(t)
	t.Setenv("INGESTION_PROFILE", "turbo")
	t.Setenv("WORKER_COUNT", "many")
	_, err := Load(LoadOptions{Role: RoleIngest})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, w := range []string{`ingest.profile (INGESTION_PROFILE) must be one of`, `ingest.worker_count (WORKER_COUNT) must be an integer, got "many"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%s", w, err)
		}
	}
}

// secretLike reports whether a key's name says its value is a credential.
// Public keys and the paths of key files are not.
func secretLike(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	switch {
	case strings.HasSuffix(last, "_file"), strings.HasPrefix(last, "public_"):
		return false
	}
	return strings.Contains(last, "password") || strings.Contains(last, "secret") ||
		strings.HasSuffix(last, "key") || strings.HasSuffix(last, "token")
}

// TestSecretLikeKeysAreSecret keeps every credential-like key masked in
// --print-config and the docs, licence.key included.
func TestSecretLikeKeysAreSecret(t *testing.T) {
	for _, k := range Keys {
		if secretLike(k.Name) && !k.Secret {
			t.Errorf("%s looks like a credential but is not Secret", k.Name)
		}
	}
	for name, want := range map[string]bool{"licence.key": true, "agent.api_key": true, "jwt.private_key": true,
		"db.password": true, "jwt.public_key": false, "mqtt.key_file": false, "licence.public_key": false, "auth.reset_token_expiry": false, "broker_auth.secret": true} {
		if got := secretLike(name); got != want {
			t.Errorf("secretLike(%s) = %v, want %v", name, got, want)
		}
	}
}

// TestPrintMasksTheLicence: the licence is a credential (whoever holds it
// registers agents under it), so --print-config masks it as it masks
// passwords.
func TestPrintMasksTheLicence(t *testing.T) {
	clearEnv(t)
	const lic = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJBY21lIn0.c2lnbmF0dXJl"
	t.Setenv("LICENSE_KEY", lic)
	cfg, err := Load(LoadOptions{Role: RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := cfg.WritePrintable(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "eyJ") {
		t.Errorf("--print-config shows the licence:\n%s", out.String())
	}
	if !strings.Contains(out.String(), `key: "<redacted>"  # env LICENSE_KEY`) {
		t.Errorf("--print-config does not show the licence as set and masked:\n%s", out.String())
	}
	if cfg.Licence.Key != lic {
		t.Errorf("licence.key = %q, want the value itself for the API", cfg.Licence.Key)
	}
}
