package accounts

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// insertAgent adds an agent of tenant, as the registry would, for keys
// bound to one.
func insertAgent(t *testing.T, d *db.DB, tenant, uuid string) {
	t.Helper()
	now := d.Dialect().TimeArg(time.Now())
	if _, err := d.SQL().ExecContext(t.Context(), `INSERT INTO agents (uuid, tenant_uuid, name, version, state, tags, active, created_at, updated_at)
		VALUES ($1, $2, 'press', '', 'registered', '{}', true, $3, $3)`, uuid, tenant, now); err != nil {
		t.Fatal(err)
	}
}

func TestAPIKeysIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, d *db.DB) {
		ctx := t.Context()
		admin := mustRegister(t, s, "admin@example.com")
		other := mustRegister(t, s, "other@example.com")
		tenant := admin.TenantUUID
		member, err := s.CreateUser(ctx, tenant, NewUser{Email: "m@example.com", Password: testPassword})
		if err != nil {
			t.Fatal(err)
		}
		const agent = "0d5e7f10-2a3b-4c5d-8e9f-a0b1c2d3e4f5"
		const otherAgent = "1d5e7f10-2a3b-4c5d-8e9f-a0b1c2d3e4f5"
		insertAgent(t, d, tenant, agent)
		insertAgent(t, d, other.TenantUUID, otherAgent)

		for _, tt := range []struct {
			name, keyName, agent string
			want                 error
		}{
			{"blank name", "  ", "", ErrInvalid},
			{"long name", strings.Repeat("n", 201), "", ErrInvalid},
			{"malformed agent", "script", "press-1", ErrInvalid},
			{"unknown agent", "script", "2d5e7f10-2a3b-4c5d-8e9f-a0b1c2d3e4f5", ErrNotFound},
			{"another tenant's agent", "script", otherAgent, ErrNotFound},
		} {
			if _, _, err := s.CreateAPIKey(ctx, tenant, member.ID, tt.keyName, tt.agent); !errors.Is(err, tt.want) {
				t.Errorf("CreateAPIKey, %s: %v, want %v", tt.name, err, tt.want)
			}
		}

		memberKey, plain, err := s.CreateAPIKey(ctx, tenant, member.ID, " nightly export ", strings.ToUpper(agent))
		if err != nil {
			t.Fatal(err)
		}
		if !IsAPIKey(plain) || !strings.HasPrefix(plain, apiKeyScheme+memberKey.Prefix+"_") || memberKey.Name != "nightly export" || memberKey.AgentUUID != agent {
			t.Errorf("created key %+v, plaintext %q", memberKey, plain)
		}
		adminKey, adminPlain, err := s.CreateAPIKey(ctx, tenant, admin.ID, "admin script", "")
		if err != nil {
			t.Fatal(err)
		}

		// A member lists their own keys, an admin the tenant's, another
		// tenant none of them.
		for _, tt := range []struct {
			name, tenant, user string
			want               int
		}{
			{"member", tenant, member.ID, 1},
			{"admin", tenant, "", 2},
			{"another tenant", other.TenantUUID, "", 0},
		} {
			keys, err := s.APIKeys(ctx, tt.tenant, tt.user)
			if err != nil || len(keys) != tt.want {
				t.Errorf("APIKeys of %s: %d keys, %v; want %d", tt.name, len(keys), err, tt.want)
			}
		}

		u, k, err := s.AuthenticateAPIKey(ctx, plain)
		if err != nil || u.ID != member.ID || k.ID != memberKey.ID || k.AgentUUID != agent {
			t.Fatalf("AuthenticateAPIKey = %+v, %+v, %v", u, k, err)
		}
		if keys, _ := s.APIKeys(ctx, tenant, member.ID); len(keys) != 1 || keys[0].LastUsedAt == nil {
			t.Errorf("last use not recorded: %+v", keys)
		}
		for _, tt := range []struct{ name, key string }{
			{"empty", ""},
			{"another scheme", "pk" + plain[2:]},
			{"short", plain[:len(plain)-1]},
			{"wrong secret", plain[:len(plain)-1] + otherChar(plain[len(plain)-1])},
			{"unknown prefix", apiKeyScheme + "zzzzzzzz" + plain[len(apiKeyScheme)+apiKeyPrefixLen:]},
		} {
			if _, _, err := s.AuthenticateAPIKey(ctx, tt.key); !errors.Is(err, ErrBadCredentials) {
				t.Errorf("AuthenticateAPIKey, %s: %v, want ErrBadCredentials", tt.name, err)
			}
		}

		// A member cannot revoke the admin's key, another tenant no key.
		for _, tt := range []struct {
			name, tenant, user, id string
		}{
			{"member revokes the admin's key", tenant, member.ID, adminKey.ID},
			{"another tenant", other.TenantUUID, "", memberKey.ID},
			{"malformed id", tenant, "", "key-1"},
		} {
			if err := s.RevokeAPIKey(ctx, tt.tenant, tt.user, tt.id); !errors.Is(err, ErrNotFound) {
				t.Errorf("RevokeAPIKey, %s: %v, want ErrNotFound", tt.name, err)
			}
		}
		if err := s.RevokeAPIKey(ctx, tenant, member.ID, memberKey.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeAPIKey(ctx, tenant, "", memberKey.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoking twice: %v, want ErrNotFound", err)
		}
		if _, _, err := s.AuthenticateAPIKey(ctx, plain); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("a revoked key: %v, want ErrBadCredentials", err)
		}
		if keys, _ := s.APIKeys(ctx, tenant, member.ID); len(keys) != 1 || keys[0].RevokedAt == nil {
			t.Errorf("the revoked key is not listed as revoked: %+v", keys)
		}

		// A key acts as its user: not once the user is inactive.
		no := false
		if _, err := s.UpdateUser(ctx, tenant, member.ID, UserUpdate{Role: new(RoleAdmin)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateUser(ctx, tenant, admin.ID, UserUpdate{Active: &no}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.AuthenticateAPIKey(ctx, adminPlain); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("the key of an inactive user: %v, want ErrBadCredentials", err)
		}
	})
}

