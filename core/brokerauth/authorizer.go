// Package brokerauth decides who may connect to the MQTT broker and which
// topics each client may use. One Authorizer serves both brokers the
// platform runs with: the embedded mochi-mqtt broker calls it in-process
// (roles/broker), and external brokers reach it through the HTTP callbacks
// of roles/api/brokerauth. Every failure closes: a store error, a timeout
// or an unreadable request is a refusal. Store answers are cached;
// Invalidate makes revocation refuse new connections, and the rights of
// open sessions, at once. See docs/broker-auth.md, sections The rules and
// Caching and revocation.
package brokerauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/prometheus/client_golang/prometheus"
)

// Store checks device credentials. The account store implements it; the
// interface lives here, with its only user.
type Store interface {
	// AuthenticateDevice returns the identity of the device whose API key
	// is username and whose MQTT password is password. It returns an error
	// wrapping ErrDenied for an unknown or revoked key or a wrong password,
	// and any other error when it could not decide.
	//
	// A store that also holds broker users answers for them here too, with
	// an Identity whose ACL is set (their tenant and rules) and AgentUUID
	// empty.
	AuthenticateDevice(ctx context.Context, username, password string) (Identity, error)
}

// ErrDenied means the credentials were refused. Stores wrap it for bad
// credentials; Authenticate wraps it for every refusal that is not a
// failure to decide.
var ErrDenied = errors.New("broker credentials denied")

// Check names what was being decided, in metrics and deny events.
type Check string

// The checks.
const (
	CheckConnect   Check = "connect"
	CheckSuperuser Check = "superuser"
	CheckPublish   Check = "publish"
	CheckSubscribe Check = "subscribe"
	// CheckRead is a broker asking whether a message may be delivered to a
	// client (mosquitto's MOSQ_ACL_READ).
	CheckRead Check = "read"
)

// Access is what an ACL check asks for. The values are mosquitto's (and so
// mosquitto-go-auth's "acc" field), which makes them bit flags: 3 asks for
// read and write together.
type Access int

// The access kinds.
const (
	AccessRead      Access = 1
	AccessWrite     Access = 2
	AccessSubscribe Access = 4
)

const accessAll = AccessRead | AccessWrite | AccessSubscribe

// DenyEvent describes one refusal, for the audit log.
type DenyEvent struct {
	Check  Check
	Reason string
	// UserFingerprint identifies the username without revealing it: a
	// device username is its API key, which must never reach a log or an
	// audit record. It is the first 8 bytes of the username's SHA-256, in
	// hex; the account store can compute the same to find the key.
	UserFingerprint string
	ClientID        string
	// TenantUUID and AgentUUID are set when the client's identity was
	// known (ACL checks, or a connect whose credentials were right).
	TenantUUID string
	AgentUUID  string
	// Topic is the topic or filter of a publish or subscribe check,
	// clipped to 512 bytes.
	Topic string
}

// Options configures New.
type Options struct {
	// Store authenticates devices. Required.
	Store Store
	// ServiceUsers maps the username of each service user to its password.
	ServiceUsers map[string]config.Secret
	// CacheTTL is how long a store answer is reused; zero disables the
	// cache (mqtt.auth_cache_ttl_seconds).
	CacheTTL time.Duration
	// MaxCacheEntries bounds the usernames the cache and the identity table
	// each hold; 10000 when zero. It should exceed the number of devices
	// connected through one broker: an identity evicted while its device
	// is connected fails that device's ACL checks until it reconnects.
	MaxCacheEntries int
	// StoreTimeout bounds one store call; 5 s when zero.
	StoreTimeout time.Duration
	Logger       *slog.Logger
	// Registerer receives the edgeplat_broker_auth_* counters; nil keeps
	// them unregistered.
	Registerer prometheus.Registerer
	// OnDeny, when set, is called for every refusal except a negative
	// superuser check (brokers ask that before every ACL check; it is an
	// answer, not a refusal). It runs on the checking goroutine, in the
	// broker's connect or publish path: it must return quickly, handing
	// the event to a bounded queue if it does I/O.
	OnDeny func(ctx context.Context, ev DenyEvent)
}

// OptionsFromConfig returns the options the configuration decides: the
// cache TTL and the Cloud API's own broker login as the one service user.
// The caller adds the store, logger, registerer and deny hook.
func OptionsFromConfig(m config.MQTT) Options {
	o := Options{CacheTTL: time.Duration(m.AuthCacheTTLSeconds) * time.Second}
	if m.Username != "" {
		o.ServiceUsers = map[string]config.Secret{m.Username: m.Password}
	}
	return o
}

// Defaults of Options.
const (
	DefaultMaxCacheEntries = 10000
	DefaultStoreTimeout    = 5 * time.Second
)

