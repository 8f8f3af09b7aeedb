package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/edgeplat/edgeplat/config"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/httpx"
	"golang.org/x/crypto/bcrypt"
)

const (
	sessionCookie = "admin_session"
	sessionTTL    = 24 * time.Hour
	// sessionIDBytes is 256 bits of randomness, twice the 128 the
	// session id needs at lear.Admins.
	sessionIDBytes       = 32
	minPasswordLen       = config.MinAgentPasswordLen
	maxPasswordLen       = 72 // bcrypt ignores bytes beyond 72
	maxUsernameLen       = 64
	bcryptCost           = 11
	userKey              = "agent.admin"
	loginWindow          = 15 * time.Minute
	loginFailuresPerUser = 10
	loginFailuresPerIP   = 50
)

// HashPassword hashes with bcrypt: it needs a few KB per check, where
// argon2id's memory hardness would cost a small device tens of MB per
// login.
func HashPassword(pw string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcryptCost)
	return string(h), err
}

// dummyHash is compared against when the user does not exist, so a login
// takes as long for an unknown name as for a wrong password. It is made on
// first use, not at start-up, which every role would pay for.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("edgeplat-no-such-user"), bcryptCost)
	return h
})

func checkPassword(hash, pw string) bool {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)) == nil
}

func hashSessionID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// ValidUsername checks an admin user name.
func ValidUsername(u string) error {
	switch {
	case u == "":
		return errors.New("username: is required")
	case len(u) > maxUsernameLen:
		return errors.New("username: must be at most 64 characters")
	case strings.ContainsFunc(u, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '/' }):
		return errors.New("username: must not contain spaces, control characters or '/'")
	}
	return nil
}

func validPassword(pw string) error {
	switch {
	case len(pw) < minPasswordLen:
		return fmt.Errorf("password: must be at least %d characters", minPasswordLen)
	case len(pw) > maxPasswordLen:
		return errors.New("password: must be at most 72 bytes")
	}
	return nil
}

// AdminStore keeps the admin users and their sessions. Sessions are
// known by the SHA-256 of their id only.
type AdminStore interface {
	Admin(ctx context.Context, username string) (AdminUser, error)
	Admins(ctx context.Context) ([]AdminUser, error)
	CreateAdmin(ctx context.Context, u AdminUser) error
	// CreateFirstAdmin creates u as a superuser unless an admin exists.
	CreateFirstAdmin(ctx context.Context, u AdminUser) (bool, error)
	UpdateAdmin(ctx context.Context, username string, p AdminPatch) (AdminUser, error)
	DeleteAdmin(ctx context.Context, username string) error
	CreateSession(ctx context.Context, idHash, username string, expires time.Time) error
	SessionUser(ctx context.Context, idHash string, now time.Time) (AdminUser, error)
	DeleteSession(ctx context.Context, idHash string) error
	PurgeSessions(ctx context.Context, now time.Time) (int64, error)
}

// AdminUser is an admin of the local UI.
type AdminUser struct {
	Username     string
	PasswordHash string
	Active       bool
	Superuser    bool
}

// AdminPatch changes the fields that are set.
type AdminPatch struct {
	Active       *bool
	Superuser    *bool
	PasswordHash *string
}

// authRoutes are the session and admin user routes.
type authRoutes struct {
	routes
	// logins limits failed logins.
	logins *httpx.Attempts
}

// RegisterAuth adds the admin UI's session routes and its user
// management, which use its session, never the API key.
func RegisterAuth(g *gin.RouterGroup, d Deps) {
	r := authRoutes{routes: routes{Deps: d}, logins: httpx.NewAttempts(loginFailuresPerUser, loginFailuresPerIP, loginWindow)}
	auth := g.Group("/auth")
	auth.POST("/login", r.login)
	auth.POST("/logout", r.logout)
	auth.GET("/me", r.requireSession, r.me)
	auth.GET("/setup", r.setupStatus)
	auth.POST("/setup", r.requireKeyOrSession(), r.setup)
	admin := g.Group("/admin", r.requireSession)
	admin.GET("/users", r.listAdmins)
	admin.POST("/users", r.requireSuperuser, r.createAdmin)
	admin.PATCH("/users/:username", r.requireSuperuser, r.updateAdmin)
	admin.DELETE("/users/:username", r.requireSuperuser, r.deleteAdmin)
}

// crossOrigin reports whether a browser sent the request from another
// origin. SameSite=Strict keeps the cookie from other sites, but not from
// another port of the same host (same site), so a session is only good
// for requests from the agent's own pages or from non-browser clients.
func crossOrigin(c *gin.Context) bool {
	if o := c.GetHeader("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, c.Request.Host) {
			return true
		}
	}
	switch c.GetHeader("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	}
	return false
}

