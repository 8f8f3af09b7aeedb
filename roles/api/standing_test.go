package api

import (
	"context"
	"github.com/edgeplat/edgeplat/core/health"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	memstore "github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

const testPassword = "correct horse battery"

// testRuntime is a runtime whose logs go nowhere and whose metrics stay
// in a registry of the test's own.
func testRuntime() *rt.Runtime {
	return &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Health: health.New(time.Second)}
}

// testBackends hands the role d and streams, or an in-process stream
// store of the test's own when streams is nil.
func testBackends(t *testing.T, d *db.DB, streams streamstore.Store) rt.Backends {
	t.Helper()
	if streams == nil {
		mem, err := memstore.New(memstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mem.Close() })
		streams = mem
	}
	return rt.Backends{DB: d, Streams: streams}
}

// expect reports a failure unless r has status want; the test goes on, so
// that each refused attempt is checked on its own.
func expect(t *testing.T, what string, r reply, want int) {
	t.Helper()
	if r.status != want {
		t.Errorf("%s: %d %s, want %d", what, r.status, r.raw, want)
	}
}

// must ends the test unless r has status want: a step the rest needs.
func must(t *testing.T, what string, r reply, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("%s: %d %s, want %d", what, r.status, r.raw, want)
	}
}

// signIn logs email in and returns the session's tokens, after one use of
// the access token so that its answer is in the cache.
func signIn(t *testing.T, e http.Handler, email string) (access, refresh string) {
	t.Helper()
	r := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": email, "password": testPassword})
	must(t, "login "+email, r, http.StatusOK)
	access, refresh = r.str("accessToken"), r.str("refreshToken")
	must(t, "first use of the token of "+email, call(t, e, "GET", "/api/v1/auth/me", access, nil), http.StatusOK)
	return access, refresh
}

// newAccount creates an account of role in root's tenant and returns its id.
func newAccount(t *testing.T, e http.Handler, root, email, role string) string {
	t.Helper()
	r := call(t, e, "POST", "/api/v1/users", root, map[string]string{"email": email, "password": testPassword, "role": role})
	must(t, "create "+email, r, http.StatusCreated)
	return r.str("id")
}

