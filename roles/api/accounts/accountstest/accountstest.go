// Package accountstest gives the tests of the Cloud API's route packages
// the users of the apitest tenants, found from a request's bearer token as
// the API's authenticator would find them, and a recorder of the audit
// events the routes write. It is apart from apitest because accounts' own
// tests use apitest, which therefore cannot import accounts.
package accountstest

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

// Callers are the test users by bearer token: an admin and a member of
// apitest.TenantA, a "viewer" (a role accounts may add, which the routes
// must treat as read-only until they list it) and an admin of
// apitest.TenantB.
var Callers = map[string]accounts.Caller{
	"admin-a":  {UserID: "11111111-1111-4111-8111-111111111111", TenantUUID: apitest.TenantA, Role: accounts.RoleAdmin},
	"member-a": {UserID: "22222222-2222-4222-8222-222222222222", TenantUUID: apitest.TenantA, Role: accounts.RoleMember},
	"viewer-a": {UserID: "44444444-4444-4444-8444-444444444444", TenantUUID: apitest.TenantA, Role: "viewer"},
	"admin-b":  {UserID: "33333333-3333-4333-8333-333333333333", TenantUUID: apitest.TenantB, Role: accounts.RoleAdmin},
}

// Caller is a Deps.Caller: the one of Callers the request's bearer token
// names, false for none.
func Caller(c *gin.Context) (accounts.Caller, bool) {
	who, ok := Callers[strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")]
	return who, ok
}

// AuditLog keeps the audit events a package's routes and services record.
type AuditLog struct {
	mu     sync.Mutex
	events []accounts.Event
}

// Audit is a Deps.Audit: it keeps e.
func (l *AuditLog) Audit(_ *gin.Context, e accounts.Event) { l.keep(e) }

// Record is a Deps.Record (accounts.Store.Record without a database): it
// keeps e.
func (l *AuditLog) Record(_ context.Context, e accounts.Event) error {
	l.keep(e)
	return nil
}

func (l *AuditLog) keep(e accounts.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// Kinds returns the kinds of the events kept since the last call, sorted.
func (l *AuditLog) Kinds() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		out = append(out, e.Kind)
	}
	l.events = nil
	slices.Sort(out)
	return out
}
