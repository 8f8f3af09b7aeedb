package autoprovision

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// dbWithAdmin opens a migrated SQLite database whose admin is
// ops@example.com, password "correct horse battery".
func dbWithAdmin(t *testing.T) *db.DB {
	t.Helper()
	ctx := t.Context()
	d, err := db.Open(ctx, coretest.SQLite(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if _, err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if reason, err := adminKept(ctx, accounts.NewStore(d), "ops@example.com", "anything at all"); err != nil || reason != "" {
		t.Fatalf("without an admin: %q, %v; want nothing to warn about", reason, err)
	}
	store := accounts.NewStore(d)
	if _, err := store.Bootstrap(ctx, accounts.NewUser{Email: "ops@example.com", Password: "correct horse battery"}); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAdminKept(t *testing.T) {
	ctx := t.Context()
	d := dbWithAdmin(t)
	st := accounts.NewStore(d)
	admin, err := st.UserByEmail(ctx, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateUser(ctx, admin.TenantUUID, accounts.NewUser{Email: "member@example.com", Password: "member password", Role: accounts.RoleMember}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, email, password string
		want                  string // "" or a part of the reason
	}{
		{name: "the admin's own", email: "ops@example.com", password: "correct horse battery"},
		{name: "e-mail in capitals", email: " OPS@example.com", password: "correct horse battery"},
		{name: "e-mail alone", email: "ops@example.com"},
		{name: "other password", email: "ops@example.com", password: "another password", want: "the password is not that of the existing admin ops@example.com"},
		{name: "other e-mail", email: "me@example.com", password: "correct horse battery", want: "no admin of this data directory has the e-mail me@example.com"},
		{name: "a member's e-mail", email: "member@example.com", password: "member password", want: "no admin of this data directory has the e-mail member@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, err := adminKept(ctx, st, tt.email, tt.password)
			if err != nil {
				t.Fatal(err)
			}
			if (tt.want == "") != (reason == "") || !strings.Contains(reason, tt.want) {
				t.Errorf("reason %q, want %q", reason, tt.want)
			}
		})
	}
}

// TestWarnAdminKeptOnlyWhenConfigured: the built-in default e-mail is not
// the operator's choice, so an existing admin is no news then.
func TestWarnAdminKeptOnlyWhenConfigured(t *testing.T) {
	ctx := context.Background()
	d := dbWithAdmin(t)
	for _, tt := range []struct {
		name string
		env  map[string]string
		warn bool
	}{
		{name: "nothing set"},
		{name: "e-mail set", env: map[string]string{"EDGEPLAT_ADMIN_EMAIL": "me@example.com"}, warn: true},
		{name: "password set", env: map[string]string{"EDGEPLAT_ADMIN_PASSWORD": "some password"}, warn: true},
		{name: "the existing admin's", env: map[string]string{"EDGEPLAT_ADMIN_EMAIL": "ops@example.com", "EDGEPLAT_ADMIN_PASSWORD": "correct horse battery"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			unsetAdminEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, err := config.Load(config.LoadOptions{Role: config.RoleAllInOne})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			warnAdminKept(ctx, slog.New(slog.NewJSONHandler(&buf, nil)), cfg, d)
			if got := strings.Contains(buf.String(), `"level":"WARN"`); got != tt.warn {
				t.Errorf("warned %v, want %v:\n%s", got, tt.warn, buf.String())
			}
		})
	}
}

// unsetAdminEnv keeps the developer's shell out of the test: whether it
// warns depends on the admin settings having been set.
func unsetAdminEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{"all_in_one.admin_email", "all_in_one.admin_password"} {
		k, ok := config.KeyByName(name)
		if !ok {
			t.Fatalf("no key %s", name)
		}
		for _, env := range append([]string{k.Env}, k.Aliases...) {
			t.Setenv(env, "")
			os.Unsetenv(env)
		}
	}
}