// sessionUser returns the admin of the request's session cookie.
func (r routes) sessionUser(c *gin.Context) (AdminUser, bool) {
	if u, ok := c.Get(userKey); ok {
		return u.(AdminUser), true
	}
	id, err := c.Cookie(sessionCookie)
	if err != nil || id == "" || crossOrigin(c) {
		return AdminUser{}, false
	}
	u, err := r.Admins.SessionUser(c.Request.Context(), hashSessionID(id), time.Now())
	if err != nil {
		if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNotReady) {
			r.Log.Error("read session", "err", err)
		}
		return AdminUser{}, false
	}
	c.Set(userKey, u)
	return u, true
}

func (r authRoutes) requireSession(c *gin.Context) {
	if _, ok := r.sessionUser(c); !ok {
		fail(c, http.StatusUnauthorized, "an admin session is required; log in with POST /v1/auth/login")
		return
	}
	c.Next()
}

func (r authRoutes) requireSuperuser(c *gin.Context) {
	if u, _ := r.sessionUser(c); !u.Superuser {
		fail(c, http.StatusForbidden, "only a superuser may manage admin users")
		return
	}
	c.Next()
}

type credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

func (r authRoutes) login(c *gin.Context) {
	var in credentials
	if !bind(c, &in) {
		return
	}
	if in.Username == "" || in.Password == "" {
		fail(c, http.StatusBadRequest, "username and password are required")
		return
	}
	if crossOrigin(c) {
		fail(c, http.StatusForbidden, "log in from the agent's own pages")
		return
	}
	// Only failures count, per name and per address: in LOCALHOST_ONLY
	// mode every client is 127.0.0.1, and good logins must not use up
	// that address's budget.
	ip := c.ClientIP()
	if blocked, retry := r.logins.Check(c.Request.Context(), in.Username, ip); blocked {
		c.Header("Retry-After", retryAfter(retry))
		fail(c, http.StatusTooManyRequests, "too many failed logins; retry in %s", retry.Round(time.Second))
		return
	}
	u, err := r.Admins.Admin(c.Request.Context(), in.Username)
	if err != nil && !errors.Is(err, ErrNotFound) {
		r.respond(c, "read admin user", err)
		return
	}
	hash := u.PasswordHash
	if err != nil {
		hash = string(dummyHash())
	}
	if !checkPassword(hash, in.Password) || err != nil || !u.Active {
		r.logins.Fail(c.Request.Context(), in.Username, ip)
		r.Log.Warn("admin login failed", "username", in.Username, "ip", ip)
		fail(c, http.StatusUnauthorized, "invalid username or password")
		return
	}
	r.logins.Succeed(c.Request.Context(), in.Username)
	// A new id at every login, so a session id planted before login is
	// worthless after it.
	if old, err := c.Cookie(sessionCookie); err == nil && old != "" {
		_ = r.Admins.DeleteSession(c.Request.Context(), hashSessionID(old))
	}
	buf := make([]byte, sessionIDBytes)
	_, _ = rand.Read(buf)
	id := base64.RawURLEncoding.EncodeToString(buf)
	if n, err := r.Admins.PurgeSessions(c.Request.Context(), time.Now()); err != nil {
		r.Log.Warn("purge expired sessions", "err", err)
	} else if n > 0 {
		r.Log.Debug("expired sessions purged", "sessions", n)
	}
	if err := r.Admins.CreateSession(c.Request.Context(), hashSessionID(id), u.Username, time.Now().Add(sessionTTL)); err != nil {
		r.respond(c, "create session", err)
		return
	}
	setSessionCookie(c, id, int(sessionTTL.Seconds()))
	r.Log.Info("admin logged in", "username", u.Username)
	c.JSON(http.StatusOK, gin.H{"username": u.Username, "is_superuser": u.Superuser})
}

func setSessionCookie(c *gin.Context, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Request.TLS != nil,
	})
}

func (r authRoutes) logout(c *gin.Context) {
	if id, err := c.Cookie(sessionCookie); err == nil && id != "" {
		if err := r.Admins.DeleteSession(c.Request.Context(), hashSessionID(id)); err != nil && !errors.Is(err, ErrNotReady) {
			r.respond(c, "end session", err)
			return
		}
	}
	setSessionCookie(c, "", -1)
	c.JSON(http.StatusOK, gin.H{"ok": true})
}

func (r authRoutes) me(c *gin.Context) {
	u, _ := r.sessionUser(c)
	c.JSON(http.StatusOK, gin.H{"username": u.Username, "is_superuser": u.Superuser})
}

// setupStatus tells the admin UI, before anyone has logged in, whether
// to offer the first-run setup and whether that setup needs the API key.
// It is open like login: it reveals only that no admin exists yet, which
// setup's own 409 would tell anyone who tried.
func (r authRoutes) setupStatus(c *gin.Context) {
	us, err := r.Admins.Admins(c.Request.Context())
	if err != nil {
		r.respond(c, "list admin users", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"required": len(us) == 0, "apiKey": r.KeyMode})
}

