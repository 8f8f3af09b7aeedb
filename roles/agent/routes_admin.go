package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/edgeplat/edgeplat/roles/agent/store"
	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"
)

const (
	sessionCookie = "admin_session"
	sessionTTL    = 24 * time.Hour
	// sessionIDBytes is 256 bits of randomness, twice the 128 the
	// session id needs at least.
	sessionIDBytes       = 32
	minPasswordLen       = 6
	maxPasswordLen       = 72 // bcrypt ignores bytes beyond 72
	maxUsernameLen       = 64
	bcryptCost           = 11
	userKey              = "agent.admin"
	loginWindow          = 15 * time.Minute
	loginFailuresPerUser = 10
	loginFailuresPerIP   = 50
)

// Passwords are hashed with bcrypt: it needs a few KB per check, where
// argon2id's memory hardness would cost a small device tens of MB per
// login.
func hashPassword(pw string) (string, error) {
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

func validUsername(u string) error {
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
		return errors.New("password: must be at least 6 characters")
	case len(pw) > maxPasswordLen:
		return errors.New("password: must be at most 72 bytes")
	}
	return nil
}

// bootstrapAdmin creates the first admin from AGENT_ADMIN_USERNAME and
// AGENT_ADMIN_PASSWORD when no admin exists. There is never a default
// password: without them the first admin comes from POST /v1/auth/setup.
func (a *Agent) bootstrapAdmin(ctx context.Context) error {
	if a.cfg.AdminUsername == "" {
		return nil
	}
	if err := validUsername(a.cfg.AdminUsername); err != nil {
		return errors.New("agent.admin_username (AGENT_ADMIN_USERNAME): " + strings.TrimPrefix(err.Error(), "username: "))
	}
	h, err := hashPassword(a.cfg.AdminPassword.Reveal())
	if err != nil {
		return err
	}
	created, err := a.st.Load().CreateFirstAdmin(ctx, store.AdminUser{Username: a.cfg.AdminUsername, PasswordHash: h})
	if err != nil {
		return err
	}
	if created {
		a.log.Info("first admin user created from AGENT_ADMIN_USERNAME", "username", a.cfg.AdminUsername)
	}
	return nil
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
func (a *Agent) sessionUser(c *gin.Context) (store.AdminUser, bool) {
	if u, ok := c.Get(userKey); ok {
		return u.(store.AdminUser), true
	}
	id, err := c.Cookie(sessionCookie)
	if err != nil || id == "" || crossOrigin(c) {
		return store.AdminUser{}, false
	}
	s := a.st.Load()
	if s == nil {
		return store.AdminUser{}, false
	}
	u, err := s.SessionUser(c.Request.Context(), hashSessionID(id), time.Now())
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			a.log.Error("read session", "err", err)
		}
		return store.AdminUser{}, false
	}
	c.Set(userKey, u)
	return u, true
}

func (a *Agent) requireSession(c *gin.Context) {
	if _, ok := a.sessionUser(c); !ok {
		fail(c, http.StatusUnauthorized, "an admin session is required; log in with POST /v1/auth/login")
		return
	}
	c.Next()
}

func (a *Agent) requireSuperuser(c *gin.Context) {
	if u, _ := a.sessionUser(c); !u.Superuser {
		fail(c, http.StatusForbidden, "only a superuser may manage admin users")
		return
	}
	c.Next()
}

type credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

func (a *Agent) login(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
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
	if blocked, retry := a.logins.Check(in.Username, ip); blocked {
		c.Header("Retry-After", retryAfter(retry))
		fail(c, http.StatusTooManyRequests, "too many failed logins; retry in %s", retry.Round(time.Second))
		return
	}
	u, err := st.Admin(c.Request.Context(), in.Username)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.internal(c, "read admin user", err)
		return
	}
	hash := u.PasswordHash
	if err != nil {
		hash = string(dummyHash())
	}
	if !checkPassword(hash, in.Password) || err != nil || !u.Active {
		a.logins.Fail(in.Username, ip)
		a.log.Warn("admin login failed", "username", in.Username, "ip", ip)
		fail(c, http.StatusUnauthorized, "invalid username or password")
		return
	}
	a.logins.Succeed(in.Username)
	// A new id at every login, so a session id planted before login is
	// worthless after it.
	if old, err := c.Cookie(sessionCookie); err == nil && old != "" {
		_ = st.DeleteSession(c.Request.Context(), hashSessionID(old))
	}
	buf := make([]byte, sessionIDBytes)
	_, _ = rand.Read(buf)
	id := base64.RawURLEncoding.EncodeToString(buf)
	if n, err := st.PurgeSessions(c.Request.Context(), time.Now()); err != nil {
		a.log.Warn("purge expired sessions", "err", err)
	} else if n > 0 {
		a.log.Debug("expired sessions purged", "sessions", n)
	}
	if err := st.CreateSession(c.Request.Context(), hashSessionID(id), u.Username, time.Now().Add(sessionTTL)); err != nil {
		a.internal(c, "create session", err)
		return
	}
	setSessionCookie(c, id, int(sessionTTL.Seconds()))
	a.log.Info("admin logged in", "username", u.Username)
	c.JSON(http.StatusOK, gin.H{"username": u.Username, "is_superuser": u.Superuser})
}