// TestAccessTokenFollowsAccountIntegration: an access token is worth what
// its account and session are worth now, not at sign-in. Each token is
// used before the change, so a cached answer has to be dropped by it.
func TestAccessTokenFollowsAccountIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		a := testAccess(t, testBackends(t, d, nil), testTokens(t))
		mail := &mailbox{}
		a.mailer = mail
		e := mountAccess(t, a)
		root := admin(t, e)
		rootID := call(t, e, "GET", "/api/v1/auth/me", root, nil).str("id")
		// A second admin, so that the last-admin guard cannot be what
		// refuses a stale token's demotion of root.
		newAccount(t, e, root, "spare@example.com", "admin")
		demoteRoot := map[string]string{"role": "member"}
		newAdmin := func(email string) map[string]string {
			return map[string]string{"email": email, "password": testPassword, "role": "admin"}
		}

		t.Run("demotion", func(t *testing.T) {
			id := newAccount(t, e, root, "demoted@example.com", "admin")
			tok, _ := signIn(t, e, "demoted@example.com")
			expect(t, "admin route before the demotion", call(t, e, "GET", "/api/v1/users", tok, nil), http.StatusOK)
			must(t, "demote", call(t, e, "PUT", "/api/v1/users/"+id, root, map[string]string{"role": "member"}), http.StatusOK)
			expect(t, "admin route after the demotion", call(t, e, "GET", "/api/v1/users", tok, nil), http.StatusForbidden)
			expect(t, "undo its own demotion", call(t, e, "PUT", "/api/v1/users/"+id, tok, map[string]string{"role": "admin"}), http.StatusForbidden)
			expect(t, "create an admin", call(t, e, "POST", "/api/v1/users", tok, newAdmin("made-by-demoted@example.com")), http.StatusForbidden)
			expect(t, "demote the remaining admin", call(t, e, "PUT", "/api/v1/users/"+rootID, tok, demoteRoot), http.StatusForbidden)
			if me := call(t, e, "GET", "/api/v1/auth/me", tok, nil); me.status != http.StatusOK || me.str("role") != "member" {
				t.Fatalf("the demoted account's own view: %d %s, want 200 as a member", me.status, me.raw)
			}
		})

		t.Run("deactivation", func(t *testing.T) {
			id := newAccount(t, e, root, "deactivated@example.com", "admin")
			tok, _ := signIn(t, e, "deactivated@example.com")
			expect(t, "admin route before the deactivation", call(t, e, "GET", "/api/v1/users", tok, nil), http.StatusOK)
			must(t, "deactivate", call(t, e, "PUT", "/api/v1/users/"+id, root, map[string]any{"active": false}), http.StatusOK)
			expect(t, "any route after the deactivation", call(t, e, "GET", "/api/v1/auth/me", tok, nil), http.StatusUnauthorized)
			expect(t, "undo its own deactivation", call(t, e, "PUT", "/api/v1/users/"+id, tok, map[string]any{"active": true}), http.StatusUnauthorized)
			expect(t, "create an admin", call(t, e, "POST", "/api/v1/users", tok, newAdmin("made-by-inactive@example.com")), http.StatusUnauthorized)
			expect(t, "demote the remaining admin", call(t, e, "PUT", "/api/v1/users/"+rootID, tok, demoteRoot), http.StatusUnauthorized)
			if u := call(t, e, "GET", "/api/v1/users/"+id, root, nil); u.body["active"] != false {
				t.Fatalf("the account after its token's attempts: %s", u.raw)
			}
		})

		t.Run("deletion", func(t *testing.T) {
			id := newAccount(t, e, root, "deleted@example.com", "admin")
			tok, _ := signIn(t, e, "deleted@example.com")
			expect(t, "admin route before the deletion", call(t, e, "GET", "/api/v1/users", tok, nil), http.StatusOK)
			must(t, "delete", call(t, e, "DELETE", "/api/v1/users/"+id, root, nil), http.StatusNoContent)
			expect(t, "admin route after the deletion", call(t, e, "GET", "/api/v1/users", tok, nil), http.StatusUnauthorized)
			expect(t, "create an admin", call(t, e, "POST", "/api/v1/users", tok, newAdmin("made-by-deleted@example.com")), http.StatusUnauthorized)
			expect(t, "demote the remaining admin", call(t, e, "PUT", "/api/v1/users/"+rootID, tok, demoteRoot), http.StatusUnauthorized)
		})

		t.Run("logout", func(t *testing.T) {
			newAccount(t, e, root, "leaver@example.com", "member")
			tok, refresh := signIn(t, e, "leaver@example.com")
			other, _ := signIn(t, e, "leaver@example.com")
			must(t, "logout", call(t, e, "POST", "/api/v1/auth/logout", "", map[string]string{"refreshToken": refresh}), http.StatusNoContent)
			expect(t, "the ended session's access token", call(t, e, "GET", "/api/v1/auth/me", tok, nil), http.StatusUnauthorized)
			expect(t, "another session's access token", call(t, e, "GET", "/api/v1/auth/me", other, nil), http.StatusOK)
		})

		t.Run("password change", func(t *testing.T) {
			newAccount(t, e, root, "changer@example.com", "member")
			tok, _ := signIn(t, e, "changer@example.com")
			other, _ := signIn(t, e, "changer@example.com")
			must(t, "change password", call(t, e, "POST", "/api/v1/auth/change-password", tok,
				map[string]string{"currentPassword": testPassword, "newPassword": "a brand new secret"}), http.StatusNoContent)
			expect(t, "the changing session's access token", call(t, e, "GET", "/api/v1/auth/me", tok, nil), http.StatusUnauthorized)
			expect(t, "another session's access token", call(t, e, "GET", "/api/v1/auth/me", other, nil), http.StatusUnauthorized)
			expect(t, "login with the new password", call(t, e, "POST", "/api/v1/auth/login", "",
				map[string]string{"email": "changer@example.com", "password": "a brand new secret"}), http.StatusOK)
		})

		t.Run("password reset", func(t *testing.T) {
			newAccount(t, e, root, "forgetful@example.com", "member")
			tok, _ := signIn(t, e, "forgetful@example.com")
			sent := mail.count()
			must(t, "reset request", call(t, e, "POST", "/api/v1/auth/password/reset", "", map[string]string{"email": "forgetful@example.com"}), http.StatusAccepted)
			coretest.Eventually(t, 30*time.Second, "the reset mail", func() bool { return mail.count() > sent })
			must(t, "reset", call(t, e, "POST", "/api/v1/auth/password/reset/confirm", "",
				map[string]string{"token": mail.token(t), "newPassword": "a brand new secret"}), http.StatusNoContent)
			expect(t, "access token after the reset", call(t, e, "GET", "/api/v1/auth/me", tok, nil), http.StatusUnauthorized)
		})

		t.Run("refresh token reuse", func(t *testing.T) {
			newAccount(t, e, root, "copied@example.com", "member")
			first, refresh := signIn(t, e, "copied@example.com")
			r := call(t, e, "POST", "/api/v1/auth/refresh", "", map[string]string{"refreshToken": refresh})
			must(t, "refresh", r, http.StatusOK)
			second := r.str("accessToken")
			expect(t, "the refreshed access token", call(t, e, "GET", "/api/v1/auth/me", second, nil), http.StatusOK)
			expect(t, "the first access token, same session", call(t, e, "GET", "/api/v1/auth/me", first, nil), http.StatusOK)
			expect(t, "reuse of the rotated refresh token", call(t, e, "POST", "/api/v1/auth/refresh", "", map[string]string{"refreshToken": refresh}), http.StatusUnauthorized)
			expect(t, "the first access token after the reuse", call(t, e, "GET", "/api/v1/auth/me", first, nil), http.StatusUnauthorized)
			expect(t, "the refreshed access token after the reuse", call(t, e, "GET", "/api/v1/auth/me", second, nil), http.StatusUnauthorized)
		})

		// Nothing above reached root or the spare admin, or made an admin.
		if r := call(t, e, "GET", "/api/v1/users", root, nil); r.status != http.StatusOK ||
			strings.Count(r.raw, `"role":"admin","active":true`) != 2 || strings.Contains(r.raw, "made-by-") {
			t.Fatalf("the tenant's accounts at the end: %d %s", r.status, r.raw)
		}
	})
}

