package cmd

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestRoleHelpNamesOnlyVariablesTheRoleReads: a flag's help names an
// environment variable only when the role reads it; all-in-one's
// --api-port and --ingest-port used to say PORT, which all-in-one ignores.
func TestRoleHelpNamesOnlyVariablesTheRoleReads(t *testing.T) {
	envs := knownEnvNames()
	named := regexp.MustCompile(`\(([A-Z][A-Z0-9_]*)\)`)
	for _, c := range newRootCmd().Commands() {
		if c.GroupID != "roles" {
			continue
		}
		role := c.Name()
		read := map[string]bool{}
		for _, k := range config.Keys {
			for _, env := range k.EnvFor(role) {
				read[env] = true
			}
		}
		t.Run(role, func(t *testing.T) {
			code, out, _ := run(t, role, "--help")
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			for _, m := range named.FindAllStringSubmatch(out, -1) {
				if envs[m[1]] && !read[m[1]] {
					t.Errorf("%s --help names %s, which %s does not read:\n%s", role, m[1], role, out)
				}
			}
		})
	}
	_, out, _ := run(t, "all-in-one", "--help")
	for _, want := range []string{"api.port in --config; PORT is not read by all-in-one", "ingest.port in --config; PORT is not read by all-in-one"} {
		if !strings.Contains(out, want) {
			t.Errorf("all-in-one --help lacks %q:\n%s", want, out)
		}
	}
}

// TestTypeErrorsComeWithTheOtherProblems: a value that does not parse is
// listed with every other problem instead of alone.
func TestTypeErrorsComeWithTheOtherProblems(t *testing.T) {
	clearEnv(t)
	t.Setenv("DB_PORT", "abc")
	t.Setenv("MQTT_QOS", "5")
	t.Setenv("DISK_SPOOL_MAX_SIZE_MB", "0")
	code, _, errOut := run(t, "serve-api", "--print-config")
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	for _, w := range []string{"invalid configuration (3 problems):",
		`  - db.port (DB_PORT) must be an integer, got "abc" (from env DB_PORT)`,
		"  - mqtt.qos (MQTT_QOS) must be 0..2, got 5",
		"  - spool.max_size_mb (DISK_SPOOL_MAX_SIZE_MB) must be 1..1048576, got 0"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
}

// TestEnvTyposAreWarned: --print-config shows the warnings on stderr,
// keeping stdout YAML.
func TestEnvTyposAreWarned(t *testing.T) {
	tests := []struct {
		role string
		env  map[string]string
		want []string
	}{
		{role: "serve-api", env: map[string]string{"DB_HOTS": "db1", "EDGEPLAT_LOG_LEVLE": "debug", "HOME": "/root"},
			want: []string{"edgeplat serve-api: warning: environment variable DB_HOTS: no setting has this name; did you mean DB_HOST?",
				"edgeplat serve-api: warning: environment variable EDGEPLAT_LOG_LEVLE: no setting has this name (see docs/configuration.md); did you mean EDGEPLAT_LOG_LEVEL?"}},
		{role: "all-in-one", env: map[string]string{"PORT": "8080"},
			want: []string{"warning: environment variable PORT: read by serve-api and ingest only, not by all-in-one; set api.port and ingest.port with a flag or in the config file"}},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, out, errOut := run(t, tt.role, "--print-config", "--config", "", "--log-level", "info")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if strings.Contains(out, "warning") {
				t.Errorf("a warning went to stdout:\n%s", out)
			}
			for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
				if !strings.HasPrefix(line, "edgeplat "+tt.role+": warning: environment variable ") {
					t.Errorf("stderr line %q is not a warning", line)
				}
			}
		})
	}
}

// TestUnreachableBackendsNameSettings: a role that cannot reach
// PostgreSQL or Redis says which service, where, and which variables to
// check; the environment warnings are logged before.
func TestUnreachableBackendsNameSettings(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		clearEnv(t)
		port := coretest.FreePort(t)
		t.Setenv("DB_HOST", "127.0.0.1")
		t.Setenv("DB_PORT", fmt.Sprint(port))
		t.Setenv("DB_HOTS", "db1")
		t.Setenv("JWT_SECRET", strings.Repeat("k", 32))
		code, _, errOut := run(t, "serve-api", "--log-format", "json", "--port", fmt.Sprint(coretest.FreePort(t)))
		if code != exitFailure {
			t.Errorf("exit %d, want %d", code, exitFailure)
		}
		for _, w := range []string{
			fmt.Sprintf("cannot reach PostgreSQL at 127.0.0.1:%d (DB_HOST, DB_PORT): connection refused", port),
			`"level":"WARN","msg":"environment variable not read","var":"DB_HOTS"`,
			`"did_you_mean":"DB_HOST"`,
		} {
			if !strings.Contains(errOut, w) {
				t.Errorf("stderr lacks %q:\n%s", w, errOut)
			}
		}
	})
	t.Run("redis", func(t *testing.T) {
		clearEnv(t)
		port := coretest.FreePort(t)
		t.Setenv("EDGEPLAT_DB_DRIVER", "sqlite")
		t.Setenv("EDGEPLAT_DB_SQLITE_PATH", filepath.Join(t.TempDir(), "edgeplat.db"))
		t.Setenv("STREAMSTORE_HOST", "127.0.0.1")
		t.Setenv("STREAMSTORE_PORT", fmt.Sprint(port))
		code, _, errOut := run(t, "ingest", "--log-format", "json", "--port", fmt.Sprint(coretest.FreePort(t)))
		if code != exitFailure {
			t.Errorf("exit %d, want %d", code, exitFailure)
		}
		want := fmt.Sprintf("cannot reach Redis at 127.0.0.1:%d (STREAMSTORE_HOST, STREAMSTORE_PORT): connection refused", port)
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	})
}
