package accounts

import (
	"errors"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// TestStandingCacheIntegration: answers come from memory until the TTL or
// a change through the store; a change made behind the store's back is
// seen once the TTL has passed.
func TestStandingCacheIntegration(t *testing.T) {
	for _, engine := range []string{"postgres", "sqlite"} {
		t.Run(engine, func(t *testing.T) {
			d := dbtest.Migrated(t, engine)
			ctx := t.Context()
			store := NewStore(d)
			u, err := store.Register(ctx, "", NewUser{Email: "a@example.com", Password: "correct horse battery"})
			if err != nil {
				t.Fatal(err)
			}
			if err := store.StartSession(ctx, u.ID, "fam-1", "jti-1", time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			cache := NewStandingCache(store, time.Minute, 2)
			cache.now = func() time.Time { return now }
			role := func(family string) (string, error) {
				t.Helper()
				st, err := cache.Standing(ctx, u.ID, family)
				return st.Role, err
			}
			if r, err := role("fam-1"); err != nil || r != RoleAdmin {
				t.Fatalf("standing: %q %v, want admin", r, err)
			}
			// Behind the store's back: the cached answer stands until the TTL.
			if _, err := d.SQL().ExecContext(ctx, `UPDATE users SET role = 'member' WHERE id = $1`, u.ID); err != nil {
				t.Fatal(err)
			}
			if r, _ := role("fam-1"); r != RoleAdmin {
				t.Fatalf("standing within the TTL: %q, want the cached admin", r)
			}
			now = now.Add(time.Minute)
			if r, _ := role("fam-1"); r != RoleMember {
				t.Fatalf("standing after the TTL: %q, want member", r)
			}
			// Through the store: dropped at once.
			admin := RoleAdmin
			if _, err := store.UpdateUser(ctx, u.TenantUUID, u.ID, UserUpdate{Role: &admin}); err != nil {
				t.Fatal(err)
			}
			if r, _ := role("fam-1"); r != RoleAdmin {
				t.Fatalf("standing after a change through the store: %q, want admin", r)
			}
			if err := store.EndSession(ctx, u.ID, "fam-1"); err != nil {
				t.Fatal(err)
			}
			for _, tt := range []struct{ name, user, family string }{
				{"ended session", u.ID, "fam-1"},
				{"unknown session", u.ID, "fam-2"},
				{"no session", u.ID, ""},
				{"malformed user id", "user-1", "fam-1"},
				{"unknown user", "00000000-0000-4000-8000-000000000000", "fam-1"},
			} {
				if _, err := cache.Standing(ctx, tt.user, tt.family); !errors.Is(err, ErrSessionEnded) {
					t.Errorf("%s: %v, want ErrSessionEnded", tt.name, err)
				}
			}
			cache.mu.Lock()
			n := cache.n
			cache.mu.Unlock()
			if n > 2 {
				t.Errorf("%d answers cached, want at most 2", n)
			}
		})
	}
}

// BenchmarkStanding is the per-request cost of the access-token check: a
// cached answer, and the query behind a miss (SQLite).
func BenchmarkStanding(b *testing.B) {
	d := dbtest.Migrated(b, "sqlite")
	ctx := b.Context()
	store := NewStore(d)
	u, err := store.Register(ctx, "", NewUser{Email: "a@example.com", Password: "correct horse battery"})
	if err != nil {
		b.Fatal(err)
	}
	if err := store.StartSession(ctx, u.ID, "fam-1", "jti-1", time.Now().Add(time.Hour)); err != nil {
		b.Fatal(err)
	}
	cache := NewStandingCache(store, time.Hour, 10)
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cache.Standing(ctx, u.ID, "fam-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("query", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := store.Standing(ctx, u.ID, "fam-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
