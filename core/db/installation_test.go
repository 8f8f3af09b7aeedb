package db_test

import (
	"context"
	"testing"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// TestInstallationIDIntegration: two fresh databases are two
// installations; one database keeps its id across restarts.
func TestInstallationIDIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped in -short mode")
	}
	engines := []struct {
		name  string
		fresh func(testing.TB) config.DB
	}{
		{"postgres", coretest.Postgres},
		{"sqlite", coretest.SQLite},
	}
	ctx := context.Background()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			cfgA, cfgB := e.fresh(t), e.fresh(t)
			idOf := func(cfg config.DB) string {
				t.Helper()
				d := dbtest.Open(t, cfg)
				in, err := d.Installation(ctx)
				if err != nil {
					t.Fatal(err)
				}
				id := in.ID
				if in.LegacyClientID {
					t.Errorf("a fresh database is marked legacy")
				}
				if len(id) != 32 {
					t.Fatalf("installation id %q, want 32 hex digits", id)
				}
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
				return id
			}
			a, b := idOf(cfgA), idOf(cfgB)
			if a == b {
				t.Fatalf("two fresh databases share installation id %s", a)
			}
			if again := idOf(cfgA); again != a {
				t.Errorf("installation id changed across a restart: %s then %s", a, again)
			}
		})
	}
}
