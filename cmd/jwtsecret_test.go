package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/config"
)

func TestEnsureJWTSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var first config.Config
	if err := ensureJWTSecret(&first, dir); err != nil {
		t.Fatal(err)
	}
	if len(first.JWT.Secret.Reveal()) < 32 {
		t.Fatalf("generated secret of %d bytes", len(first.JWT.Secret.Reveal()))
	}
	st, err := os.Stat(filepath.Join(dir, jwtSecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %v, want 0600", st.Mode().Perm())
	}

	var again config.Config
	if err := ensureJWTSecret(&again, dir); err != nil {
		t.Fatal(err)
	}
	if again.JWT.Secret != first.JWT.Secret {
		t.Error("a restart generated a new secret: every issued token would die")
	}

	var configured config.Config
	configured.JWT.Secret = "configured-secret-of-32-bytes-or-more"
	if err := ensureJWTSecret(&configured, dir); err != nil || configured.JWT.Secret != "configured-secret-of-32-bytes-or-more" {
		t.Errorf("configured secret replaced: %v", err)
	}

	if err := os.WriteFile(filepath.Join(dir, jwtSecretFile), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var short config.Config
	if err := ensureJWTSecret(&short, dir); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short secret file: %v", err)
	}
}
