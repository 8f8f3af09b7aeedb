package brokerusers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/edgeplat/edgeplat/roles/api/secret"
	"slices"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/db"
)

// Errors of the store; the handlers map them to statuses.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = errors.New("invalid input")
	ErrConflict = errors.New("conflict")
)

// Limits of a broker user.
const (
	minUsernameLen = 3
	maxUsernameLen = 64
	maxDescription = 200
	passwordLen    = 32
	saltLen        = 16
)

// reservedPrefixes start names that belong to other MQTT clients: the key
// schemes of device, provisioning and user API keys (device keys are MQTT
// usernames), the device client ids "agent-{uuid}", and "edgeplat", which
// begins the client ids the platform's own services derive from their host
// name (mqttx.DefaultClientID).
var reservedPrefixes = []string{"dk2_", "dk_", "pk_", "ek_", brokerauth.ClientIDPrefix, "edgeplat"}

// Rule is one ACL rule of a broker user. Pattern is an MQTT topic filter
// relative to the tenant's topic space i/{tenant}/; Topic is the same
// filter with that prefix, as the broker sees it (filled in by the store).
type Rule struct {
	Pattern   string `json:"pattern"`
	Topic     string `json:"topic"`
	Publish   bool   `json:"publish"`
	Subscribe bool   `json:"subscribe"`
}