// Authorizer answers the broker's questions. It is safe for concurrent use.
type Authorizer struct {
	store   Store
	service map[string][sha256.Size]byte
	ttl     time.Duration
	timeout time.Duration
	log     *slog.Logger
	onDeny  func(context.Context, DenyEvent)
	metrics *metrics
	macKey  []byte
	now     func() time.Time // replaced by tests

	mu      sync.Mutex
	results *resultCache
	ids     *identityTable
	flights map[string]map[*flight]struct{}
}

// flight is one store call in progress; Invalidate marks those for its
// username so their answers are neither used nor cached.
type flight struct{ revoked bool }

// New validates opts and builds an Authorizer.
func New(opts Options) (*Authorizer, error) {
	if opts.Store == nil {
		return nil, errors.New("brokerauth: a Store is required")
	}
	if opts.CacheTTL < 0 {
		return nil, fmt.Errorf("brokerauth: cache TTL must not be negative, got %s", opts.CacheTTL)
	}
	if opts.MaxCacheEntries < 0 {
		return nil, fmt.Errorf("brokerauth: max cache entries must not be negative, got %d", opts.MaxCacheEntries)
	}
	if opts.MaxCacheEntries == 0 {
		opts.MaxCacheEntries = DefaultMaxCacheEntries
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = DefaultStoreTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	service := make(map[string][sha256.Size]byte, len(opts.ServiceUsers))
	for name, secret := range opts.ServiceUsers {
		if err := ValidateIdentifier(name); err != nil {
			return nil, fmt.Errorf("brokerauth: service user %q: %w", name, err)
		}
		if !secret.IsSet() {
			// An empty password would let anyone who knows the name in
			// with every right.
			return nil, fmt.Errorf("brokerauth: service user %q has no password", name)
		}
		service[name] = sha256.Sum256([]byte(secret.Reveal()))
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("brokerauth: cache key: %w", err)
	}
	return &Authorizer{
		store:   opts.Store,
		service: service,
		ttl:     opts.CacheTTL,
		timeout: opts.StoreTimeout,
		log:     opts.Logger,
		onDeny:  opts.OnDeny,
		metrics: m,
		macKey:  key,
		now:     time.Now,
		results: newResultCache(opts.MaxCacheEntries),
		ids:     newIdentityTable(opts.MaxCacheEntries),
		flights: make(map[string]map[*flight]struct{}),
	}, nil
}

// Authenticate decides a CONNECT. It returns the client's identity, or an
// error when the client must be refused: one wrapping ErrDenied for refused
// credentials, another when the decision could not be made (the store
// failed or timed out). Store failures are logged here; callers need not.
func (a *Authorizer) Authenticate(ctx context.Context, username, password, clientID string) (Identity, error) {
	id, reason, err := a.authenticate(ctx, username, password, clientID)
	if reason != "" {
		a.deny(ctx, CheckConnect, reason, username, clientID, id, "")
		if err != nil {
			return Identity{}, fmt.Errorf("authenticate client %q: %w", clip(clientID, 64), err)
		}
		return Identity{}, fmt.Errorf("%w: %s", ErrDenied, reason)
	}
	a.allow(CheckConnect, id)
	return id, nil
}

func (a *Authorizer) authenticate(ctx context.Context, username, password, clientID string) (Identity, string, error) {
	if username == "" {
		return Identity{}, ReasonAnonymous, nil
	}
	if ValidateIdentifier(username) != nil || ValidateIdentifier(clientID) != nil {
		return Identity{}, ReasonBadIdentifier, nil
	}
	if want, ok := a.service[username]; ok {
		got := sha256.Sum256([]byte(password))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return Identity{}, ReasonBadCredentials, nil
		}
		return Identity{Username: username, Superuser: true}, "", nil
	}
	// A device's client id is agent-{uuid}; a broker user's starts with its
	// username. Anything else is refused before the store is asked.
	agent, isAgent := agentFromClientID(clientID)
	if !isAgent && !brokerUserClientID(username, clientID) {
		return Identity{}, ReasonBadClientID, nil
	}
	if password == "" {
		return Identity{}, ReasonBadCredentials, nil
	}
	id, reason, err := a.device(ctx, username, password)
	if reason != "" {
		return id, reason, err
	}
	if id.IsBrokerUser() {
		if !brokerUserClientID(username, clientID) {
			return id, ReasonBadClientID, nil
		}
		return id, "", nil
	}
	if !isAgent || id.AgentUUID != agent {
		// Right key, someone else's client id: refused, so one device
		// cannot take over another's session.
		return id, ReasonBadClientID, nil
	}
	return id, "", nil
}

