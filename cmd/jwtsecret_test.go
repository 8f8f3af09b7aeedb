package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// TestEnsureJWTSecretConcurrent: instances starting together on one data
// directory all end up with the one secret that won, and none fails.
func TestEnsureJWTSecretConcurrent(t *testing.T) {
	for range 20 {
		dir := filepath.Join(t.TempDir(), "data")
		secrets := make([]config.Secret, 8)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range secrets {
			wg.Go(func() {
				var c config.Config
				errs[i] = ensureJWTSecret(&c, dir)
				secrets[i] = c.JWT.Secret
			})
		}
		wg.Wait()
		for i := range secrets {
			if errs[i] != nil {
				t.Fatalf("instance %d: %v", i, errs[i])
			}
			if secrets[i] != secrets[0] {
				t.Fatalf("instances %d and 0 got different secrets", i)
			}
		}
		left, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
		if len(left) != 0 {
			t.Fatalf("temporary files left behind: %v", left)
		}
	}
}

// TestEnsureJWTSecretDanglingLink: a secret name that points nowhere is a
// clear error, not an endless retry.
func TestEnsureJWTSecretDanglingLink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, jwtSecretFile)); err != nil {
		t.Fatal(err)
	}
	var c config.Config
	if err := ensureJWTSecret(&c, dir); err == nil || !strings.Contains(err.Error(), "dangling link") {
		t.Fatalf("ensureJWTSecret on a dangling link = %v", err)
	}
}