// TestAccountChangesReachReplicasIntegration: two replicas on one database
// and stream store. A change made through one drops the other's cached
// answer, which would otherwise stand for the cache's whole TTL (an hour
// here).
func TestAccountChangesReachReplicasIntegration(t *testing.T) {
	for name, streams := range liveStores(t) {
		t.Run(name, func(t *testing.T) {
			d := dbtest.Migrated(t, "sqlite")
			var engines [2]*gin.Engine
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(t.Context())
			t.Cleanup(func() { cancel(); wg.Wait() })
			for i := range engines {
				a := testAccess(t, testBackends(t, d, streams), testTokens(t))
				a.standing = accounts.NewStandingCache(a.accounts, time.Hour, 100)
				a.sync.cache = a.standing
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := a.sync.Run(ctx); err != nil {
						t.Errorf("sync: %v", err)
					}
				}()
				coretest.Eventually(t, 30*time.Second, "the account change feed", a.sync.subscribed.Load)
				engines[i] = mountAccess(t, a)
			}
			one, two := engines[0], engines[1]
			root := admin(t, one)
			id := newAccount(t, one, root, "other@example.com", "admin")
			tok, _ := signIn(t, two, "other@example.com")
			must(t, "admin route on replica two", call(t, two, "GET", "/api/v1/users", tok, nil), http.StatusOK)
			must(t, "demote on replica one", call(t, one, "PUT", "/api/v1/users/"+id, root, map[string]string{"role": "member"}), http.StatusOK)
			coretest.Eventually(t, 30*time.Second, "replica two to see the demotion", func() bool {
				return call(t, two, "GET", "/api/v1/users", tok, nil).status == http.StatusForbidden
			})
		})
	}
}

// TestAccountChangeFeedLossDropsCacheIntegration: a replica that loses its
// subscription may have missed changes, so it forgets what it cached. The
// change here is made behind the store's back, so only that forgetting
// can reveal it within the cache's TTL (an hour here).
func TestAccountChangeFeedLossDropsCacheIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "sqlite")
	streams, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := testAccess(t, testBackends(t, d, streams), testTokens(t))
	a.standing = accounts.NewStandingCache(a.accounts, time.Hour, 100)
	a.sync.cache = a.standing
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- a.sync.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("sync: %v", err)
		}
	})
	coretest.Eventually(t, 30*time.Second, "the account change feed", a.sync.subscribed.Load)
	e := mountAccess(t, a)
	root := admin(t, e)
	id := newAccount(t, e, root, "other@example.com", "admin")
	tok, _ := signIn(t, e, "other@example.com")
	must(t, "admin route", call(t, e, "GET", "/api/v1/users", tok, nil), http.StatusOK)
	if _, err := d.SQL().ExecContext(t.Context(), `UPDATE users SET role = 'member' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	must(t, "admin route, answered from the cache", call(t, e, "GET", "/api/v1/users", tok, nil), http.StatusOK)
	if err := streams.Close(); err != nil {
		t.Fatal(err)
	}
	coretest.Eventually(t, 30*time.Second, "the lost feed to drop the cached answer", func() bool {
		return call(t, e, "GET", "/api/v1/users", tok, nil).status == http.StatusForbidden
	})
}
