package brokerusers

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/brokerauth"
)

var passwordForm = regexp.MustCompile(`^[A-Za-z0-9]{32}$`)

func TestStoreIntegration(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s, d := newTestStore(t, engine)
			ctx := context.Background()
			rules := []Rule{
				{Pattern: "a/+/endpoints/#", Subscribe: true},
				{Pattern: "scada/setpoints/+", Publish: true},
			}

			u, password, err := s.Create(ctx, tenantA, adminA, NewUser{Username: "scada-plant1", Description: " SCADA, plant 1 ", Rules: rules})
			if err != nil {
				t.Fatal(err)
			}
			if !passwordForm.MatchString(password) {
				t.Errorf("password %q is not 32 characters of [A-Za-z0-9]", password)
			}
			prefix := topicPrefix(t, tenantA)
			if u.Username != "scada-plant1" || u.TenantUUID != tenantA || u.Description != "SCADA, plant 1" || u.CreatedBy != adminA ||
				u.TopicPrefix != prefix || u.CreatedAt.IsZero() || !u.UpdatedAt.Equal(u.CreatedAt) {
				t.Errorf("created user = %+v", u)
			}
			want := []Rule{
				{Pattern: "a/+/endpoints/#", Topic: prefix + "a/+/endpoints/#", Subscribe: true},
				{Pattern: "scada/setpoints/+", Topic: prefix + "scada/setpoints/+", Publish: true},
			}
			if !slices.Equal(u.Rules, want) {
				t.Errorf("rules = %+v, want %+v", u.Rules, want)
			}

			// Only a salted hash is stored.
			var stored string
			if err := d.SQL().QueryRowContext(ctx, `SELECT password_hash FROM broker_users WHERE username = $1`, "scada-plant1").Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(stored, passwordScheme) || strings.Contains(stored, password) {
				t.Errorf("stored password hash %q", stored)
			}

			id, err := s.AuthenticateBrokerUser(ctx, "scada-plant1", password)
			if err != nil {
				t.Fatal(err)
			}
			wantACL := []brokerauth.Rule{{Pattern: "a/+/endpoints/#", Subscribe: true}, {Pattern: "scada/setpoints/+", Publish: true}}
			if id.Username != "scada-plant1" || id.TenantUUID != tenantA || id.AgentUUID != "" || id.Superuser ||
				id.ACL == nil || !slices.Equal(id.ACL.Rules, wantACL) {
				t.Errorf("identity = %+v (acl %+v)", id, id.ACL)
			}
			for _, c := range []struct{ name, user, pass string }{
				{"wrong password", "scada-plant1", otherLastChar(password)},
				{"empty password", "scada-plant1", ""},
				{"unknown user", "scada-plant2", password},
				{"invalid username", "Scada Plant1", password},
			} {
				if _, err := s.AuthenticateBrokerUser(ctx, c.user, c.pass); !errors.Is(err, brokerauth.ErrDenied) {
					t.Errorf("%s: AuthenticateBrokerUser = %v, want ErrDenied", c.name, err)
				}
			}

			// The other tenant sees nothing and can change nothing.
			if users, err := s.Users(ctx, tenantB); err != nil || len(users) != 0 {
				t.Errorf("other tenant's listing = %+v, %v", users, err)
			}
			if _, err := s.User(ctx, tenantB, "scada-plant1"); !errors.Is(err, ErrNotFound) {
				t.Errorf("other tenant's get = %v, want ErrNotFound", err)
			}
			if _, _, err := s.Update(ctx, tenantB, "scada-plant1", Change{Rules: &[]Rule{{Pattern: "#", Publish: true}}}); !errors.Is(err, ErrNotFound) {
				t.Errorf("other tenant's update = %v, want ErrNotFound", err)
			}
			if _, err := s.ResetPassword(ctx, tenantB, "scada-plant1"); !errors.Is(err, ErrNotFound) {
				t.Errorf("other tenant's password reset = %v, want ErrNotFound", err)
			}
			if err := s.Delete(ctx, tenantB, "scada-plant1"); !errors.Is(err, ErrNotFound) {
				t.Errorf("other tenant's delete = %v, want ErrNotFound", err)
			}
			if _, _, err := s.Create(ctx, tenantB, adminB, NewUser{Username: "scada-plant1"}); !errors.Is(err, ErrConflict) {
				t.Errorf("other tenant creating a taken name = %v, want ErrConflict", err)
			}
			if _, err := s.AuthenticateBrokerUser(ctx, "scada-plant1", password); err != nil {
				t.Fatalf("the other tenant's attempts changed the user: %v", err)
			}

			// A second user lists in name order.
			if _, _, err := s.Create(ctx, tenantA, adminA, NewUser{Username: "dashboard", Rules: []Rule{}}); err != nil {
				t.Fatal(err)
			}
			users, err := s.Users(ctx, tenantA)
			if err != nil || len(users) != 2 || users[0].Username != "dashboard" || users[1].Username != "scada-plant1" ||
				len(users[0].Rules) != 0 || users[0].Rules == nil || len(users[1].Rules) != 2 {
				t.Fatalf("listing = %+v, %v", users, err)
			}

			// Rules are replaced; the description stays when not given.
			newRules := []Rule{{Pattern: "bridge/#", Publish: true, Subscribe: true}}
			u, pw, err := s.Update(ctx, tenantA, "scada-plant1", Change{Rules: &newRules})
			if err != nil || pw != "" {
				t.Fatalf("update = %v, password %q", err, pw)
			}
			if len(u.Rules) != 1 || u.Rules[0].Pattern != "bridge/#" || u.Description != "SCADA, plant 1" || u.UpdatedAt.Before(u.CreatedAt) {
				t.Errorf("updated user = %+v", u)
			}
			if id, err := s.AuthenticateBrokerUser(ctx, "scada-plant1", password); err != nil || len(id.ACL.Rules) != 1 || id.ACL.Rules[0].Pattern != "bridge/#" {
				t.Errorf("identity after the rule change = %+v, %v", id, err)
			}
			desc := "renamed"
			if u, _, err = s.Update(ctx, tenantA, "scada-plant1", Change{Description: &desc}); err != nil || u.Description != "renamed" || len(u.Rules) != 1 {
				t.Errorf("description update = %+v, %v", u, err)
			}

			// A password reset ends the old password.
			newPassword, err := s.ResetPassword(ctx, tenantA, "scada-plant1")
			if err != nil || !passwordForm.MatchString(newPassword) || newPassword == password {
				t.Fatalf("reset = %q, %v", newPassword, err)
			}
			if _, err := s.AuthenticateBrokerUser(ctx, "scada-plant1", password); !errors.Is(err, brokerauth.ErrDenied) {
				t.Errorf("old password after reset = %v, want ErrDenied", err)
			}
			if _, err := s.AuthenticateBrokerUser(ctx, "scada-plant1", newPassword); err != nil {
				t.Errorf("new password = %v", err)
			}

			// Deleted: gone with its rules, and refused.
			if err := s.Delete(ctx, tenantA, "scada-plant1"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AuthenticateBrokerUser(ctx, "scada-plant1", newPassword); !errors.Is(err, brokerauth.ErrDenied) {
				t.Errorf("deleted user = %v, want ErrDenied", err)
			}
			var n int
			if err := d.SQL().QueryRowContext(ctx, `SELECT count(*) FROM broker_acl WHERE username = $1`, "scada-plant1").Scan(&n); err != nil || n != 0 {
				t.Errorf("rules left after delete: %d, %v", n, err)
			}
			if err := s.Delete(ctx, tenantA, "scada-plant1"); !errors.Is(err, ErrNotFound) {
				t.Errorf("second delete = %v, want ErrNotFound", err)
			}
			// The name is free again, for any tenant.
			if _, _, err := s.Create(ctx, tenantB, adminB, NewUser{Username: "scada-plant1", Rules: []Rule{}}); err != nil {
				t.Errorf("re-creating a deleted name in another tenant: %v", err)
			}

			// Deleting the tenant deletes its broker users.
			if _, err := d.SQL().ExecContext(ctx, `DELETE FROM tenants WHERE uuid = $1`, tenantA); err != nil {
				t.Fatal(err)
			}
			if err := d.SQL().QueryRowContext(ctx, `SELECT count(*) FROM broker_users WHERE tenant_uuid = $1`, tenantA).Scan(&n); err != nil || n != 0 {
				t.Errorf("broker users left after the tenant was deleted: %d, %v", n, err)
			}
		})
	}
}