// setup creates the first admin once, for agents started without
// AGENT_ADMIN_USERNAME; afterwards it answers 409.
func (r authRoutes) setup(c *gin.Context) {
	var in credentials
	if !bind(c, &in) {
		return
	}
	h, ok := r.newUserHash(c, in.Username, in.Password)
	if !ok {
		return
	}
	created, err := r.Admins.CreateFirstAdmin(c.Request.Context(), AdminUser{Username: in.Username, PasswordHash: h})
	if err != nil {
		r.respond(c, "create admin user", err)
		return
	}
	if !created {
		fail(c, http.StatusConflict, "an admin user exists already; log in and use /v1/admin/users")
		return
	}
	r.Log.Info("first admin user created through setup", "username", in.Username)
	c.JSON(http.StatusCreated, userView(AdminUser{Username: in.Username, Active: true, Superuser: true}))
}

// newUserHash checks a new user's name and password and hashes the
// password, or answers 400 naming what is wrong.
func (r authRoutes) newUserHash(c *gin.Context, username, password string) (string, bool) {
	if err := errors.Join(ValidUsername(username), validPassword(password)); err != nil {
		r.respond(c, "", Invalid(err))
		return "", false
	}
	h, err := HashPassword(password)
	if err != nil {
		r.respond(c, "hash password", err)
		return "", false
	}
	return h, true
}

func userView(u AdminUser) gin.H {
	return gin.H{"username": u.Username, "is_active": u.Active, "is_superuser": u.Superuser}
}

func (r authRoutes) listAdmins(c *gin.Context) {
	us, err := r.Admins.Admins(c.Request.Context())
	if err != nil {
		r.respond(c, "list admin users", err)
		return
	}
	out := make([]gin.H, len(us))
	for i, u := range us {
		out[i] = userView(u)
	}
	c.JSON(http.StatusOK, gin.H{"users": out})
}

type newAdmin struct {
	Username  string `json:"username"`
	Password  string `json:"password"`
	Superuser bool   `json:"is_superuser"`
	Active    *bool  `json:"is_active"`
}

func (r authRoutes) createAdmin(c *gin.Context) {
	var in newAdmin
	if !bind(c, &in) {
		return
	}
	h, ok := r.newUserHash(c, in.Username, in.Password)
	if !ok {
		return
	}
	u := AdminUser{Username: in.Username, PasswordHash: h, Active: in.Active == nil || *in.Active, Superuser: in.Superuser}
	if err := r.Admins.CreateAdmin(c.Request.Context(), u); err != nil {
		if errors.Is(err, ErrDuplicate) {
			fail(c, http.StatusConflict, "admin user %q exists already", in.Username)
			return
		}
		r.respond(c, "create admin user", err)
		return
	}
	c.JSON(http.StatusCreated, userView(u))
}

type adminPatch struct {
	Active    *bool   `json:"is_active"`
	Superuser *bool   `json:"is_superuser"`
	Password  *string `json:"password"`
}

func (r authRoutes) updateAdmin(c *gin.Context) {
	var in adminPatch
	if !bind(c, &in) {
		return
	}
	p := AdminPatch{Active: in.Active, Superuser: in.Superuser}
	if in.Password != nil {
		if err := validPassword(*in.Password); err != nil {
			fail(c, http.StatusBadRequest, "%v", err)
			return
		}
		h, err := HashPassword(*in.Password)
		if err != nil {
			r.respond(c, "hash password", err)
			return
		}
		p.PasswordHash = &h
	}
	u, err := r.Admins.UpdateAdmin(c.Request.Context(), c.Param("username"), p)
	r.reply(c, http.StatusOK, "update admin user", userView(u), userError(c, err))
}

// userError names the user of a change that failed for a reason the
// client can fix.
func userError(c *gin.Context, err error) error {
	switch {
	case errors.Is(err, ErrLastSuperuser):
		return Errorf(http.StatusConflict, "%q is the last active superuser; make another user superuser first", c.Param("username"))
	case errors.Is(err, ErrNotFound):
		return Errorf(http.StatusNotFound, "no admin user %q", c.Param("username"))
	}
	return err
}

func (r authRoutes) deleteAdmin(c *gin.Context) {
	err := r.Admins.DeleteAdmin(c.Request.Context(), c.Param("username"))
	r.reply(c, http.StatusOK, "delete admin user", gin.H{"ok": true}, userError(c, err))
}

func retryAfter(d time.Duration) string {
	s := int(d.Seconds() + 0.999)
	if s < 1 {
		s = 1
	}
	return strconv.Itoa(s)
}
