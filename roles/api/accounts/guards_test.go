package accounts_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

// TestGuards: each guard answers 401 without a user and 403 for a role it
// does not let through, in the API's error shape, and lets the others on
// to the route.
func TestGuards(t *testing.T) {
	gated := false
	gate := func(c *gin.Context) { gated = true; c.Next() }
	e := gin.New()
	user := accounts.RequireUser(accountstest.Caller, apitest.WriteError)
	e.GET("/read", func(c *gin.Context) {
		if who, ok := user(c); ok {
			c.JSON(http.StatusOK, gin.H{"user": who.UserID})
		}
	})
	done := func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"done": true}) }
	e.POST("/write", accounts.RequireRole(accountstest.Caller, apitest.WriteError, "gauges", accounts.RoleAdmin, accounts.RoleMember), done)
	e.POST("/admin", accounts.RequireAdmin(accountstest.Caller, apitest.WriteError, nil), done)
	e.POST("/gated", accounts.RequireAdmin(accountstest.Caller, apitest.WriteError, gate), done)
	tests := []struct {
		path, who string
		status    int
		code, msg string
		gated     bool
	}{
		{"/read", "", 401, "unauthorized", "a user credential is required", false},
		{"/read", "stranger", 401, "unauthorized", "a user credential is required", false},
		{"/read", "viewer-a", 200, "", "", false},
		{"/write", "", 401, "unauthorized", "a user credential is required", false},
		{"/write", "viewer-a", 403, "forbidden", `the role "viewer" may read gauges, not change them`, false},
		{"/write", "member-a", 200, "", "", false},
		{"/write", "admin-b", 200, "", "", false},
		{"/admin", "", 401, "unauthorized", "a user credential is required", false},
		{"/admin", "member-a", 403, "forbidden", "this route is for admins", false},
		{"/admin", "viewer-a", 403, "forbidden", "this route is for admins", false},
		{"/admin", "admin-a", 200, "", "", false},
		{"/gated", "member-a", 403, "forbidden", "this route is for admins", false},
		{"/gated", "admin-a", 200, "", "", true},
	}
	for _, tt := range tests {
		gated = false
		method := http.MethodPost
		if tt.path == "/read" {
			method = http.MethodGet
		}
		r := apitest.Call(t, e, method, tt.path, tt.who, nil)
		if tt.status != http.StatusOK {
			r.ExpectError(t, tt.status, tt.code)
			if got := r.Str("error", "message"); got != tt.msg {
				t.Errorf("%s as %q: message %q, want %q", tt.path, tt.who, got, tt.msg)
			}
		} else {
			r.Expect(t, tt.path+" as "+tt.who, http.StatusOK)
		}
		if gated != tt.gated {
			t.Errorf("%s as %q: gate ran %v, want %v", tt.path, tt.who, gated, tt.gated)
		}
	}
}

func TestRequireRoleWithoutRoles(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("RequireRole without a role did not panic")
		}
	}()
	accounts.RequireRole(accountstest.Caller, apitest.WriteError, "gauges")
}
