package licence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// States of the API under its licence.
const (
	StateValid      = "valid"
	StateRestricted = "restricted"
)

// Reasons the API runs restricted (Status.Reason, Error.Reason).
const (
	ReasonMissing = "licence_missing"
	ReasonExpired = "licence_expired"
	ReasonInvalid = "licence_invalid"
)

// Error codes of a refused operation (Error.Code), as the API answers them.
const (
	CodeRestricted     = "licence_restricted"
	CodeAgentLimit     = "licence_agent_limit"
	CodeFeatureMissing = "licence_feature_missing"
)

// Error is an operation the licence does not allow. Its code and message
// are meant for the client as they are.
type Error struct {
	// Code is CodeRestricted, CodeAgentLimit or CodeFeatureMissing.
	Code string
	// Reason is the restriction's reason (ReasonMissing, ...) when Code is
	// CodeRestricted.
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Message }

// HTTPStatus is the status to answer with: 403, since retrying cannot
// help until the licence changes.
func (e *Error) HTTPStatus() int { return http.StatusForbidden }

// ErrorCode is Code, for the route packages that answer an error they
// meet without knowing its kind (httpx.CodedError).
func (e *Error) ErrorCode() string { return e.Code }

// Status is the licence as the API applies it, shaped for JSON. The
// licence fields describe the licence as issued; when State is restricted
// none of what it grants is in effect.
type Status struct {
	State string `json:"state"`
	// Reason and Message say why the API is restricted.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Detail is the whole cause for the operator's log, which may name
	// files; it is never sent to clients.
	Detail string `json:"-"`

	Customer string `json:"customer,omitempty"`
	// MaxAgents is the agent limit; 0 means unlimited.
	MaxAgents int        `json:"maxAgents"`
	Features  []string   `json:"features"`
	IssuedAt  *time.Time `json:"issuedAt,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	Demo      bool       `json:"demo"`
	LicenceID string     `json:"licenceId,omitempty"`
}

// Valid reports whether the licence is in effect.
func (s Status) Valid() bool { return s.State == StateValid }

// Manager holds the current licence and answers what it allows. It is safe
// for concurrent use.
type Manager struct {
	cfg config.Licence
	log *slog.Logger
	now func() time.Time

	mu  sync.RWMutex
	cur loaded
	// expiryLogged keeps an expiry noticed while running to one warning.
	expiryLogged atomic.Bool
}

// loaded is the outcome of one Load.
type loaded struct {
	// claims are set when the signature verified, even if the licence
	// has expired (or expires later): expiry is judged on every check.
	claims *Claims
	// reason, message and detail explain why there are no claims.
	reason, message, detail string
}

// Option configures New.
type Option func(*Manager)

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(m *Manager) { m.now = now } }

// New returns a Manager for cfg. It reads nothing: Load does, at start-up
// and on every refresh; until then the API is restricted.
func New(cfg config.Licence, log *slog.Logger, opts ...Option) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, log: log, now: time.Now,
		cur: loaded{reason: ReasonMissing, message: "the licence has not been loaded yet"}}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Load reads and verifies the licence and its public key from the
// configuration again (both may be files an operator has replaced) and
// returns the new status. A missing, expired or invalid licence is not an
// error: it makes the API restricted, and the status says why. The caller
// logs the outcome (logOutcome does for a refresh), with Detail.
func (m *Manager) Load(_ context.Context) Status {
	cur := m.read()
	m.mu.Lock()
	m.cur = cur
	// The caller reports this status, an expiry included; Status warns
	// only of an expiry that happens later, while running.
	m.expiryLogged.Store(true)
	m.mu.Unlock()
	st := m.Status()
	m.expiryLogged.Store(st.Reason == ReasonExpired)
	return st
}

// logOutcome logs the status a Load returned.
func (m *Manager) logOutcome(ctx context.Context, st Status) {
	if st.Valid() {
		m.log.InfoContext(ctx, "licence valid", "customer", st.Customer, "max_agents", st.MaxAgents,
			"features", strings.Join(st.Features, ","), "expires", st.ExpiresAt, "demo", st.Demo)
		return
	}
	m.log.WarnContext(ctx, "licence not in effect, running restricted: new agent registrations and premium features are refused",
		"reason", st.Reason, "detail", st.Detail)
}

// read loads the licence. The message of a failure goes to clients, so it
// names the setting at fault but no file path; the detail, for operators'
// logs, has the whole cause.
func (m *Manager) read() loaded {
	fail := func(reason, message string, err error) loaded {
		l := loaded{reason: reason, message: message, detail: message}
		if err != nil {
			l.detail = err.Error()
		}
		return l
	}
	if strings.TrimSpace(m.cfg.Key) == "" {
		return fail(ReasonMissing, "no licence is configured ("+config.Label("licence.key")+")", nil)
	}
	if strings.TrimSpace(m.cfg.PublicKey) == "" {
		return fail(ReasonInvalid, config.Label("licence.public_key")+" is not set, so the licence cannot be verified", nil)
	}
	pub, err := ParsePublicKey(m.cfg.PublicKey)
	if err != nil {
		return fail(ReasonInvalid, config.Label("licence.public_key")+" is not a readable Ed25519 or RSA public key",
			fmt.Errorf("%s: %w", config.Label("licence.public_key"), err))
	}
	raw, err := readLicence(m.cfg.Key)
	if err != nil {
		return fail(ReasonInvalid, config.Label("licence.key")+" is neither a licence nor a readable file",
			fmt.Errorf("%s: %w", config.Label("licence.key"), err))
	}
	c, err := Verify(raw, pub, m.now())
	if err != nil && !errors.Is(err, ErrExpired) {
		return fail(ReasonInvalid, "the licence does not verify: "+strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "), err)
	}
	// An expired licence is kept: Status judges expiry and still says
	// whose licence it was.
	return loaded{claims: &c}
}

// Status returns the licence as it applies now.
func (m *Manager) Status() Status {
	m.mu.RLock()
	cur := m.cur
	m.mu.RUnlock()
	if cur.claims == nil {
		return Status{State: StateRestricted, Reason: cur.reason, Message: cur.message, Detail: cur.detail, Features: []string{}}
	}
	c := cur.claims
	exp := c.ExpiresAt.UTC()
	st := Status{State: StateValid, Customer: c.Customer, MaxAgents: c.MaxAgents,
		Features: append([]string{}, c.Features...), ExpiresAt: &exp, Demo: c.Demo, LicenceID: c.ID}
	if !c.IssuedAt.IsZero() {
		iat := c.IssuedAt.UTC()
		st.IssuedAt = &iat
	}
	if !m.now().Before(c.ExpiresAt) {
		st.State, st.Reason = StateRestricted, ReasonExpired
		st.Message = "the licence expired on " + exp.Format(time.RFC3339)
		st.Detail = st.Message
		if m.expiryLogged.CompareAndSwap(false, true) {
			m.log.Warn("licence expired, running restricted: new agent registrations and premium features are refused",
				"customer", c.Customer, "expired", exp)
		}
	}
	return st
}

// CheckRegistration reports whether one more agent may be registered
// while currentAgents are: an *Error with CodeRestricted when the licence
// is not in effect, CodeAgentLimit when the limit is reached, nil when
// allowed. Agents already registered are never affected.
func (m *Manager) CheckRegistration(currentAgents int) error {
	st := m.Status()
	if !st.Valid() {
		return &Error{Code: CodeRestricted, Reason: st.Reason,
			Message: "new agent registrations are refused while the licence is not in effect: " + st.Message}
	}
	if st.MaxAgents > 0 && currentAgents >= st.MaxAgents {
		return &Error{Code: CodeAgentLimit,
			Message: fmt.Sprintf("the licence allows %d agents and %d are registered; remove one or extend the licence", st.MaxAgents, currentAgents)}
	}
	return nil
}

// featureNames describe features in messages.
var featureNames = map[string]string{
	FeatureCorrelationRules: "multi-metric correlation rules",
	FeatureExport:           "CSV and Parquet export",
	FeatureAI:               "the AI features",
}

// CheckFeature reports whether feature (FeatureExport, ...) may be used:
// an *Error with CodeRestricted when the licence is not in effect,
// CodeFeatureMissing when it does not grant the feature, nil when allowed.
func (m *Manager) CheckFeature(feature string) error {
	what := featureNames[feature]
	if what == "" {
		what = fmt.Sprintf("feature %q", feature)
	}
	st := m.Status()
	if !st.Valid() {
		return &Error{Code: CodeRestricted, Reason: st.Reason,
			Message: what + " needs a licence in effect: " + st.Message}
	}
	if !slices.Contains(st.Features, feature) {
		return &Error{Code: CodeFeatureMissing,
			Message: fmt.Sprintf("the licence does not include %s (%s)", what, feature)}
	}
	return nil
}
