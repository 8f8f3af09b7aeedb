package accounts

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// engines are the databases the store runs on; each test runs on both.
var engines = []string{"postgres", "sqlite"}

const testPassword = "correct horse battery"

// newTestStore returns a store on a fresh migrated database of engine.
func newTestStore(t *testing.T, engine string) (*Store, *db.DB) {
	t.Helper()
	d := dbtest.Migrated(t, engine)
	return NewStore(d), d
}

// forEngines runs fn, in parallel, on a fresh store of each engine.
func forEngines(t *testing.T, fn func(t *testing.T, s *Store, d *db.DB)) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s, d := newTestStore(t, engine)
			fn(t, s, d)
		})
	}
}

// mustRegister creates a tenant whose admin has e-mail email.
func mustRegister(t *testing.T, s *Store, email string) User {
	t.Helper()
	u, err := s.Register(t.Context(), "", NewUser{Email: email, Password: testPassword})
	if err != nil {
		t.Fatalf("register %s: %v", email, err)
	}
	return u
}

// changes records the user ids OnChange listeners are told of.
type changes struct {
	mu  sync.Mutex
	ids []string
}

func (c *changes) listen(s *Store) {
	s.OnChange(func(_ context.Context, id string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.ids = append(c.ids, id)
	})
}

// take returns the ids recorded since the last call.
func (c *changes) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := c.ids
	c.ids = nil
	return ids
}

func TestBootstrapIntegration(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s, _ := newTestStore(t, engine)
			ctx := t.Context()
			if _, err := s.Bootstrap(ctx, NewUser{Email: "ops@example.com", Password: "short"}); !errors.Is(err, ErrWeakPassword) {
				t.Fatalf("bootstrap with a weak password: %v, want ErrWeakPassword", err)
			}
			// The refused call took no lock: the next one is the first.
			u, err := s.Bootstrap(ctx, NewUser{Email: " Ops@Example.com ", Username: "Ops", Password: testPassword, Role: RoleMember})
			if err != nil {
				t.Fatal(err)
			}
			if u.Role != RoleAdmin || u.Email != "ops@example.com" || u.Username != "ops" || !u.Active || u.TenantUUID == "" {
				t.Errorf("bootstrapped admin = %+v", u)
			}
			if _, err := s.Bootstrap(ctx, NewUser{Email: "second@example.com", Password: testPassword}); !errors.Is(err, ErrBootstrapped) {
				t.Errorf("second bootstrap: %v, want ErrBootstrapped", err)
			}

			// An installation that has accounts already cannot be
			// bootstrapped either.
			s2, _ := newTestStore(t, engine)
			mustRegister(t, s2, "self@example.com")
			if _, err := s2.Bootstrap(ctx, NewUser{Email: "ops@example.com", Password: testPassword}); !errors.Is(err, ErrBootstrapped) {
				t.Errorf("bootstrap after a registration: %v, want ErrBootstrapped", err)
			}
		})
	}
}

func TestRegisterIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, d *db.DB) {
		ctx := t.Context()
		a, err := s.Register(ctx, "  Plant A  ", NewUser{Email: "a@example.com", Password: testPassword, Role: RoleMember})
		if err != nil {
			t.Fatal(err)
		}
		if a.Role != RoleAdmin {
			t.Errorf("the first account of a tenant is %q, want admin", a.Role)
		}
		var name string
		if err := d.SQL().QueryRowContext(ctx, `SELECT name FROM tenants WHERE uuid = $1`, a.TenantUUID).Scan(&name); err != nil || name != "Plant A" {
			t.Errorf("tenant name %q, %v; want the trimmed name", name, err)
		}
		b := mustRegister(t, s, "b@example.com")
		if b.TenantUUID == a.TenantUUID {
			t.Error("two registrations share a tenant")
		}
		if err := d.SQL().QueryRowContext(ctx, `SELECT name FROM tenants WHERE uuid = $1`, b.TenantUUID).Scan(&name); err != nil || name != "b@example.com" {
			t.Errorf("tenant without a name is called %q, %v; want the e-mail", name, err)
		}
		for _, tt := range []struct {
			name   string
			tenant string
			user   NewUser
			want   error
		}{
			{"taken e-mail", "", NewUser{Email: "A@example.com", Password: testPassword}, ErrConflict},
			{"invalid e-mail", "", NewUser{Email: "a.example.com", Password: testPassword}, ErrInvalid},
			{"weak password", "", NewUser{Email: "c@example.com", Password: "1234567"}, ErrWeakPassword},
			{"long tenant name", strings.Repeat("x", 201), NewUser{Email: "c@example.com", Password: testPassword}, ErrInvalid},
		} {
			if _, err := s.Register(ctx, tt.tenant, tt.user); !errors.Is(err, tt.want) {
				t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
			}
		}
		// A refused registration leaves no tenant behind.
		var tenants int
		if err := d.SQL().QueryRowContext(ctx, `SELECT count(*) FROM tenants`).Scan(&tenants); err != nil || tenants != 2 {
			t.Errorf("%d tenants, %v; want 2", tenants, err)
		}
	})
}

func TestUsersIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, _ *db.DB) {
		ctx := t.Context()
		admin := mustRegister(t, s, "admin@example.com")
		other := mustRegister(t, s, "other@example.com")
		tenant := admin.TenantUUID

		member, err := s.CreateUser(ctx, tenant, NewUser{Email: " Member@Example.com", Username: " Line-3.op ", Password: testPassword})
		if err != nil {
			t.Fatal(err)
		}
		if member.Role != RoleMember || member.Email != "member@example.com" || member.Username != "line-3.op" || member.TenantUUID != tenant {
			t.Errorf("created member = %+v", member)
		}
		for _, tt := range []struct {
			name string
			user NewUser
			want error
		}{
			{"no e-mail", NewUser{Password: testPassword}, ErrInvalid},
			{"not an e-mail", NewUser{Email: "member", Password: testPassword}, ErrInvalid},
			{"e-mail with a display name", NewUser{Email: "Bob <bob@example.com>", Password: testPassword}, ErrInvalid},
			{"short user name", NewUser{Email: "c@example.com", Username: "ab", Password: testPassword}, ErrInvalid},
			{"user name with @", NewUser{Email: "c@example.com", Username: "c@example", Password: testPassword}, ErrInvalid},
			{"user name starting with a dot", NewUser{Email: "c@example.com", Username: ".abc", Password: testPassword}, ErrInvalid},
			{"unknown role", NewUser{Email: "c@example.com", Password: testPassword, Role: "owner"}, ErrInvalid},
			{"short password", NewUser{Email: "c@example.com", Password: "1234567"}, ErrWeakPassword},
			{"blank password", NewUser{Email: "c@example.com", Password: "          "}, ErrWeakPassword},
			{"long password", NewUser{Email: "c@example.com", Password: strings.Repeat("p", MaxPasswordLen+1)}, ErrWeakPassword},
			{"taken e-mail", NewUser{Email: "MEMBER@example.com", Password: testPassword}, ErrConflict},
			{"e-mail taken in another tenant", NewUser{Email: "other@example.com", Password: testPassword}, ErrConflict},
			{"taken user name", NewUser{Email: "c@example.com", Username: "LINE-3.OP", Password: testPassword}, ErrConflict},
		} {
			if _, err := s.CreateUser(ctx, tenant, tt.user); !errors.Is(err, tt.want) {
				t.Errorf("CreateUser, %s: %v, want %v", tt.name, err, tt.want)
			}
		}

		users, err := s.Users(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if ids := userIDs(users); !slices.Equal(ids, []string{admin.ID, member.ID}) {
			t.Errorf("Users = %v, want the admin then the member", ids)
		}
		if users, err := s.Users(ctx, other.TenantUUID); err != nil || !slices.Equal(userIDs(users), []string{other.ID}) {
			t.Errorf("other tenant's Users = %v, %v", userIDs(users), err)
		}
		if users, err := s.Users(ctx, "00000000-0000-4000-8000-000000000000"); err != nil || users == nil || len(users) != 0 {
			t.Errorf("unknown tenant's Users = %#v, %v; want an empty list", users, err)
		}

		if u, err := s.User(ctx, tenant, member.ID); err != nil || u.Email != member.Email || !u.CreatedAt.Equal(member.CreatedAt) {
			t.Errorf("User = %+v, %v", u, err)
		}
		for _, tt := range []struct{ name, tenant, id string }{
			{"another tenant's account", other.TenantUUID, member.ID},
			{"unknown id", tenant, "00000000-0000-4000-8000-000000000000"},
			{"malformed id", tenant, "member"},
		} {
			if _, err := s.User(ctx, tt.tenant, tt.id); !errors.Is(err, ErrNotFound) {
				t.Errorf("User, %s: %v, want ErrNotFound", tt.name, err)
			}
		}
	})
}

func userIDs(users []User) []string {
	var ids []string
	for _, u := range users {
		ids = append(ids, u.ID)
	}
	return ids
}

func TestAuthenticateIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, _ *db.DB) {
		ctx := t.Context()
		admin := mustRegister(t, s, "admin@example.com")
		member, err := s.CreateUser(ctx, admin.TenantUUID, NewUser{Email: "m@example.com", Username: "op1", Password: testPassword})
		if err != nil {
			t.Fatal(err)
		}
		inactive := false
		if _, err := s.CreateUser(ctx, admin.TenantUUID, NewUser{Email: "gone@example.com", Password: testPassword}); err != nil {
			t.Fatal(err)
		}
		gone, err := s.UserByEmail(ctx, "gone@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateUser(ctx, admin.TenantUUID, gone.ID, UserUpdate{Active: &inactive}); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name, login, password string
			want                  string // the user id; "" for a refusal
			tenant                string // the tenant a refusal names
		}{
			{"e-mail", "m@example.com", testPassword, member.ID, ""},
			{"e-mail in other case, with spaces", " M@Example.COM ", testPassword, member.ID, ""},
			{"user name", "OP1", testPassword, member.ID, ""},
			{"wrong password", "m@example.com", testPassword + "!", "", admin.TenantUUID},
			{"inactive account", "gone@example.com", testPassword, "", admin.TenantUUID},
			{"unknown account", "nobody@example.com", testPassword, "", ""},
			{"empty login", "", testPassword, "", ""},
		} {
			u, err := s.Authenticate(ctx, tt.login, tt.password)
			switch {
			case tt.want != "" && (err != nil || u.ID != tt.want):
				t.Errorf("%s: %+v, %v; want user %s", tt.name, u, err, tt.want)
			case tt.want == "" && (!errors.Is(err, ErrBadCredentials) || u.ID != "" || u.TenantUUID != tt.tenant):
				t.Errorf("%s: %+v, %v; want ErrBadCredentials naming tenant %q only", tt.name, u, err, tt.tenant)
			}
		}
		if _, err := s.UserByEmail(ctx, "gone@example.com"); !errors.Is(err, ErrNotFound) {
			t.Errorf("UserByEmail of an inactive account: %v, want ErrNotFound", err)
		}
		if _, err := s.UserByEmail(ctx, "nobody@example.com"); !errors.Is(err, ErrNotFound) {
			t.Errorf("UserByEmail of an unknown account: %v, want ErrNotFound", err)
		}
	})
}