// User is a broker user as listings show it; the password is never shown
// again after it was issued.
type User struct {
	Username    string `json:"username"`
	TenantUUID  string `json:"tenantId"`
	Description string `json:"description"`
	// TopicPrefix is the tenant's topic space, i/{tenant}/, that every
	// rule's pattern is relative to.
	TopicPrefix string    `json:"topicPrefix"`
	Rules       []Rule    `json:"rules"`
	CreatedBy   string    `json:"createdBy,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	// RulesChanged is set by Update when the rules it wrote differ from
	// the ones they replaced.
	RulesChanged bool `json:"-"`
}

// NewUser is what creating a broker user takes. The password is generated.
type NewUser struct {
	Username    string
	Description string
	Rules       []Rule
}

// Change is an update of a broker user: nil fields stay as they are.
type Change struct {
	Description *string
	// Rules, when set, replace all rules (an empty list leaves none).
	Rules *[]Rule
	// ResetPassword issues a new password; the old one stops working.
	ResetPassword bool
}

// Store keeps the broker users of every tenant. Every read and change of a
// tenant's users filters on the tenant taken from the caller's credential;
// another tenant's user is ErrNotFound. Only the broker's credential check
// (AuthenticateBrokerUser) looks a user up by name alone, as the broker
// knows no tenant.
type Store struct {
	db       *db.DB
	now      func() time.Time
	reserved []string
}

// NewStore returns a store on d, which must be open by the first call.
// reserved are names no broker user may take: the service users' usernames
// (mqtt.username) and the client ids of the platform's own MQTT clients
// (mqtt.client_id), since a broker user's client ids begin with its name.
// Empty entries are ignored.
func NewStore(d *db.DB, reserved ...string) *Store {
	s := &Store{db: d, now: func() time.Time { return time.Now().UTC() }}
	for _, r := range reserved {
		if r = strings.ToLower(strings.TrimSpace(r)); r != "" {
			s.reserved = append(s.reserved, r)
		}
	}
	return s
}

func (s *Store) sql() (*sql.DB, db.Dialect) {
	return s.db.SQL(), s.db.Dialect()
}

// ValidateUsername reports whether name may be a broker user's name: 3 to
// 64 characters of [a-z0-9._-] starting with a letter or digit. The set
// leaves out ':', which separates the username from the rest of its client
// ids, and everything brokerauth.ValidateIdentifier refuses.
func ValidateUsername(name string) error {
	if len(name) < minUsernameLen || len(name) > maxUsernameLen {
		return fmt.Errorf("%w: username must be %d to %d characters", ErrInvalid, minUsernameLen, maxUsernameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("%w: username must be lowercase letters, digits, '.', '_' and '-', starting with a letter or digit", ErrInvalid)
		}
	}
	if err := brokerauth.ValidateIdentifier(name); err != nil {
		return fmt.Errorf("%w: username: %w", ErrInvalid, err)
	}
	return nil
}

// checkUsername is ValidateUsername plus the names other MQTT clients own.
func (s *Store) checkUsername(name string) error {
	if err := ValidateUsername(name); err != nil {
		return err
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("%w: usernames starting with %q are reserved", ErrInvalid, p)
		}
	}
	for _, r := range s.reserved {
		if r == name || strings.HasPrefix(r, name+brokerauth.BrokerUserClientIDSeparator) {
			return fmt.Errorf("%w: username %q is reserved for the platform's own MQTT clients", ErrInvalid, name)
		}
	}
	return nil
}

func checkDescription(d string) (string, error) {
	d = strings.TrimSpace(d)
	if len(d) > maxDescription || strings.ContainsFunc(d, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%w: description must be at most %d bytes without control characters", ErrInvalid, maxDescription)
	}
	return d, nil
}

// checkRules validates rules for tenant. A pattern that repeats the
// tenant's own prefix is refused with a hint: it would stand for
// i/{tenant}/i/{tenant}/... and match nothing the admin meant.
func checkRules(tenant string, rules []Rule) error {
	if len(rules) > brokerauth.MaxRules {
		return fmt.Errorf("%w: at most %d rules, got %d", ErrInvalid, brokerauth.MaxRules, len(rules))
	}
	prefix, err := brokerauth.TenantTopicPrefix(tenant)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	seen := make(map[string]bool, len(rules))
	for i, r := range rules {
		if err := brokerauth.ValidatePattern(r.Pattern); err != nil {
			return fmt.Errorf("%w: rules[%d]: %w", ErrInvalid, i, err)
		}
		if !r.Publish && !r.Subscribe {
			return fmt.Errorf("%w: rules[%d]: allow publish, subscribe or both", ErrInvalid, i)
		}
		if strings.HasPrefix(r.Pattern, prefix) {
			return fmt.Errorf("%w: rules[%d]: patterns are relative to %s; leave that prefix out", ErrInvalid, i, prefix)
		}
		if seen[r.Pattern] {
			return fmt.Errorf("%w: rules[%d]: pattern %q is given twice; one rule can allow both publish and subscribe", ErrInvalid, i, r.Pattern)
		}
		seen[r.Pattern] = true
	}
	return nil
}

// Create adds a broker user to tenant with a generated password, which is
// returned once. A username taken by any tenant is ErrConflict: MQTT
// usernames are one namespace.
func (s *Store) Create(ctx context.Context, tenant, createdBy string, n NewUser) (User, string, error) {
	if err := s.checkUsername(n.Username); err != nil {
		return User{}, "", err
	}
	desc, err := checkDescription(n.Description)
	if err != nil {
		return User{}, "", err
	}
	if err := checkRules(tenant, n.Rules); err != nil {
		return User{}, "", err
	}
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return User{}, "", fmt.Errorf("create broker user: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	now := s.now()
	password := secret.Random(passwordLen)
	_, err = tx.ExecContext(ctx, `INSERT INTO broker_users (username, tenant_uuid, password_hash, description, created_by, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, n.Username, tenant, hashPassword(password), desc, db.UUIDArg(createdBy), d.TimeArg(now), d.TimeArg(now))
	if db.IsUniqueViolation(err) {
		return User{}, "", fmt.Errorf("%w: username %q is taken", ErrConflict, n.Username)
	}
	if err != nil {
		return User{}, "", fmt.Errorf("create broker user: %w", err)
	}
	if err := insertRules(ctx, tx, n.Username, n.Rules); err != nil {
		return User{}, "", err
	}
	u, err := s.user(ctx, tx, tenant, n.Username)
	if err != nil {
		return User{}, "", err
	}
	if err := tx.Commit(); err != nil {
		return User{}, "", fmt.Errorf("create broker user: commit: %w", err)
	}
	return u, password, nil
}