func setSessionCookie(c *gin.Context, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: sessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Request.TLS != nil,
	})
}

func (a *Agent) logout(c *gin.Context) {
	if id, err := c.Cookie(sessionCookie); err == nil && id != "" {
		if st := a.st.Load(); st != nil {
			if err := st.DeleteSession(c.Request.Context(), hashSessionID(id)); err != nil {
				a.internal(c, "end session", err)
				return
			}
		}
	}
	setSessionCookie(c, "", -1)
	c.JSON(http.StatusOK, gin.H{"ok": true})
}

func (a *Agent) me(c *gin.Context) {
	u, _ := a.sessionUser(c)
	c.JSON(http.StatusOK, gin.H{"username": u.Username, "is_superuser": u.Superuser})
}

// setup creates the first admin once, for agents started without
// AGENT_ADMIN_USERNAME; afterwards it answers 409.
func (a *Agent) setup(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	var in credentials
	if !bind(c, &in) {
		return
	}
	h, ok := a.newUserHash(c, in.Username, in.Password)
	if !ok {
		return
	}
	created, err := st.CreateFirstAdmin(c.Request.Context(), store.AdminUser{Username: in.Username, PasswordHash: h})
	if err != nil {
		a.internal(c, "create admin user", err)
		return
	}
	if !created {
		fail(c, http.StatusConflict, "an admin user exists already; log in and use /v1/admin/users")
		return
	}
	a.log.Info("first admin user created through setup", "username", in.Username)
	c.JSON(http.StatusCreated, userView(store.AdminUser{Username: in.Username, Active: true, Superuser: true}))
}

// newUserHash checks a new user's name and password and hashes the
// password, or answers 400 naming what is wrong.
func (a *Agent) newUserHash(c *gin.Context, username, password string) (string, bool) {
	if err := errors.Join(validUsername(username), validPassword(password)); err != nil {
		badRequest(c, err)
		return "", false
	}
	h, err := hashPassword(password)
	if err != nil {
		a.internal(c, "hash password", err)
		return "", false
	}
	return h, true
}

func userView(u store.AdminUser) gin.H {
	return gin.H{"username": u.Username, "is_active": u.Active, "is_superuser": u.Superuser}
}

func (a *Agent) listAdmins(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	us, err := st.Admins(c.Request.Context())
	if err != nil {
		a.internal(c, "list admin users", err)
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

func (a *Agent) createAdmin(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	var in newAdmin
	if !bind(c, &in) {
		return
	}
	h, ok := a.newUserHash(c, in.Username, in.Password)
	if !ok {
		return
	}
	u := store.AdminUser{Username: in.Username, PasswordHash: h, Active: in.Active == nil || *in.Active, Superuser: in.Superuser}
	if err := st.CreateAdmin(c.Request.Context(), u); err != nil {
		if errors.Is(err, store.ErrDuplicate) {
			fail(c, http.StatusConflict, "admin user %q exists already", in.Username)
			return
		}
		a.internal(c, "create admin user", err)
		return
	}
	c.JSON(http.StatusCreated, userView(u))
}

type adminPatch struct {
	Active    *bool   `json:"is_active"`
	Superuser *bool   `json:"is_superuser"`
	Password  *string `json:"password"`
}

func (a *Agent) updateAdmin(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	var in adminPatch
	if !bind(c, &in) {
		return
	}
	p := store.AdminPatch{Active: in.Active, Superuser: in.Superuser}
	if in.Password != nil {
		if err := validPassword(*in.Password); err != nil {
			fail(c, http.StatusBadRequest, "%v", err)
			return
		}
		h, err := hashPassword(*in.Password)
		if err != nil {
			a.internal(c, "hash password", err)
			return
		}
		p.PasswordHash = &h
	}
	u, err := st.UpdateAdmin(c.Request.Context(), c.Param("username"), p)
	if errors.Is(err, store.ErrLastSuperuser) {
		fail(c, http.StatusConflict, "%q is the last active superuser; make another user superuser first", c.Param("username"))
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		fail(c, http.StatusNotFound, "no admin user %q", c.Param("username"))
		return
	}
	if err != nil {
		a.internal(c, "update admin user", err)
		return
	}
	c.JSON(http.StatusOK, userView(u))
}

func (a *Agent) deleteAdmin(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	err := st.DeleteAdmin(c.Request.Context(), c.Param("username"))
	if errors.Is(err, store.ErrLastSuperuser) {
		fail(c, http.StatusConflict, "%q is the last active superuser; make another user superuser first", c.Param("username"))
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		fail(c, http.StatusNotFound, "no admin user %q", c.Param("username"))
		return
	}
	if err != nil {
		a.internal(c, "delete admin user", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"ok": true})
}

func retryAfter(d time.Duration) string {
	s := int(d.Seconds() + 0.999)
	if s < 1 {
		s = 1
	}
	return strconv.Itoa(s)
}
