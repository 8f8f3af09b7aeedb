package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// heldMailbox is a mailbox whose Send records the mail, then blocks until
// release is closed.
type heldMailbox struct {
	mailbox
	release chan struct{}
}

func (m *heldMailbox) Send(ctx context.Context, to, subject, body string) error {
	_ = m.mailbox.Send(ctx, to, subject, body)
	select {
	case <-m.release:
	case <-ctx.Done():
	}
	return nil
}

// holdResets blocks writes to password_resets until release: on SQLite by
// holding the one writer connection, on PostgreSQL by locking the table.
func holdResets(t *testing.T, d *db.DB) (release func()) {
	t.Helper()
	tx, err := d.SQL().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback() }) }
	t.Cleanup(release)
	if d.Dialect().Engine == db.Postgres {
		if _, err := tx.Exec(`LOCK TABLE password_resets IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
	}
	return release
}

// TestPasswordResetAnswersFirstIntegration: a reset request is answered
// before its account's work is done, so the time of the answer tells
// nothing about the address. The work (the token's write, the mail) is
// held until the answers are in.
func TestPasswordResetAnswersFirstIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		a := testAccess(t, testBackends(t, d, nil), testTokens(t))
		mail := &heldMailbox{release: make(chan struct{})}
		a.mailer = mail
		e := mountAccess(t, a)
		admin(t, e)
		release := holdResets(t, d)
		for _, email := range []string{"admin@example.com", "nobody@example.com"} {
			done := make(chan reply, 1)
			go func() {
				done <- call(t, e, "POST", "/api/v1/auth/password/reset", "", map[string]string{"email": email})
			}()
			var r reply
			coretest.Eventually(t, 30*time.Second, "the answer for "+email+" while the reset work is held", func() bool {
				select {
				case r = <-done:
					return true
				default:
					return false
				}
			})
			expect(t, "reset request for "+email, r, http.StatusAccepted)
		}
		release()
		// The work goes on after the answer: the mail goes out (and is
		// held in turn) once the database is free.
		coretest.Eventually(t, 30*time.Second, "the reset mail", func() bool { return mail.count() == 1 })
		if !strings.HasPrefix(mail.sent[0], "admin@example.com\n") {
			t.Fatalf("mail to the wrong address:\n%s", mail.sent[0])
		}
		close(mail.release)
	})
}

// TestTokenAnswersNotStoredIntegration: every answer carrying a token or
// a secret says Cache-Control: no-store.
func TestTokenAnswersNotStoredIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		a := testAccess(t, testBackends(t, d, nil), testTokens(t), func(c *config.Config) { c.Licence = testLicence(t, 0) })
		mail := &mailbox{}
		a.mailer = mail
		e := mountAccess(t, a)
		noStore := func(what string, r reply, want int) reply {
			t.Helper()
			must(t, what, r, want)
			if got := r.header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("%s: Cache-Control %q, want no-store", what, got)
			}
			return r
		}
		creds := map[string]string{"email": "admin@example.com", "password": testPassword}
		noStore("bootstrap", call(t, e, "POST", "/api/v1/auth/bootstrap-admin", "", creds), http.StatusCreated)
		login := noStore("login", call(t, e, "POST", "/api/v1/auth/login", "", creds), http.StatusOK)
		tok := login.str("accessToken")
		noStore("refresh", call(t, e, "POST", "/api/v1/auth/refresh", "", map[string]string{"refreshToken": login.str("refreshToken")}), http.StatusOK)
		noStore("register", call(t, e, "POST", "/api/v1/auth/register", "", map[string]string{"email": "other@example.com", "password": testPassword}), http.StatusCreated)
		noStore("api key", call(t, e, "POST", "/api/v1/api-keys", tok, map[string]string{"name": "ci"}), http.StatusCreated)
		noStore("invite", call(t, e, "POST", "/api/v1/invites", tok, map[string]string{"email": "new@example.com"}), http.StatusCreated)
		noStore("invite accepted", call(t, e, "POST", "/api/v1/invites/accept", "", map[string]string{"token": mail.token(t), "password": testPassword}), http.StatusCreated)
		key := noStore("provisioning key", call(t, e, "POST", "/api/v1/provisioning/keys", tok, nil), http.StatusCreated).str("key")
		noStore("agent registration", call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": key, "agentName": "press-7"}), http.StatusCreated)
	})
}

// TestRefusedLoginBodyAuditedIntegration: a login whose body is refused
// is a failed login in the audit log, and a NUL byte is a 400 naming the
// field on both engines (PostgreSQL text cannot hold it).
func TestRefusedLoginBodyAuditedIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e := accountsEngine(t, d, testTokens(t))
		admin(t, e)
		for _, tt := range []struct {
			name, body, field, actor string
			// nul: a body binder that refuses NUL bytes may do so before
			// decoding, and leave no login to name.
			nul bool
		}{
			{"NUL in the email", `{"email":"admin@example.com\u0000","password":"correct horse battery"}`, "email", "admin@example.com\uFFFD", true},
			{"NUL in the username", `{"username":"root\u0000","password":"correct horse battery"}`, "username", "root\uFFFD", true},
			{"NUL in the password", `{"email":"admin@example.com","password":"correct\u0000"}`, "password", "admin@example.com", true},
			{"unknown field", `{"email":"admin@example.com","password":"x","remember":true}`, "remember", "admin@example.com", false},
			{"not JSON", `{"email":`, "JSON", "", false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				before := failedLogins(t, d)
				r := call(t, e, "POST", "/api/v1/auth/login", "", tt.body)
				if r.status != http.StatusBadRequest || r.str("error", "code") != "invalid_body" || !strings.Contains(r.str("error", "message"), tt.field) {
					t.Fatalf("%d %s, want 400 invalid_body naming %s", r.status, r.raw, tt.field)
				}
				after := failedLogins(t, d)
				if len(after) != len(before)+1 || (after[len(after)-1] != tt.actor && !(tt.nul && after[len(after)-1] == "")) {
					t.Fatalf("failed logins audited %q, then %q: want one more, by %q", before, after, tt.actor)
				}
			})
		}
	})
}

// failedLogins lists the actors of the audited failed logins, oldest first.
func failedLogins(t *testing.T, d *db.DB) []string {
	t.Helper()
	rows, err := d.SQL().QueryContext(t.Context(), `SELECT actor FROM audit_events WHERE kind = $1 ORDER BY id`, accounts.AuditLoginFailed)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var actors []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		actors = append(actors, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return actors
}