func TestUpdateUserIntegration(t *testing.T) {
	ptr := func(s string) *string { return &s }
	no := false
	forEngines(t, func(t *testing.T, s *Store, _ *db.DB) {
		ctx := t.Context()
		var seen changes
		seen.listen(s)
		admin := mustRegister(t, s, "admin@example.com")
		other := mustRegister(t, s, "other@example.com")
		tenant := admin.TenantUUID
		member, err := s.CreateUser(ctx, tenant, NewUser{Email: "m@example.com", Username: "op1", Password: testPassword})
		if err != nil {
			t.Fatal(err)
		}
		seen.take()

		for _, tt := range []struct {
			name   string
			tenant string
			id     string
			up     UserUpdate
			want   error
		}{
			{"demote the last admin", tenant, admin.ID, UserUpdate{Role: ptr(RoleMember)}, ErrLastAdmin},
			{"deactivate the last admin", tenant, admin.ID, UserUpdate{Active: &no}, ErrLastAdmin},
			{"unknown role", tenant, member.ID, UserUpdate{Role: ptr("owner")}, ErrInvalid},
			{"invalid e-mail", tenant, member.ID, UserUpdate{Email: ptr("m")}, ErrInvalid},
			{"invalid user name", tenant, member.ID, UserUpdate{Username: ptr("a b")}, ErrInvalid},
			{"e-mail of another account", tenant, member.ID, UserUpdate{Email: ptr("Other@example.com")}, ErrConflict},
			{"another tenant's account", other.TenantUUID, member.ID, UserUpdate{Role: ptr(RoleAdmin)}, ErrNotFound},
			{"malformed id", tenant, "op1", UserUpdate{Role: ptr(RoleAdmin)}, ErrNotFound},
		} {
			if _, err := s.UpdateUser(ctx, tt.tenant, tt.id, tt.up); !errors.Is(err, tt.want) {
				t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
			}
		}
		if ids := seen.take(); len(ids) != 0 {
			t.Errorf("refused updates told listeners of %v", ids)
		}
		if u, err := s.User(ctx, tenant, member.ID); err != nil || u.Role != RoleMember || u.Email != "m@example.com" {
			t.Errorf("refused updates changed the account: %+v, %v", u, err)
		}

		u, err := s.UpdateUser(ctx, tenant, member.ID, UserUpdate{Email: ptr(" M2@Example.com "), Username: ptr(""), Role: ptr(RoleAdmin)})
		if err != nil {
			t.Fatal(err)
		}
		if u.Email != "m2@example.com" || u.Username != "" || u.Role != RoleAdmin || u.UpdatedAt.Before(member.UpdatedAt) {
			t.Errorf("updated = %+v", u)
		}
		if got, err := s.User(ctx, tenant, member.ID); err != nil || got.Email != u.Email || got.Username != "" || got.Role != RoleAdmin {
			t.Errorf("stored = %+v, %v", got, err)
		}
		if ids := seen.take(); !slices.Equal(ids, []string{member.ID}) {
			t.Errorf("listeners told of %v, want the member", ids)
		}

		// With a second admin the first may step down.
		if _, err := s.UpdateUser(ctx, tenant, admin.ID, UserUpdate{Role: ptr(RoleMember)}); err != nil {
			t.Errorf("demoting an admin who is not the last: %v", err)
		}

		// Deactivating ends the account's sessions.
		if err := s.StartSession(ctx, member.ID, "fam-1", "jti-1", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateUser(ctx, tenant, admin.ID, UserUpdate{Active: &no}); err != nil {
			t.Fatalf("deactivating a member: %v", err)
		}
		if _, err := s.UpdateUser(ctx, tenant, member.ID, UserUpdate{Active: &no}); !errors.Is(err, ErrLastAdmin) {
			t.Errorf("deactivating the last active admin: %v, want ErrLastAdmin", err)
		}
		yes := true
		if _, err := s.UpdateUser(ctx, tenant, admin.ID, UserUpdate{Active: &yes, Role: ptr(RoleAdmin)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateUser(ctx, tenant, member.ID, UserUpdate{Active: &no}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Rotate(ctx, member.ID, "fam-1", "jti-1", "jti-2", time.Now().Add(time.Hour)); !errors.Is(err, ErrRevoked) {
			t.Errorf("refresh after deactivation: %v, want ErrRevoked", err)
		}
	})
}

func TestDeleteUserIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, _ *db.DB) {
		ctx := t.Context()
		var seen changes
		seen.listen(s)
		admin := mustRegister(t, s, "admin@example.com")
		other := mustRegister(t, s, "other@example.com")
		member, err := s.CreateUser(ctx, admin.TenantUUID, NewUser{Email: "m@example.com", Password: testPassword})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.CreateAPIKey(ctx, admin.TenantUUID, member.ID, "script", ""); err != nil {
			t.Fatal(err)
		}
		seen.take()
		for _, tt := range []struct {
			name, tenant, id string
			want             error
		}{
			{"the last admin", admin.TenantUUID, admin.ID, ErrLastAdmin},
			{"another tenant's account", other.TenantUUID, member.ID, ErrNotFound},
			{"unknown id", admin.TenantUUID, "00000000-0000-4000-8000-000000000000", ErrNotFound},
			{"malformed id", admin.TenantUUID, "m@example.com", ErrNotFound},
		} {
			if err := s.DeleteUser(ctx, tt.tenant, tt.id); !errors.Is(err, tt.want) {
				t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
			}
		}
		if err := s.DeleteUser(ctx, admin.TenantUUID, member.ID); err != nil {
			t.Fatal(err)
		}
		if ids := seen.take(); !slices.Equal(ids, []string{member.ID}) {
			t.Errorf("listeners told of %v, want the member", ids)
		}
		if _, err := s.User(ctx, admin.TenantUUID, member.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("User after delete: %v", err)
		}
		if keys, err := s.APIKeys(ctx, admin.TenantUUID, ""); err != nil || len(keys) != 0 {
			t.Errorf("the deleted account's keys remain: %+v, %v", keys, err)
		}
		if err := s.DeleteUser(ctx, admin.TenantUUID, member.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("second delete: %v, want ErrNotFound", err)
		}
	})
}

func TestChangePasswordIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, _ *db.DB) {
		ctx := t.Context()
		u := mustRegister(t, s, "a@example.com")
		other := mustRegister(t, s, "b@example.com")
		if err := s.StartSession(ctx, u.ID, "fam-1", "jti-1", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		const next = "a new password, longer"
		for _, tt := range []struct {
			name, tenant, current, next string
			want                        error
		}{
			{"wrong current password", u.TenantUUID, "wrong password", next, ErrBadCredentials},
			{"another tenant", other.TenantUUID, testPassword, next, ErrBadCredentials},
			{"weak new password", u.TenantUUID, testPassword, "short", ErrWeakPassword},
		} {
			if err := s.ChangePassword(ctx, tt.tenant, u.ID, tt.current, tt.next); !errors.Is(err, tt.want) {
				t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
			}
		}
		if _, err := s.Authenticate(ctx, "a@example.com", testPassword); err != nil {
			t.Fatalf("refused changes changed the password: %v", err)
		}
		if err := s.ChangePassword(ctx, u.TenantUUID, u.ID, testPassword, next); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, "a@example.com", testPassword); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("old password after the change: %v", err)
		}
		if _, err := s.Authenticate(ctx, "a@example.com", next); err != nil {
			t.Errorf("new password: %v", err)
		}
		if _, err := s.Rotate(ctx, u.ID, "fam-1", "jti-1", "jti-2", time.Now().Add(time.Hour)); !errors.Is(err, ErrRevoked) {
			t.Errorf("a session from before the change: %v, want ErrRevoked", err)
		}
	})
}

func TestSessionsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, _ *db.DB) {
		ctx := t.Context()
		var seen changes
		seen.listen(s)
		u := mustRegister(t, s, "a@example.com")
		other := mustRegister(t, s, "b@example.com")
		exp := time.Now().Add(time.Hour)
		if err := s.StartSession(ctx, u.ID, "fam-1", "jti-1", exp); err != nil {
			t.Fatal(err)
		}
		if err := s.StartSession(ctx, u.ID, "fam-1", "jti-x", exp); err == nil {
			t.Error("a second session with the same family id was started")
		}
		got, err := s.Rotate(ctx, u.ID, "fam-1", "jti-1", "jti-2", exp)
		if err != nil || got.ID != u.ID || got.Role != RoleAdmin {
			t.Fatalf("Rotate = %+v, %v", got, err)
		}
		for _, tt := range []struct {
			name, user, family, jti string
			want                    error
		}{
			{"unknown family", u.ID, "fam-9", "jti-2", ErrRevoked},
			{"another account's family", other.ID, "fam-1", "jti-2", ErrRevoked},
		} {
			if _, err := s.Rotate(ctx, tt.user, tt.family, tt.jti, "jti-3", exp); !errors.Is(err, tt.want) {
				t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
			}
		}
		if _, err := s.Rotate(ctx, u.ID, "fam-1", "jti-2", "jti-3", exp); err != nil {
			t.Fatalf("the refused rotations touched the family: %v", err)
		}
		seen.take()

		// The rotated-away token again: the family is revoked, for its
		// current token too.
		if _, err := s.Rotate(ctx, u.ID, "fam-1", "jti-2", "jti-4", exp); !errors.Is(err, ErrTokenReuse) {
			t.Fatalf("reuse: %v, want ErrTokenReuse", err)
		}
		if ids := seen.take(); !slices.Equal(ids, []string{u.ID}) {
			t.Errorf("reuse told listeners of %v", ids)
		}
		if _, err := s.Rotate(ctx, u.ID, "fam-1", "jti-3", "jti-4", exp); !errors.Is(err, ErrRevoked) {
			t.Errorf("the current token after reuse: %v, want ErrRevoked", err)
		}

		// An expired family is ended, not replayed: its current token
		// can arrive just after the expiry (token.Verify allows a few
		// seconds of clock skew), and that is no reuse to alarm about.
		if err := s.StartSession(ctx, u.ID, "fam-old", "jti-1", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		seen.take()
		if _, err := s.Rotate(ctx, u.ID, "fam-old", "jti-1", "jti-2", exp); !errors.Is(err, ErrRevoked) {
			t.Errorf("the current token of an expired family: %v, want ErrRevoked", err)
		}
		if _, err := s.Rotate(ctx, u.ID, "fam-old", "jti-0", "jti-2", exp); !errors.Is(err, ErrRevoked) {
			t.Errorf("a stale token of an expired family: %v, want ErrRevoked", err)
		}
		if ids := seen.take(); len(ids) != 0 {
			t.Errorf("refreshing an expired family told listeners of %v", ids)
		}

		// Logout ends the session and may be repeated.
		if err := s.StartSession(ctx, u.ID, "fam-2", "jti-1", exp); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := s.EndSession(ctx, u.ID, "fam-2"); err != nil {
				t.Errorf("EndSession: %v", err)
			}
		}
		if err := s.EndSession(ctx, u.ID, "fam-unknown"); err != nil {
			t.Errorf("EndSession of an unknown family: %v", err)
		}
		if _, err := s.Rotate(ctx, u.ID, "fam-2", "jti-1", "jti-2", exp); !errors.Is(err, ErrRevoked) {
			t.Errorf("refresh after logout: %v, want ErrRevoked", err)
		}
	})
}
