package db

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"testing"
	"testing/fstest"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestInstallationLegacyIntegration: a database that had tenants before
// migration 0009 is marked legacy (its serve-api keeps the host-name client
// id and the broker session queued under it); one that had nothing is not.
func TestInstallationLegacyIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: skipped in -short mode")
	}
	ctx := context.Background()
	for _, e := range []struct {
		name  string
		fresh func(testing.TB) config.DB
	}{{"postgres", coretest.Postgres}, {"sqlite", coretest.SQLite}} {
		for _, inUse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/in use %v", e.name, inUse), func(t *testing.T) {
				d, err := Open(ctx, e.fresh(t), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				dir := path.Join("migrations", string(d.engine))
				before := fstest.MapFS{}
				names, err := fs.Glob(embeddedMigrations, dir+"/000[1-8]_*.sql")
				if err != nil || len(names) != 8 {
					t.Fatalf("migrations before 0009: %v, %v", names, err)
				}
				for _, n := range names {
					b, _ := fs.ReadFile(embeddedMigrations, n)
					before[n] = &fstest.MapFile{Data: b}
				}
				if _, err := d.migrate(ctx, before, dir, true); err != nil {
					t.Fatal(err)
				}
				if inUse {
					if _, err := d.SQL().ExecContext(ctx, `INSERT INTO tenants (uuid, name, created_at) VALUES ($1, $2, $3)`,
						"6f1c8c3e-4a55-4d2b-9a59-0f2b3c4d5e6f", "acme", d.Dialect().TimeArg(time.Now())); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := d.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				in, err := d.Installation(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if in.LegacyClientID != inUse || len(in.ID) != 32 {
					t.Errorf("database in use before 0009: %v; installation = %+v, want legacy %v", inUse, in, inUse)
				}
			})
		}
	}
}