// Update changes a broker user of tenant. The new password is returned when
// c.ResetPassword asked for one, else "".
func (s *Store) Update(ctx context.Context, tenant, username string, c Change) (User, string, error) {
	var desc string
	if c.Description != nil {
		var err error
		if desc, err = checkDescription(*c.Description); err != nil {
			return User{}, "", err
		}
	}
	if c.Rules != nil {
		if err := checkRules(tenant, *c.Rules); err != nil {
			return User{}, "", err
		}
	}
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return User{}, "", fmt.Errorf("update broker user: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var b db.SQLBuilder
	b.Write(`UPDATE broker_users SET updated_at = `, b.Arg(d.TimeArg(s.now())))
	if c.Description != nil {
		b.Write(`, description = `, b.Arg(desc))
	}
	var password string
	if c.ResetPassword {
		password = secret.Random(passwordLen)
		b.Write(`, password_hash = `, b.Arg(hashPassword(password)))
	}
	b.Write(` WHERE username = `, b.Arg(username), ` AND tenant_uuid = `, b.Arg(tenant))
	res, err := tx.ExecContext(ctx, b.String(), b.Args()...)
	if err != nil {
		return User{}, "", fmt.Errorf("update broker user: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return User{}, "", notFound(username)
	}
	// The UPDATE above holds the user's row, so the rules read here are
	// the ones this change replaces even when another change ran at once.
	rulesChanged := false
	if c.Rules != nil {
		prev, err := s.user(ctx, tx, tenant, username)
		if err != nil {
			return User{}, "", err
		}
		rulesChanged = !rulesEqual(prev.Rules, *c.Rules)
		if _, err := tx.ExecContext(ctx, `DELETE FROM broker_acl WHERE username = $1`, username); err != nil {
			return User{}, "", fmt.Errorf("update broker user rules: %w", err)
		}
		if err := insertRules(ctx, tx, username, *c.Rules); err != nil {
			return User{}, "", err
		}
	}
	u, err := s.user(ctx, tx, tenant, username)
	if err != nil {
		return User{}, "", err
	}
	u.RulesChanged = rulesChanged
	if err := tx.Commit(); err != nil {
		return User{}, "", fmt.Errorf("update broker user: commit: %w", err)
	}
	return u, password, nil
}

// ResetPassword gives a broker user of tenant a new password and returns
// it; the old one stops working.
func (s *Store) ResetPassword(ctx context.Context, tenant, username string) (string, error) {
	_, password, err := s.Update(ctx, tenant, username, Change{ResetPassword: true})
	return password, err
}

// Delete removes a broker user of tenant with its rules.
func (s *Store) Delete(ctx context.Context, tenant, username string) error {
	conn, _ := s.sql()
	res, err := conn.ExecContext(ctx, `DELETE FROM broker_users WHERE username = $1 AND tenant_uuid = $2`, username, tenant)
	if err != nil {
		return fmt.Errorf("delete broker user: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound(username)
	}
	return nil
}

// User returns one broker user of tenant.
func (s *Store) User(ctx context.Context, tenant, username string) (User, error) {
	conn, _ := s.sql()
	return s.user(ctx, conn, tenant, username)
}

// Users lists tenant's broker users by username.
func (s *Store) Users(ctx context.Context, tenant string) ([]User, error) {
	conn, _ := s.sql()
	return s.users(ctx, conn, tenant, "")
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *Store) user(ctx context.Context, q querier, tenant, username string) (User, error) {
	users, err := s.users(ctx, q, tenant, username)
	if err != nil {
		return User{}, err
	}
	if len(users) == 0 {
		return User{}, notFound(username)
	}
	return users[0], nil
}

// users reads tenant's users with their rules, one of them when username
// is set.
func (s *Store) users(ctx context.Context, q querier, tenant, username string) ([]User, error) {
	prefix, err := brokerauth.TenantTopicPrefix(tenant)
	if err != nil {
		// The tenant comes from a verified credential; no tenant without
		// a UUID owns anything.
		return nil, fmt.Errorf("list broker users: %w", err)
	}
	var b db.SQLBuilder
	b.Write(`SELECT u.username, u.description, u.created_by, u.created_at, u.updated_at, r.pattern, r.publish, r.subscribe
		FROM broker_users u LEFT JOIN broker_acl r ON r.username = u.username
		WHERE u.tenant_uuid = `, b.Arg(tenant))
	if username != "" {
		b.Write(` AND u.username = `, b.Arg(username))
	}
	b.Write(` ORDER BY u.username, r.rule_index`)
	rows, err := q.QueryContext(ctx, b.String(), b.Args()...)
	if err != nil {
		return nil, fmt.Errorf("list broker users: %w", err)
	}
	defer rows.Close()
	users := []User{}
	for rows.Next() {
		var name, desc string
		var createdBy, pattern sql.NullString
		var created, updated db.Timestamp
		var publish, subscribe sql.NullBool
		if err := rows.Scan(&name, &desc, &createdBy, &created, &updated, &pattern, &publish, &subscribe); err != nil {
			return nil, fmt.Errorf("list broker users: %w", err)
		}
		if n := len(users); n == 0 || users[n-1].Username != name {
			users = append(users, User{Username: name, TenantUUID: tenant, Description: desc, TopicPrefix: prefix,
				Rules: []Rule{}, CreatedBy: createdBy.String, CreatedAt: created.Time, UpdatedAt: updated.Time})
		}
		if pattern.Valid {
			u := &users[len(users)-1]
			u.Rules = append(u.Rules, Rule{Pattern: pattern.String, Topic: prefix + pattern.String, Publish: publish.Bool, Subscribe: subscribe.Bool})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list broker users: %w", err)
	}
	return users, nil
}

func insertRules(ctx context.Context, x execer, username string, rules []Rule) error {
	for i, r := range rules {
		if _, err := x.ExecContext(ctx, `INSERT INTO broker_acl (username, rule_index, pattern, publish, subscribe) VALUES ($1, $2, $3, $4, $5)`,
			username, i, r.Pattern, r.Publish, r.Subscribe); err != nil {
			return fmt.Errorf("store broker user rule: %w", err)
		}
	}
	return nil
}

// AuthenticateBrokerUser checks a broker user's MQTT credentials and
// returns its identity: tenant and rules. An unknown username or a wrong
// password is an error wrapping brokerauth.ErrDenied; any other error
// means the store could not tell. It is the broker's lookup, by name
// alone; CombinedStore routes non-device usernames here.
func (s *Store) AuthenticateBrokerUser(ctx context.Context, username, password string) (brokerauth.Identity, error) {
	if ValidateUsername(username) != nil {
		return brokerauth.Identity{}, fmt.Errorf("%w: not a broker username", brokerauth.ErrDenied)
	}
	conn, _ := s.sql()
	rows, err := conn.QueryContext(ctx, `SELECT u.tenant_uuid, u.password_hash, r.pattern, r.publish, r.subscribe
		FROM broker_users u LEFT JOIN broker_acl r ON r.username = u.username
		WHERE u.username = $1 ORDER BY r.rule_index`, username)
	if err != nil {
		return brokerauth.Identity{}, fmt.Errorf("find broker user: %w", err)
	}
	defer rows.Close()
	var tenant, stored string
	found := false
	acl := &brokerauth.ACL{Rules: []brokerauth.Rule{}}
	for rows.Next() {
		var pattern sql.NullString
		var publish, subscribe sql.NullBool
		if err := rows.Scan(&tenant, &stored, &pattern, &publish, &subscribe); err != nil {
			return brokerauth.Identity{}, fmt.Errorf("find broker user: %w", err)
		}
		found = true
		if pattern.Valid {
			acl.Rules = append(acl.Rules, brokerauth.Rule{Pattern: pattern.String, Publish: publish.Bool, Subscribe: subscribe.Bool})
		}
	}
	if err := rows.Err(); err != nil {
		return brokerauth.Identity{}, fmt.Errorf("find broker user: %w", err)
	}
	if !found {
		// The same work as a known name, so timing does not tell which
		// usernames exist.
		hashPassword(password)
		return brokerauth.Identity{}, fmt.Errorf("%w: unknown broker user", brokerauth.ErrDenied)
	}
	ok, err := passwordMatches(stored, password)
	if err != nil {
		return brokerauth.Identity{}, fmt.Errorf("broker user %s: %w", brokerauth.Fingerprint(username), err)
	}
	if !ok {
		return brokerauth.Identity{}, fmt.Errorf("%w: wrong broker user password", brokerauth.ErrDenied)
	}
	return brokerauth.Identity{Username: username, TenantUUID: tenant, ACL: acl}, nil
}

func notFound(username string) error {
	return fmt.Errorf("%w: broker user %q", ErrNotFound, clip(username))
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// passwordScheme starts every stored password hash.
const passwordScheme = "sha256$"

// hashPassword returns "sha256$" + hex salt + "$" + hex SHA-256(salt ||
// password) with a fresh random salt.
func hashPassword(password string) string {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		panic("BUG: crypto/rand: " + err.Error())
	}
	return passwordScheme + hex.EncodeToString(salt) + "$" + saltedHash(salt, password)
}

func saltedHash(salt []byte, password string) string {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(password))
	return hex.EncodeToString(h.Sum(nil))
}

// passwordMatches compares password with a stored hash in constant time. A
// hash it cannot read is an error, not a refusal: the row is damaged.
func passwordMatches(stored, password string) (bool, error) {
	rest, ok := strings.CutPrefix(stored, passwordScheme)
	saltHex, sum, ok2 := strings.Cut(rest, "$")
	salt, err := hex.DecodeString(saltHex)
	if !ok || !ok2 || err != nil || len(salt) != saltLen || len(sum) != 2*sha256.Size {
		return false, errors.New("stored password hash is not in the sha256$salt$hash form")
	}
	return subtle.ConstantTimeCompare([]byte(sum), []byte(saltedHash(salt, password))) == 1, nil
}

// rulesEqual reports whether two rule lists allow the same, in the same
// order (Topic follows from Pattern and is ignored).
func rulesEqual(a, b []Rule) bool {
	return slices.EqualFunc(a, b, func(x, y Rule) bool {
		return x.Pattern == y.Pattern && x.Publish == y.Publish && x.Subscribe == y.Subscribe
	})
}
