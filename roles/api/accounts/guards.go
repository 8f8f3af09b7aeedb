package accounts

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/httpx"
)

// The guards of the user routes, shared by every route package of the
// Cloud API, so that a caller without a user credential or with a role
// that may not act gets the same answer whatever the route
// (docs/api-errors.md).

// RequireUser returns the reader of the routes every user may call: it
// returns the request's user or, when there is none, answers 401
// unauthorized and false.
func RequireUser(caller func(*gin.Context) (Caller, bool), write httpx.ErrorWriter) func(*gin.Context) (Caller, bool) {
	return func(c *gin.Context) (Caller, bool) {
		who, ok := caller(c)
		if !ok {
			write(c, http.StatusUnauthorized, "unauthorized", "a user credential is required")
		}
		return who, ok
	}
}

// RequireRole returns the guard of the routes that change what, a plural
// ("dashboard layouts") every user may read: 401 without a user, 403
// naming the role for a user whose role is not one of roles.
func RequireRole(caller func(*gin.Context) (Caller, bool), write httpx.ErrorWriter, what string, roles ...string) gin.HandlerFunc {
	if len(roles) == 0 {
		panic("BUG: accounts.RequireRole without a role that may write " + what)
	}
	user := RequireUser(caller, write)
	return func(c *gin.Context) {
		who, ok := user(c)
		if !ok {
			return
		}
		if !slices.Contains(roles, who.Role) {
			write(c, http.StatusForbidden, "forbidden", "the role "+strconv.Quote(who.Role)+" may read "+what+", not change them")
			return
		}
		c.Next()
	}
}

// RequireAdmin returns the guard of admin-only routes: 401 without a
// user, 403 for a member, then gate (the admin rate limit) when set.
func RequireAdmin(caller func(*gin.Context) (Caller, bool), write httpx.ErrorWriter, gate gin.HandlerFunc) gin.HandlerFunc {
	user := RequireUser(caller, write)
	return func(c *gin.Context) {
		who, ok := user(c)
		if !ok {
			return
		}
		if who.Role != RoleAdmin {
			write(c, http.StatusForbidden, "forbidden", "this route is for admins")
			return
		}
		if gate != nil {
			gate(c)
			return
		}
		c.Next()
	}
}
