package db

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

func TestLoadMigrations(t *testing.T) {
	for _, e := range []Engine{Postgres, SQLite} {
		ms, err := loadMigrations(embeddedMigrations, "migrations/"+string(e))
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		if ms[0].name != "0001_readings" || ms[0].version != 1 || len(ms[0].checksum) != 64 {
			t.Errorf("%s: first migration = %+v", e, ms[0])
		}
	}
	// Both engines must offer the same versions under the same names, or
	// the two schemas drift apart.
	pg, _ := loadMigrations(embeddedMigrations, "migrations/postgres")
	lite, _ := loadMigrations(embeddedMigrations, "migrations/sqlite")
	if len(pg) != len(lite) {
		t.Fatalf("postgres has %d migrations, sqlite %d", len(pg), len(lite))
	}
	for i := range pg {
		if pg[i].name != lite[i].name {
			t.Errorf("migration %d: postgres %s, sqlite %s", i, pg[i].name, lite[i].name)
		}
	}
}

func TestLoadMigrationsRejects(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"bad name", map[string]string{"m/1_x.sql": "SELECT 1"}, "NNNN_name.sql"},
		{"upper case", map[string]string{"m/0001_X.sql": "SELECT 1"}, "NNNN_name.sql"},
		{"zero", map[string]string{"m/0000_x.sql": "SELECT 1"}, "positive"},
		{"duplicate", map[string]string{"m/0001_a.sql": "SELECT 1", "m/0001_b.sql": "SELECT 1"}, "share version 1"},
		{"empty", map[string]string{"m/0001_a.sql": " \n"}, "empty"},
		{"none", map[string]string{"other/0001_a.sql": "SELECT 1"}, "read migrations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for p, s := range tt.files {
				fsys[p] = &fstest.MapFile{Data: []byte(s)}
			}
			_, err := loadMigrations(fsys, "m")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	ms := []migration{
		{version: 1, name: "0001_a", checksum: "aa"},
		{version: 2, name: "0002_b", checksum: "bb"},
		{version: 4, name: "0004_c", checksum: "cc"},
	}
	names := func(ms []migration) (s []string) {
		for _, m := range ms {
			s = append(s, m.name)
		}
		return s
	}
	tests := []struct {
		name    string
		applied []appliedMigration
		from    int64
		pending string
		wantErr string
		is      error
	}{
		{"empty", nil, 0, "0001_a 0002_b 0004_c", "", nil},
		{"partly", []appliedMigration{{1, "0001_a", "aa"}}, 1, "0002_b 0004_c", "", nil},
		{"current", []appliedMigration{{1, "0001_a", "aa"}, {2, "0002_b", "bb"}, {4, "0004_c", "cc"}}, 4, "", "", nil},
		{"edited", []appliedMigration{{1, "0001_a", "aa"}, {2, "0002_b", "XX"}}, 0, "", "0002_b.sql", ErrMigrationChanged},
		{"newer", []appliedMigration{{1, "0001_a", "aa"}, {9, "0009_z", "zz"}}, 0, "", "version 9 (0009_z)", ErrSchemaNewer},
		{"unknown", []appliedMigration{{1, "0001_a", "aa"}, {2, "0002_b", "bb"}, {3, "0003_gone", "gg"}}, 0, "", "3 (0003_gone) is not in this binary", nil},
		{"skipped", []appliedMigration{{1, "0001_a", "aa"}, {4, "0004_c", "cc"}}, 0, "", "0002_b was never applied", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, pending, err := plan(ms, tt.applied)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Fatalf("error %v is not %v", err, tt.is)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(pending), " "); from != tt.from || got != tt.pending {
				t.Fatalf("plan = %d [%s], want %d [%s]", from, got, tt.from, tt.pending)
			}
		})
	}
}

// schemaVersions reads schema_migrations through the portable handle.
func schemaVersions(t *testing.T, d *DB) []int64 {
	t.Helper()
	rows, err := d.ReadSQL().QueryContext(testCtx(t), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestMigrateIntegration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, cfg config.DB) {
		d := openDB(t, cfg)
		n := embeddedCount(t, d.Dialect().Engine)
		res, err := d.Migrate(testCtx(t))
		if err != nil {
			t.Fatalf("migrate: %v", err)
		}
		if res.From != 0 || res.To != int64(n) || len(res.Applied) != n {
			t.Fatalf("first run = %+v, want 0 -> %d applying %d", res, n, n)
		}
		wantStorage := map[Engine]string{SQLite: StorageSQLite, Postgres: StoragePartitioned}[Engine(cfg.Driver)]
		if d.Dialect().Timescale {
			wantStorage = StorageHypertable
		}
		if res.Storage != wantStorage {
			t.Errorf("storage = %q, want %q", res.Storage, wantStorage)
		}
		if got := schemaVersions(t, d); len(got) != n {
			t.Fatalf("schema_migrations has %v, want %d rows", got, n)
		}
		// Every table and index the migrations promise exists.
		for _, q := range []string{
			"SELECT count(*) FROM readings",
			"SELECT count(*) FROM agent_logs WHERE agent_uuid IS NULL",
		} {
			var c int
			if err := d.SQL().QueryRowContext(testCtx(t), q).Scan(&c); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}

		// The second run, the normal start-up, is a no-op.
		res, err = d.Migrate(testCtx(t))
		if err != nil {
			t.Fatalf("second migrate: %v", err)
		}
		if res.From != int64(n) || res.To != int64(n) || len(res.Applied) != 0 {
			t.Fatalf("second run = %+v, want a no-op at %d", res, n)
		}

		// A fresh handle (a restart) agrees.
		d2 := openDB(t, cfg)
		if res, err := d2.Migrate(testCtx(t)); err != nil || len(res.Applied) != 0 {
			t.Fatalf("migrate after reopen = %+v, %v", res, err)
		}
	})
}

