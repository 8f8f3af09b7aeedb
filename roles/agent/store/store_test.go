package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestOpenRestrictsModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	for path, want := range map[string]os.FileMode{dir: 0o700, s.Path(): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %o, want %o", path, got, want)
		}
	}
}

func TestEndpoints(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	a := adapters.Endpoint{UUID: "u-a", Name: "plc-a", Protocol: "modbus", Enabled: true, PollIntervalMS: 1000,
		DataPoints: []adapters.DataPoint{{Name: "temp", Register: "holding:1", Type: "int16"}}}
	b := adapters.Endpoint{UUID: "u-b", Name: "opc-b", Protocol: "opcua", PollIntervalMS: 500}
	for _, ep := range []adapters.Endpoint{a, b} {
		if err := s.Endpoints().Create(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	dup := b
	dup.UUID = "u-c"
	if err := s.Endpoints().Create(ctx, dup); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate name: err = %v, want ErrDuplicate", err)
	}
	for _, ref := range []string{"u-a", "plc-a"} {
		got, err := s.Endpoints().Get(ctx, ref)
		if err != nil || got.UUID != "u-a" || got.DataPoints[0].Register != "holding:1" {
			t.Fatalf("Endpoint(%s) = %+v, %v", ref, got, err)
		}
	}
	if _, err := s.Endpoints().Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Endpoint(nope) err = %v", err)
	}
	list, err := s.Endpoints().List(ctx, "modbus")
	if err != nil || len(list) != 1 || list[0].Name != "plc-a" {
		t.Fatalf("Endpoints(modbus) = %+v, %v", list, err)
	}
	a.Enabled = false
	if err := s.Endpoints().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Endpoints().Get(ctx, "u-a"); got.Enabled {
		t.Fatal("update not stored")
	}
	if err := s.Endpoints().Delete(ctx, "u-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Endpoints().Delete(ctx, "u-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete err = %v", err)
	}
	removed, err := s.Endpoints().DeleteAll(ctx)
	if err != nil || len(removed) != 1 || removed[0] != "u-b" {
		t.Fatalf("DeleteAllEndpoints = %v, %v", removed, err)
	}
}

func TestAdminsAndSessions(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	created, err := s.Admins().CreateFirst(ctx, AdminUser{Username: "root", PasswordHash: "h1"})
	if err != nil || !created {
		t.Fatalf("CreateFirstAdmin = %v, %v", created, err)
	}
	if created, _ := s.Admins().CreateFirst(ctx, AdminUser{Username: "other", PasswordHash: "h"}); created {
		t.Fatal("a second first admin was created")
	}
	if err := s.Admins().Create(ctx, AdminUser{Username: "root", PasswordHash: "x"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate admin err = %v", err)
	}
	now := time.Now()
	if err := s.Admins().CreateSession(ctx, "sess", "root", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if u, err := s.Admins().SessionUser(ctx, "sess", now); err != nil || u.Username != "root" || !u.Superuser {
		t.Fatalf("SessionUser = %+v, %v", u, err)
	}
	if _, err := s.Admins().SessionUser(ctx, "sess", now.Add(2*time.Hour)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired session err = %v", err)
	}
	hash := "h2"
	if _, err := s.Admins().Update(ctx, "root", AdminPatch{PasswordHash: &hash}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admins().SessionUser(ctx, "sess", now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("session survived a password change: %v", err)
	}
	if err := s.Admins().CreateSession(ctx, "s2", "root", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Admins().Delete(ctx, "root"); !errors.Is(err, ErrLastSuperuser) {
		t.Fatalf("deleting the only superuser: err = %v, want ErrLastSuperuser", err)
	}
	off := false
	if _, err := s.Admins().Update(ctx, "root", AdminPatch{Active: &off}); !errors.Is(err, ErrLastSuperuser) {
		t.Fatalf("deactivating the only superuser: err = %v, want ErrLastSuperuser", err)
	}
	if _, err := s.Admins().SessionUser(ctx, "s2", now); err != nil {
		t.Fatalf("a refused change ended the session: %v", err)
	}
	if err := s.Admins().Create(ctx, AdminUser{Username: "second", PasswordHash: "h", Active: true, Superuser: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Admins().Delete(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admins().SessionUser(ctx, "s2", now); !errors.Is(err, ErrNotFound) {
		t.Fatalf("session survived its user: %v", err)
	}
}

func TestStats(t *testing.T) {
	s := open(t, t.TempDir())
	if err := s.SaveSettings(context.Background(), []byte(`{"logging":{"level":"info"}}`)); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exists || st.SizeBytes == 0 || st.TableCount < 5 {
		t.Fatalf("Stats = %+v", st)
	}
	rows := map[string]int64{}
	for _, tb := range st.Tables {
		rows[tb.Name] = tb.Rows
	}
	if rows["settings"] != 1 || rows["endpoints"] != 0 {
		t.Fatalf("row counts = %v", rows)
	}
}

// TestSurvivesKill writes endpoints from a child process, kills it with
// SIGKILL mid-stream, and checks the file is sound and holds every write
// the child reported committed.
func TestSurvivesKill(t *testing.T) {
	if dir := killChildDir("TestSurvivesKill"); dir != "" {
		killChild(dir)
		return
	}
	dir := t.TempDir()
	committed := int(runAndKill(t, "TestSurvivesKill", dir, 300))
	s := open(t, dir)
	if v, err := s.IntegrityCheck(context.Background()); err != nil || v != "ok" {
		t.Fatalf("integrity_check = %q, %v", v, err)
	}
	eps, err := s.Endpoints().List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) < committed {
		t.Fatalf("%d endpoints after kill, child had committed %d", len(eps), committed)
	}
}

func killChild(dir string) {
	s, err := Open(context.Background(), dir, nil)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for i := 1; ; i++ {
		ep := adapters.Endpoint{UUID: fmt.Sprintf("u-%d", i), Name: fmt.Sprintf("ep-%d", i), Protocol: "modbus", PollIntervalMS: 1000}
		if err := s.Endpoints().Create(context.Background(), ep); err != nil {
			fmt.Println("write:", err)
			os.Exit(1)
		}
		fmt.Println(i)
	}
}