// device returns the store's answer for a device's credentials, from the
// cache when it holds one.
func (a *Authorizer) device(ctx context.Context, username, password string) (Identity, string, error) {
	mac := a.mac(password)
	a.mu.Lock()
	if a.ttl > 0 {
		if r, ok := a.results.get(username, mac, a.now()); ok {
			if r.ok {
				a.ids.put(r.id)
			}
			a.mu.Unlock()
			a.metrics.cacheHit.Inc()
			if !r.ok {
				return Identity{}, ReasonBadCredentials, nil
			}
			return r.id, "", nil
		}
	}
	f := &flight{}
	if a.flights[username] == nil {
		a.flights[username] = make(map[*flight]struct{})
	}
	a.flights[username][f] = struct{}{}
	a.mu.Unlock()
	a.metrics.cacheMiss.Inc()

	sctx, cancel := context.WithTimeout(ctx, a.timeout)
	id, err := a.store.AuthenticateDevice(sctx, username, password)
	cancel()

	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.flights[username], f)
	if len(a.flights[username]) == 0 {
		delete(a.flights, username)
	}
	if f.revoked {
		return Identity{}, ReasonRevoked, nil
	}
	switch {
	case errors.Is(err, ErrDenied):
		// The identity stays: a wrong password refuses this connect, not
		// the session the device already has, or anyone who learnt a key
		// could cut its device off by failing to log in with it.
		a.cache(username, cachedResult{mac: mac})
		return Identity{}, ReasonBadCredentials, nil
	case err != nil:
		a.log.Warn("broker auth store failed; refusing the client", "user", Fingerprint(username), "err", err)
		return Identity{}, ReasonStoreError, fmt.Errorf("device store: %w", err)
	}
	if id.IsBrokerUser() {
		uid, err := brokerUserIdentity(username, id)
		if err != nil {
			a.log.Warn("broker auth store returned an invalid broker user; refusing the client", "user", Fingerprint(username), "err", err)
			return Identity{}, ReasonStoreError, err
		}
		uid = a.internUser(uid)
		a.ids.put(uid)
		a.cache(username, cachedResult{mac: mac, id: uid, ok: true})
		return uid, "", nil
	}
	tenant, okT := canonicalUUID(id.TenantUUID)
	agent, okA := canonicalUUID(id.AgentUUID)
	if !okT || !okA {
		a.log.Warn("broker auth store returned an identity without valid tenant and agent UUIDs; refusing the client", "user", Fingerprint(username))
		return Identity{}, ReasonStoreError, errors.New("device store returned an identity without valid tenant and agent UUIDs")
	}
	// Only the fields the store is trusted with: a device is never a
	// superuser, whatever the store says.
	id = Identity{Username: username, TenantUUID: tenant, AgentUUID: agent}
	a.ids.put(id)
	a.cache(username, cachedResult{mac: mac, id: id, ok: true})
	return id, "", nil
}

// cache stores r under the caller's lock.
func (a *Authorizer) cache(username string, r cachedResult) {
	if a.ttl <= 0 {
		return
	}
	r.expires = a.now().Add(a.ttl)
	a.results.put(username, r)
}

