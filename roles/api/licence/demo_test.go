package licence

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg, err := demo(dir, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Key != filepath.Join(dir, DemoLicenceFile) || cfg.PublicKey != filepath.Join(dir, DemoPublicKeyFile) {
		t.Errorf("config %+v", cfg)
	}
	for _, name := range []string{DemoPrivateKeyFile, DemoPublicKeyFile, DemoLicenceFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %o, want 600", name, fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode %o, want 700", fi.Mode().Perm())
	}

	m, clk := loadAt(t, cfg, testNow)
	st := m.Status()
	if !st.Valid() || !st.Demo || st.Customer != DemoCustomer || st.MaxAgents != 0 ||
		strings.Join(st.Features, ",") != "ai,correlation_rules,export" || !st.ExpiresAt.Equal(testNow.Add(365*24*time.Hour)) {
		t.Errorf("demo status %+v", st)
	}
	if err := m.CheckRegistration(100_000); err != nil {
		t.Errorf("demo licence limits agents: %v", err)
	}

	files := readAll(t, dir)
	// Idempotent: a later start, even months on, keeps key and licence.
	if _, err := demo(dir, testNow.Add(200*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if again := readAll(t, dir); !sameFiles(files, again) {
		t.Error("a second Demo changed the files")
	}

	// In its last month, or once expired, the licence is minted again
	// with the same key; a running Manager picks it up on Load.
	later := testNow.Add(400 * 24 * time.Hour)
	clk.Set(later)
	if m.Status().Reason != ReasonExpired {
		t.Fatalf("status a year on %+v", m.Status())
	}
	if _, err := demo(dir, later); err != nil {
		t.Fatal(err)
	}
	renewed := readAll(t, dir)
	if renewed[DemoLicenceFile] == files[DemoLicenceFile] || renewed[DemoPrivateKeyFile] != files[DemoPrivateKeyFile] {
		t.Error("expired demo licence not re-minted with the same key")
	}
	if st := m.Load(context.Background()); !st.Valid() || !st.ExpiresAt.Equal(later.Add(365*24*time.Hour)) {
		t.Errorf("status after re-mint %+v", st)
	}

	// A stale public key is rewritten from the private one.
	if err := os.WriteFile(filepath.Join(dir, DemoPublicKeyFile), []byte(edKeyPair(t).pubPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := demo(dir, later); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, dir)[DemoPublicKeyFile]; got != files[DemoPublicKeyFile] {
		t.Error("stale public key kept")
	}
}

func TestDemoPublicWrapper(t *testing.T) {
	cfg, err := Demo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := New(cfg, nil)
	if st := m.Load(context.Background()); !st.Valid() || !st.Demo {
		t.Errorf("Demo licence at the real time: %+v", st)
	}
}

// TestDemoConcurrentStarts: instances starting together on one directory
// agree on one key, and each gets a licence that verifies.
func TestDemoConcurrentStarts(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	cfgs := make([]config.Licence, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { cfgs[i], errs[i] = demo(dir, testNow) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		m, _ := loadAt(t, cfgs[i], testNow)
		if st := m.Status(); !st.Valid() {
			t.Errorf("instance %d: %+v", i, st)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want the 3 demo files and no temporary ones", names)
	}
}

func TestDemoRefuses(t *testing.T) {
	if _, err := Demo(""); err == nil || !strings.Contains(err.Error(), "no data directory") {
		t.Errorf("Demo(\"\") = %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, DemoPrivateKeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Demo(dir); err == nil || !strings.Contains(err.Error(), "delete it to make a new key") {
		t.Errorf("Demo with a corrupt key = %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Demo(file); err == nil || !strings.Contains(err.Error(), "create data directory") {
		t.Errorf("Demo on a file = %v", err)
	}
}

func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{DemoPrivateKeyFile, DemoPublicKeyFile, DemoLicenceFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

func sameFiles(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}
