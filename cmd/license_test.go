package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// TestLicenseKeygenIssueVerify: from nothing, an operator makes a key
// pair, signs a licence with it, and the API's verification accepts the
// licence with what was asked for.
func TestLicenseKeygenIssueVerify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	code, stdout, stderr := run(t, "license", "keygen", "--out", dir)
	if code != 0 {
		t.Fatalf("keygen exit %d: %s", code, stderr)
	}
	privPath, pubPath := filepath.Join(dir, licence.PrivateKeyFile), filepath.Join(dir, licence.PublicKeyFile)
	if !strings.Contains(stdout, privPath) || !strings.Contains(stdout, pubPath) {
		t.Errorf("keygen output %q does not name the files", stdout)
	}
	if fi, err := os.Stat(privPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v, mode %v", err, fi)
	}

	code, stdout, stderr = run(t, "license", "issue", "--key", privPath, "--customer", "Acme Plant 3",
		"--max-agents", "50", "--features", "export, ai", "--expires", "2099-12-31")
	if code != 0 {
		t.Fatalf("issue exit %d: %s", code, stderr)
	}
	raw := strings.TrimSpace(stdout)
	pub, err := licence.ParsePublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := licence.Verify(raw, pub, time.Now())
	if err != nil {
		t.Fatalf("the issued licence does not verify: %v", err)
	}
	if c.Customer != "Acme Plant 3" || c.MaxAgents != 50 || !c.HasFeature(licence.FeatureExport) || !c.HasFeature(licence.FeatureAI) ||
		c.HasFeature(licence.FeatureCorrelationRules) || c.Demo || !c.ExpiresAt.Equal(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("claims %+v", c)
	}
	if !strings.Contains(stderr, `licence for "Acme Plant 3": 50 agents, ai, export, valid until 2100-01-01T00:00:00Z`) {
		t.Errorf("issue summary %q", stderr)
	}

	licFile := filepath.Join(t.TempDir(), "acme.jwt")
	if err := os.WriteFile(licFile, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = run(t, "license", "verify", "--public-key", pubPath, licFile)
	if code != 0 {
		t.Fatalf("verify exit %d: %s", code, stderr)
	}
	var st licence.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || !st.Valid() || st.Customer != "Acme Plant 3" {
		t.Errorf("verify printed %s (%v)", stdout, err)
	}

	// A licence from another key is refused, with exit 1 and the reason.
	other := filepath.Join(t.TempDir(), "other")
	if code, _, stderr := run(t, "license", "keygen", "--out", other); code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	code, stdout, stderr = run(t, "license", "verify", "--public-key", filepath.Join(other, licence.PublicKeyFile), licFile)
	if code != exitFailure || !strings.Contains(stderr, "restricted (licence_invalid)") || !strings.Contains(stdout, `"state": "restricted"`) {
		t.Errorf("verify with the wrong key: exit %d, stdout %s, stderr %s", code, stdout, stderr)
	}

	// keygen never overwrites a signing key.
	before, _ := os.ReadFile(privPath)
	if code, _, stderr := run(t, "license", "keygen", "--out", dir); code == 0 || !strings.Contains(stderr, "already exists") {
		t.Errorf("keygen over existing keys: exit %d, %s", code, stderr)
	}
	if after, _ := os.ReadFile(privPath); string(after) != string(before) {
		t.Error("keygen overwrote the private key")
	}

	code, stdout, stderr = run(t, "license", "issue", "--key", privPath, "--customer", "Demo", "--features", "all", "--expires", "30d", "--demo")
	if code != 0 {
		t.Fatalf("issue --features all: exit %d: %s", code, stderr)
	}
	c, err = licence.Verify(stdout, pub, time.Now())
	if err != nil || len(c.Features) != len(licence.Features) || !c.Demo || c.MaxAgents != 0 ||
		c.ExpiresAt.Sub(c.IssuedAt) != 30*24*time.Hour {
		t.Errorf("all-features demo licence %+v, %v", c, err)
	}
}

func TestLicenseIssueBadFlags(t *testing.T) {
	keys := t.TempDir()
	if code, _, stderr := run(t, "license", "keygen", "--out", keys); code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	key := filepath.Join(keys, licence.PrivateKeyFile)
	base := []string{"license", "issue", "--key", key, "--customer", "Acme", "--expires", "365d"}
	with := func(args ...string) []string { return append(append([]string{}, base...), args...) }
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad expires", with("--expires", "next year"), `--expires must be a date (2027-12-31), an RFC 3339 time or a duration (365d, 720h), got "next year"`},
		{"past expires", with("--expires", "2001-01-01"), `--expires "2001-01-01" is not in the future`},
		{"negative duration", with("--expires", "-5h"), `--expires "-5h" is not in the future`},
		{"negative max agents", with("--max-agents", "-1"), "--max-agents must be 0 (unlimited) or more, got -1"},
		{"max agents not a number", with("--max-agents", "many"), `invalid argument "many" for "--max-agents"`},
		{"unknown feature", with("--features", "export,teleport"), `--features: unknown feature "teleport"`},
		{"empty customer", with("--customer", " "), "--customer must not be empty"},
		{"missing key file", with("--key", filepath.Join(keys, "nope.pem")), "--key: read private key"},
		{"public key as private", with("--key", filepath.Join(keys, licence.PublicKeyFile)), "--key " + filepath.Join(keys, licence.PublicKeyFile)},
		{"no expires", []string{"license", "issue", "--key", key, "--customer", "Acme"}, `required flag(s) "expires" not set`},
		{"no out", []string{"license", "keygen"}, `required flag(s) "out" not set`},
		{"no public key", []string{"license", "verify", "x"}, `required flag(s) "public-key" not set`},
		{"unknown subcommand", []string{"license", "isue"}, `unknown command "isue" for "edgeplat license"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, exitUsage, tt.want)
			}
		})
	}
}

func TestLicenseExpiresFlag(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    time.Time
		wantErr string
	}{
		{in: "2027-12-31", want: time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC)},
		{in: " 2026-03-01 ", want: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)},
		{in: "2027-06-30T12:00:00+02:00", want: time.Date(2027, 6, 30, 10, 0, 0, 0, time.UTC)},
		{in: "365d", want: now.Add(365 * 24 * time.Hour)},
		{in: "720h", want: now.Add(720 * time.Hour)},
		{in: "1h30m", want: now.Add(90 * time.Minute)},
		{in: "2026-02-28", wantErr: "not in the future"},
		{in: "0d", wantErr: "not in the future"},
		{in: "", wantErr: "--expires must be"},
		{in: "31/12/2027", wantErr: "--expires must be"},
		{in: "5 days", wantErr: "--expires must be"},
		{in: "99999999d", wantErr: "--expires must be"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseExpiry(tt.in, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseExpiry(%q) = %v, %v; want error %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !got.Equal(tt.want) {
				t.Errorf("parseExpiry(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}