func (a *Authorizer) mac(password string) [32]byte {
	h := hmac.New(sha256.New, a.macKey)
	h.Write([]byte(password))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Invalidate forgets everything cached for username and makes the store
// calls for it already under way count as refusals, so from the moment it
// returns no new connection can use the key on a cached answer. The account
// store calls it when it revokes a key or changes its password. Sessions
// that are already open lose their rights too: Authorize checks that a
// session's identity is still in the table this clears.
func (a *Authorizer) Invalidate(username string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.results.remove(username)
	a.ids.remove(username)
	for f := range a.flights[username] {
		f.revoked = true
	}
}

// InvalidatePrefix is Invalidate for every username that starts with
// prefix. The account store keeps only hashes of keys, so when it revokes
// one it knows the key's id (its prefix), not the username itself.
func (a *Authorizer) InvalidatePrefix(prefix string) {
	if prefix == "" {
		panic("BUG: brokerauth.InvalidatePrefix with an empty prefix")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var names []string
	for name := range a.results.byKey {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	for name := range a.ids.byName {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	for name := range a.flights {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		a.results.remove(name)
		a.ids.remove(name)
		for f := range a.flights[name] {
			f.revoked = true
		}
	}
}

// Superuser reports whether username is a service user. Brokers ask before
// ACL checks and skip them for superusers; the answer depends on the name
// alone because the connect check has already verified the password.
func (a *Authorizer) Superuser(ctx context.Context, username string) bool {
	_, ok := a.service[username]
	a.metrics.superuser(ok)
	return ok
}

// CheckACL decides an ACL callback that carries only a username and a
// client id, as mosquitto-go-auth's and EMQX's do. The identity comes from
// an earlier successful Authenticate in this process: brokers make the user
// check before any ACL check of a connection, so a username this process
// has not authenticated (or has invalidated) is refused. The client id must
// be the one that identity connected with. acc may combine AccessRead,
// AccessWrite and AccessSubscribe; all must be allowed.
func (a *Authorizer) CheckACL(ctx context.Context, username, clientID, topic string, acc Access) bool {
	check := checkFor(acc)
	if acc <= 0 || acc&^accessAll != 0 {
		a.deny(ctx, check, ReasonMalformed, username, clientID, Identity{}, topic)
		return false
	}
	if ValidateIdentifier(username) != nil || ValidateIdentifier(clientID) != nil {
		a.deny(ctx, check, ReasonBadIdentifier, username, clientID, Identity{}, topic)
		return false
	}
	if _, ok := a.service[username]; ok {
		return a.Authorize(ctx, Identity{Username: username, Superuser: true}, topic, acc)
	}
	a.mu.Lock()
	id, ok := a.ids.get(username)
	a.mu.Unlock()
	if !ok {
		a.deny(ctx, check, ReasonUnknownSession, username, clientID, Identity{}, topic)
		return false
	}
	if id.IsBrokerUser() {
		if !brokerUserClientID(username, clientID) {
			a.deny(ctx, check, ReasonBadClientID, username, clientID, id, topic)
			return false
		}
		return a.Authorize(ctx, id, topic, acc)
	}
	if AgentClientID(id.AgentUUID) != clientID {
		a.deny(ctx, check, ReasonBadClientID, username, clientID, id, topic)
		return false
	}
	return a.Authorize(ctx, id, topic, acc)
}

// Authorize decides an ACL check for a known identity, counting and
// reporting the answer: AccessWrite by the publish rule, AccessRead and
// AccessSubscribe by the subscribe rule (a topic name being a filter
// without wildcards). A broker user's identity must also still be the
// current one for its username: once its account is deleted, its password
// reset or its rules changed (Invalidate), the sessions that connected
// before are refused everything until they connect again.
func (a *Authorizer) Authorize(ctx context.Context, id Identity, topic string, acc Access) bool {
	check := checkFor(acc)
	if acc <= 0 || acc&^accessAll != 0 {
		a.deny(ctx, check, ReasonMalformed, id.Username, "", id, topic)
		return false
	}
	// A session holds the identity it connected with; a key revoked (or a
	// broker user changed) since then is dropped from the identity table
	// by Invalidate, and its sessions lose every right at once.
	if !id.Superuser {
		if reason := a.userSessionReason(id); reason != "" {
			a.deny(ctx, check, reason, id.Username, "", id, topic)
			return false
		}
	}
	for _, k := range []Access{AccessWrite, AccessSubscribe, AccessRead} {
		if acc&k == 0 {
			continue
		}
		var reason string
		if k == AccessWrite {
			reason = publishReason(id, topic)
		} else {
			reason = subscribeReason(id, topic)
		}
		if reason != "" {
			a.deny(ctx, checkFor(k), reason, id.Username, clientIDOf(id), id, topic)
			return false
		}
	}
	a.allow(check, id)
	return true
}

// DenyMalformed counts and reports a callback the HTTP layer could not read,
// which it refuses without asking the Authorizer anything else.
func (a *Authorizer) DenyMalformed(ctx context.Context, check Check, username, clientID string) {
	a.deny(ctx, check, ReasonMalformed, username, clientID, Identity{}, "")
}

func (a *Authorizer) deny(ctx context.Context, check Check, reason, username, clientID string, id Identity, topic string) {
	a.metrics.deny(check, reason)
	fp := Fingerprint(username)
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.DebugContext(ctx, "broker auth denied", "check", string(check), "reason", reason,
			"user", fp, "client", clip(clientID, 128), "topic", clip(topic, 256))
	}
	if a.onDeny == nil {
		return
	}
	a.onDeny(ctx, DenyEvent{
		Check:           check,
		Reason:          reason,
		UserFingerprint: fp,
		ClientID:        clip(clientID, 256),
		TenantUUID:      id.TenantUUID,
		AgentUUID:       id.AgentUUID,
		Topic:           clip(topic, 512),
	})
}

// Fingerprint returns the name a username goes by in logs and audit
// events: the first 8 bytes of its SHA-256, in hex, or "" for "".
func Fingerprint(username string) string {
	if username == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(username))
	return hex.EncodeToString(sum[:8])
}

func checkFor(acc Access) Check {
	switch {
	case acc&AccessWrite != 0:
		return CheckPublish
	case acc&AccessSubscribe != 0:
		return CheckSubscribe
	case acc&AccessRead != 0:
		return CheckRead
	}
	return CheckPublish
}

func clientIDOf(id Identity) string {
	if id.AgentUUID == "" {
		return ""
	}
	return AgentClientID(id.AgentUUID)
}

// clip shortens s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
