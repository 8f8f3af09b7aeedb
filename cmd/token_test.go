package cmd

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/api/token"
)

const tokenTestTenant = "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a"

// TestTokenCommand: a token minted from all-in-one's generated secret, or
// from JWT_SECRET, is one serve-api accepts, with the tenant and role asked
// for; bad flags and a missing key exit 2 or 1 with a message naming them.
func TestTokenCommand(t *testing.T) {
	clearEnv(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	var aio config.Config
	if err := ensureJWTSecret(&aio, dataDir); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "token", "--tenant", strings.ToUpper(tokenTestTenant), "--role", "admin", "--ttl", "5m", "--data-dir", dataDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	verify := func(secret config.Secret, raw string) token.Claims {
		t.Helper()
		svc, err := token.New(config.JWT{Secret: secret, AccessTokenExpiry: time.Minute, RefreshTokenExpiry: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		c, err := svc.Verify(strings.TrimSpace(raw), token.Access)
		if err != nil {
			t.Fatalf("serve-api would refuse the token: %v", err)
		}
		return c
	}
	c := verify(aio.JWT.Secret, stdout)
	// Operator: serve-api admits it without an account or session behind
	// it (roles/api TestAuthRequire), which a sign-in token needs.
	if c.Tenant != tokenTestTenant || c.Role != "admin" || c.Subject != "edgeplat-cli" || !c.Operator {
		t.Errorf("claims %+v", c)
	}
	if d := c.ExpiresAt.Sub(c.IssuedAt); d != 5*time.Minute {
		t.Errorf("lifetime %s, want 5m", d)
	}
	if !strings.Contains(stderr, "valid until") {
		t.Errorf("stderr %q does not say until when the token is valid", stderr)
	}

	const secret = "a-configured-secret-of-32-bytes-at-least"
	t.Setenv("JWT_SECRET", secret)
	code, stdout, stderr = run(t, "token", "--tenant", tokenTestTenant, "--data-dir", dataDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if c := verify(secret, stdout); c.Role != "member" {
		t.Errorf("default role %q, want member", c.Role)
	}

	clearEnv(t)
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no tenant", []string{"token"}, exitUsage, `"tenant" not set`},
		{"bad tenant", []string{"token", "--tenant", "acme"}, exitUsage, "--tenant must be a tenant UUID"},
		{"bad role", []string{"token", "--tenant", tokenTestTenant, "--role", "root"}, exitUsage, "--role must be admin or member"},
		{"ttl too long", []string{"token", "--tenant", tokenTestTenant, "--ttl", "48h"}, exitUsage, "--ttl must be between"},
		{"no key", []string{"token", "--tenant", tokenTestTenant, "--data-dir", t.TempDir()}, exitFailure, "no signing key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tt.code, tt.want)
			}
		})
	}
}