// otherChar returns an alphanumeric character other than c.
func otherChar(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func TestInvitesIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, _ *db.DB) {
		ctx := t.Context()
		admin := mustRegister(t, s, "admin@example.com")
		other := mustRegister(t, s, "other@example.com")
		tenant := admin.TenantUUID
		inv, tok, err := s.CreateInvite(ctx, tenant, admin.ID, " New@Example.com ", "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if inv.Email != "new@example.com" || inv.Role != RoleMember || inv.InvitedBy != admin.ID || len(tok) != inviteTokenLen {
			t.Errorf("invite %+v, token %q", inv, tok)
		}
		for _, tt := range []struct {
			name, email, role string
			want              error
		}{
			{"pending invitation", "new@example.com", RoleMember, ErrConflict},
			{"existing account", "Other@example.com", RoleMember, ErrConflict},
			{"invalid e-mail", "new", RoleMember, ErrInvalid},
			{"unknown role", "x@example.com", "owner", ErrInvalid},
		} {
			if _, _, err := s.CreateInvite(ctx, tenant, admin.ID, tt.email, tt.role, time.Hour); !errors.Is(err, tt.want) {
				t.Errorf("CreateInvite, %s: %v, want %v", tt.name, err, tt.want)
			}
		}
		if list, err := s.Invites(ctx, tenant); err != nil || len(list) != 1 || list[0].ID != inv.ID {
			t.Errorf("Invites = %+v, %v", list, err)
		}
		if list, err := s.Invites(ctx, other.TenantUUID); err != nil || len(list) != 0 {
			t.Errorf("another tenant's Invites = %+v, %v", list, err)
		}

		// Accepting: a weak password leaves the invitation usable; a
		// good one creates the account and uses it up.
		if _, err := s.AcceptInvite(ctx, tok, "", "short"); !errors.Is(err, ErrWeakPassword) {
			t.Errorf("accept with a weak password: %v, want ErrWeakPassword", err)
		}
		if _, err := s.AcceptInvite(ctx, tok, "a b", testPassword); !errors.Is(err, ErrInvalid) {
			t.Errorf("accept with an invalid user name: %v, want ErrInvalid", err)
		}
		if _, err := s.AcceptInvite(ctx, "not-a-token", "", testPassword); !errors.Is(err, ErrRevoked) {
			t.Errorf("accept with an unknown token: %v, want ErrRevoked", err)
		}
		u, err := s.AcceptInvite(ctx, tok, "Newbie", testPassword)
		if err != nil {
			t.Fatal(err)
		}
		if u.Email != "new@example.com" || u.Username != "newbie" || u.Role != RoleMember || u.TenantUUID != tenant {
			t.Errorf("accepted account = %+v", u)
		}
		if _, err := s.AcceptInvite(ctx, tok, "", testPassword); !errors.Is(err, ErrRevoked) {
			t.Errorf("accepting twice: %v, want ErrRevoked", err)
		}
		if list, _ := s.Invites(ctx, tenant); len(list) != 0 {
			t.Errorf("an accepted invitation is still listed: %+v", list)
		}

		// Cancelling, and expiry.
		inv2, tok2, err := s.CreateInvite(ctx, tenant, admin.ID, "second@example.com", RoleAdmin, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct{ name, tenant, id string }{
			{"another tenant", other.TenantUUID, inv2.ID},
			{"unknown id", tenant, "00000000-0000-4000-8000-000000000000"},
			{"malformed id", tenant, "invite"},
		} {
			if err := s.CancelInvite(ctx, tt.tenant, tt.id); !errors.Is(err, ErrNotFound) {
				t.Errorf("CancelInvite, %s: %v, want ErrNotFound", tt.name, err)
			}
		}
		if err := s.CancelInvite(ctx, tenant, inv2.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcceptInvite(ctx, tok2, "", testPassword); !errors.Is(err, ErrRevoked) {
			t.Errorf("accepting a cancelled invitation: %v, want ErrRevoked", err)
		}
		_, tok3, err := s.CreateInvite(ctx, tenant, admin.ID, "third@example.com", RoleMember, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		s.now = func() time.Time { return time.Now().UTC().Add(2 * time.Minute) }
		if list, _ := s.Invites(ctx, tenant); len(list) != 0 {
			t.Errorf("an expired invitation is listed: %+v", list)
		}
		if _, err := s.AcceptInvite(ctx, tok3, "", testPassword); !errors.Is(err, ErrRevoked) {
			t.Errorf("accepting an expired invitation: %v, want ErrRevoked", err)
		}
		// Expired, it no longer blocks a new invitation.
		if _, _, err := s.CreateInvite(ctx, tenant, admin.ID, "third@example.com", RoleMember, time.Hour); err != nil {
			t.Errorf("inviting again after the expiry: %v", err)
		}
	})
}

func TestPasswordResetsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, _ *db.DB) {
		ctx := t.Context()
		var seen changes
		seen.listen(s)
		admin := mustRegister(t, s, "admin@example.com")
		other := mustRegister(t, s, "other@example.com")
		if err := s.StartSession(ctx, admin.ID, "fam-1", "jti-1", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, _, ok, err := s.StartReset(ctx, "nobody@example.com", time.Hour); ok || err != nil {
			t.Errorf("StartReset of an unknown address: %v, %v; want false, nil", ok, err)
		}
		u, tok, ok, err := s.StartReset(ctx, " Admin@Example.com ", time.Hour)
		if err != nil || !ok || u.ID != admin.ID || len(tok) != resetTokenLen {
			t.Fatalf("StartReset = %+v, %q, %v, %v", u, tok, ok, err)
		}
		// A newer token replaces the older one.
		_, tok2, _, err := s.StartReset(ctx, "admin@example.com", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishReset(ctx, tok, "a new password, longer"); !errors.Is(err, ErrRevoked) {
			t.Errorf("the replaced token: %v, want ErrRevoked", err)
		}
		if _, err := s.FinishReset(ctx, tok2, "short"); !errors.Is(err, ErrWeakPassword) {
			t.Errorf("a weak password: %v, want ErrWeakPassword", err)
		}
		seen.take()
		got, err := s.FinishReset(ctx, tok2, "a new password, longer")
		if err != nil || got.ID != admin.ID {
			t.Fatalf("FinishReset = %+v, %v", got, err)
		}
		if ids := seen.take(); len(ids) != 1 || ids[0] != admin.ID {
			t.Errorf("listeners told of %v, want the admin", ids)
		}
		if _, err := s.Authenticate(ctx, "admin@example.com", "a new password, longer"); err != nil {
			t.Errorf("login with the new password: %v", err)
		}
		if _, err := s.Rotate(ctx, admin.ID, "fam-1", "jti-1", "jti-2", time.Now().Add(time.Hour)); !errors.Is(err, ErrRevoked) {
			t.Errorf("a session from before the reset: %v, want ErrRevoked", err)
		}
		if _, err := s.FinishReset(ctx, tok2, "yet another password"); !errors.Is(err, ErrRevoked) {
			t.Errorf("a used token: %v, want ErrRevoked", err)
		}

		// The admin-triggered reset stays inside the tenant.
		if _, _, err := s.StartResetFor(ctx, other.TenantUUID, admin.ID, time.Hour); !errors.Is(err, ErrNotFound) {
			t.Errorf("StartResetFor another tenant's account: %v, want ErrNotFound", err)
		}
		_, tok3, err := s.StartResetFor(ctx, admin.TenantUUID, admin.ID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		s.now = func() time.Time { return time.Now().UTC().Add(2 * time.Minute) }
		if _, err := s.FinishReset(ctx, tok3, "yet another password"); !errors.Is(err, ErrRevoked) {
			t.Errorf("an expired token: %v, want ErrRevoked", err)
		}
	})
}

func TestAuditEventsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store, _ *db.DB) {
		ctx := t.Context()
		a := mustRegister(t, s, "a@example.com")
		b := mustRegister(t, s, "b@example.com")
		start := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
		for i, e := range []Event{
			{Tenant: a.TenantUUID, At: start, Kind: AuditLogin, Actor: a.ID, ActorKind: "user"},
			{Tenant: a.TenantUUID, At: start.Add(time.Minute), Kind: AuditLoginFailed, Actor: "x\x00y", ActorKind: "login", Outcome: "failure",
				Detail: map[string]any{"reason": "bad\x00body"}},
			{Tenant: a.TenantUUID, At: start.Add(2 * time.Minute), Kind: AuditLogin, Actor: a.ID, ActorKind: "user", IP: "192.0.2.1"},
			{Tenant: b.TenantUUID, At: start.Add(3 * time.Minute), Kind: AuditLogin, Actor: b.ID, ActorKind: "user"},
			{Kind: AuditLoginFailed, Actor: "nobody", ActorKind: "login", Outcome: "failure"},
		} {
			if err := s.Record(ctx, e); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
		}
		events, next, err := s.Events(ctx, a.TenantUUID, EventFilter{Limit: 10})
		if err != nil || len(events) != 3 || next != 0 {
			t.Fatalf("Events = %d events, next %d, %v; want 3 and no next page", len(events), next, err)
		}
		if e := events[0]; e.Kind != AuditLogin || e.IP != "192.0.2.1" || e.Outcome != "success" || !e.At.Equal(start.Add(2*time.Minute)) {
			t.Errorf("newest event = %+v", e)
		}
		if e := events[1]; strings.ContainsRune(e.Actor, 0) || e.Detail["reason"] == nil || strings.ContainsRune(e.Detail["reason"].(string), 0) {
			t.Errorf("an event with NUL characters was stored as %+v", e)
		}
		for _, tt := range []struct {
			name string
			f    EventFilter
			want int
		}{
			{"kind", EventFilter{Kind: AuditLoginFailed, Limit: 10}, 1},
			{"actor", EventFilter{Actor: a.ID, Limit: 10}, 2},
			{"from", EventFilter{From: start.Add(time.Minute), Limit: 10}, 2},
			{"to", EventFilter{To: start.Add(time.Minute), Limit: 10}, 1},
			{"no limit given: the default page", EventFilter{}, 3},
		} {
			if got, _, err := s.Events(ctx, a.TenantUUID, tt.f); err != nil || len(got) != tt.want {
				t.Errorf("Events by %s: %d, %v; want %d", tt.name, len(got), err, tt.want)
			}
		}
		// Pages of two, then the rest.
		page, next, err := s.Events(ctx, a.TenantUUID, EventFilter{Limit: 2})
		if err != nil || len(page) != 2 || next != page[1].ID {
			t.Fatalf("first page: %d events, next %d, %v", len(page), next, err)
		}
		rest, next, err := s.Events(ctx, a.TenantUUID, EventFilter{Limit: 2, Before: next})
		if err != nil || len(rest) != 1 || next != 0 || rest[0].ID != events[2].ID {
			t.Errorf("second page: %+v, next %d, %v", rest, next, err)
		}
	})
}