func TestStoreValidationIntegration(t *testing.T) {
	s, _ := newTestStore(t, "sqlite")
	ctx := context.Background()
	many := make([]Rule, brokerauth.MaxRules+1)
	for i := range many {
		many[i] = Rule{Pattern: "r/" + strings.Repeat("x", i+1), Publish: true}
	}
	tests := []struct {
		name string
		n    NewUser
	}{
		{"short name", NewUser{Username: "ab"}},
		{"long name", NewUser{Username: strings.Repeat("a", 65)}},
		{"uppercase", NewUser{Username: "Scada"}},
		{"colon", NewUser{Username: "scada:1"}},
		{"slash", NewUser{Username: "scada/1"}},
		{"plus", NewUser{Username: "scada+1"}},
		{"dollar", NewUser{Username: "$scada"}},
		{"space", NewUser{Username: "scada 1"}},
		{"leading dot", NewUser{Username: ".scada"}},
		{"device key scheme", NewUser{Username: "dk2_abcdefgh"}},
		{"old device key scheme", NewUser{Username: "dk_live_1"}},
		{"provisioning key scheme", NewUser{Username: "pk_abc"}},
		{"device client id", NewUser{Username: "agent-0d5e7f10"}},
		{"platform client", NewUser{Username: "edgeplat-api-host1"}},
		{"service user", NewUser{Username: "edgeplat-api"}},
		{"prefix of a platform client id", NewUser{Username: "historian"}},
		{"too many rules", NewUser{Username: "scada", Rules: many}},
		{"empty pattern", NewUser{Username: "scada", Rules: []Rule{{Publish: true}}}},
		{"misplaced hash", NewUser{Username: "scada", Rules: []Rule{{Pattern: "a/#/b", Publish: true}}}},
		{"empty level", NewUser{Username: "scada", Rules: []Rule{{Pattern: "a//b", Subscribe: true}}}},
		{"neither publish nor subscribe", NewUser{Username: "scada", Rules: []Rule{{Pattern: "a"}}}},
		{"absolute pattern", NewUser{Username: "scada", Rules: []Rule{{Pattern: topicPrefix(t, tenantA) + "a/#", Subscribe: true}}}},
		{"duplicate pattern", NewUser{Username: "scada", Rules: []Rule{{Pattern: "a", Subscribe: true}, {Pattern: "a", Publish: true}}}},
		{"control character in description", NewUser{Username: "scada", Description: "a\nb"}},
		{"long description", NewUser{Username: "scada", Description: strings.Repeat("d", 201)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := s.Create(ctx, tenantA, adminA, tt.n); !errors.Is(err, ErrInvalid) {
				t.Errorf("Create = %v, want ErrInvalid", err)
			}
		})
	}
	// Names that look close to reserved ones but are not.
	for _, name := range []string{"historian2", "plant.dk2", "agent", "my_edgeplat"} {
		if _, _, err := s.Create(ctx, tenantA, adminA, NewUser{Username: name}); err != nil {
			t.Errorf("Create(%q) = %v, want created", name, err)
		}
	}
	// A failed update changes nothing.
	if _, _, err := s.Update(ctx, tenantA, "historian2", Change{Rules: &[]Rule{{Pattern: "a/#/b", Publish: true}}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Update with a bad rule = %v, want ErrInvalid", err)
	}
}

// TestCombinedStoreIntegration: device keys go to the device store and
// nothing else does.
func TestCombinedStoreIntegration(t *testing.T) {
	s, _ := newTestStore(t, "sqlite")
	ctx := context.Background()
	_, password, err := s.Create(ctx, tenantA, adminA, NewUser{Username: "bridge", Rules: []Rule{{Pattern: "#", Subscribe: true}}})
	if err != nil {
		t.Fatal(err)
	}
	devices := &deviceStore{}
	store := CombinedStore(devices, s)

	id, err := store.AuthenticateDevice(ctx, deviceKey, devicePassword)
	if err != nil || id.AgentUUID != agentUUID || id.IsBrokerUser() {
		t.Errorf("device = %+v, %v", id, err)
	}
	id, err = store.AuthenticateDevice(ctx, "bridge", password)
	if err != nil || !id.IsBrokerUser() || id.TenantUUID != tenantA {
		t.Errorf("broker user = %+v, %v", id, err)
	}
	for _, c := range []struct{ user, pass string }{{deviceKey, password}, {"bridge", devicePassword}, {"dk2_bridge", password}} {
		if _, err := store.AuthenticateDevice(ctx, c.user, c.pass); !errors.Is(err, brokerauth.ErrDenied) {
			t.Errorf("AuthenticateDevice(%q) = %v, want ErrDenied", c.user, err)
		}
	}
	if got := devices.askedFor(); !slices.Equal(got, []string{deviceKey, deviceKey, "dk2_bridge"}) {
		t.Errorf("device store asked for %q", got)
	}
}

func TestPasswordHash(t *testing.T) {
	h1, h2 := hashPassword("secret"), hashPassword("secret")
	if h1 == h2 {
		t.Error("two hashes of one password are equal: no salt")
	}
	tests := []struct {
		stored, password string
		ok               bool
		err              bool
	}{
		{h1, "secret", true, false},
		{h1, "Secret", false, false},
		{h1, "", false, false},
		{"", "secret", false, true},
		{"sha256$zz$" + strings.Repeat("0", 64), "secret", false, true},
		{"bcrypt$" + strings.TrimPrefix(h1, passwordScheme), "secret", false, true},
		{h1[:len(h1)-1], "secret", false, true},
	}
	for _, tt := range tests {
		ok, err := passwordMatches(tt.stored, tt.password)
		if ok != tt.ok || (err != nil) != tt.err {
			t.Errorf("passwordMatches(%q, %q) = %v, %v; want %v, error %v", tt.stored, tt.password, ok, err, tt.ok, tt.err)
		}
	}
}

// otherLastChar returns s with its last character replaced by another.
func otherLastChar(s string) string {
	if strings.HasSuffix(s, "x") {
		return s[:len(s)-1] + "y"
	}
	return s[:len(s)-1] + "x"
}