// TestMigrateConcurrentIntegration starts five migrators with their own
// handles, as five replicas starting together would: every migration must be
// applied exactly once (a second apply would fail on CREATE TABLE or on the
// schema_migrations key) and all five must succeed.
func TestMigrateConcurrentIntegration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, cfg config.DB) {
		const replicas = 5
		n := embeddedCount(t, Engine(cfg.Driver))
		dbs := make([]*DB, replicas)
		for i := range dbs {
			dbs[i] = openDB(t, cfg)
		}
		results := make([]MigrateResult, replicas)
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range dbs {
			wg.Go(func() {
				<-start
				results[i], errs[i] = dbs[i].Migrate(testCtx(t))
			})
		}
		close(start)
		wg.Wait()
		applied := map[string]int{}
		for i := range dbs {
			if errs[i] != nil {
				t.Fatalf("replica %d: %v", i, errs[i])
			}
			if results[i].To != int64(n) {
				t.Errorf("replica %d ended at version %d, want %d", i, results[i].To, n)
			}
			for _, name := range results[i].Applied {
				applied[name]++
			}
		}
		if len(applied) != n {
			t.Errorf("applied %v, want each of %d migrations", applied, n)
		}
		for name, c := range applied {
			if c != 1 {
				t.Errorf("migration %s applied %d times", name, c)
			}
		}
		if got := schemaVersions(t, dbs[0]); len(got) != n {
			t.Errorf("schema_migrations = %v, want %d rows", got, n)
		}
	})
}

func TestMigrateRefusesEditedMigrationIntegration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, cfg config.DB) {
		d := migratedDB(t, cfg)
		// What an edited 0001_readings.sql looks like from the database:
		// the recorded checksum no longer matches the file.
		if _, err := d.SQL().ExecContext(testCtx(t),
			"UPDATE schema_migrations SET checksum = $1 WHERE version = 1", strings.Repeat("0", 64)); err != nil {
			t.Fatal(err)
		}
		_, err := d.Migrate(testCtx(t))
		if !errors.Is(err, ErrMigrationChanged) || !strings.Contains(err.Error(), "0001_readings.sql") {
			t.Fatalf("migrate = %v, want ErrMigrationChanged naming 0001_readings.sql", err)
		}
	})
}

func TestMigrateRefusesNewerSchemaIntegration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, cfg config.DB) {
		d := migratedDB(t, cfg)
		if _, err := d.SQL().ExecContext(testCtx(t),
			"INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)",
			9999, "9999_from_the_future", "ff", d.Dialect().TimeArg(time.Now())); err != nil {
			t.Fatal(err)
		}
		_, err := d.Migrate(testCtx(t))
		if !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), "9999") {
			t.Fatalf("migrate = %v, want ErrSchemaNewer naming 9999", err)
		}
	})
}

// TestMigrateFailureRollsBackIntegration: a failing migration leaves neither
// its partial DDL nor a schema_migrations row, and the error names it.
func TestMigrateFailureRollsBackIntegration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, cfg config.DB) {
		d := openDB(t, cfg)
		dir := path.Join("migrations", cfg.Driver)
		fsys := fstest.MapFS{}
		err := fs.WalkDir(embeddedMigrations, dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := fs.ReadFile(embeddedMigrations, p)
			fsys[p] = &fstest.MapFile{Data: b}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		fsys[path.Join(dir, "0900_broken.sql")] = &fstest.MapFile{
			Data: []byte("CREATE TABLE half_done (x integer);\nSELECT * FROM no_such_table;\n"),
		}
		_, err = d.migrate(testCtx(t), fsys, dir, true)
		if err == nil || !strings.Contains(err.Error(), "apply migration 0900_broken") {
			t.Fatalf("migrate = %v, want a failure naming 0900_broken", err)
		}
		n := embeddedCount(t, Engine(cfg.Driver))
		if got := schemaVersions(t, d); len(got) != n {
			t.Errorf("schema_migrations = %v, want only the %d good ones", got, n)
		}
		if _, err := d.SQL().ExecContext(testCtx(t), "SELECT * FROM half_done"); err == nil {
			t.Error("half_done exists: the failed migration was not rolled back")
		}
	})
}
