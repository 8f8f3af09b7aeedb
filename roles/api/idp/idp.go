// Package idp verifies access tokens issued by an external OpenID Connect
// identity provider (Auth0, Keycloak, Entra ID, ...), so that
// POST /api/v1/auth/idp-exchange can turn one into a local session when
// IDP_ENABLED is set. It checks the signature against the provider's JWK
// set (never "none" or HMAC), the issuer, the audience and the times, and
// reports who the token names; mapping that identity to a local user is
// the exchange handler's job. See docs/idp.md, sections Which tokens are
// accepted and Where the keys come from.
package idp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/golang-jwt/jwt/v5"
)

// Leeway is the clock skew allowed on exp, nbf and iat.
const Leeway = 60 * time.Second

// maxTokenBytes bounds the token before any parsing. Provider access
// tokens are a few KiB; header limits would stop far larger ones anyway.
const maxTokenBytes = 16 << 10

// ErrInvalid wraps every Verify failure. The exchange answers 401 and keeps
// the detail for its log, so a caller cannot probe which check failed.
var ErrInvalid = errors.New("invalid identity-provider token")

// ErrUnavailable is wrapped, together with ErrInvalid, when the provider's
// keys have never been fetched successfully, so the token could not be
// checked at all. A caller may answer 503 instead of 401 for it.
var ErrUnavailable = errors.New("identity-provider keys unavailable")

// Identity is who a verified token names.
type Identity struct {
	// Subject is the provider's user id (sub), unique within Issuer.
	Subject string
	// Email is the email claim, empty when the token has none.
	Email string
	// EmailVerified is the email_verified claim: the provider checked that
	// the user controls Email. False when the claim is absent.
	EmailVerified bool
	// Name is the name claim, empty when the token has none.
	Name string
	// Issuer is the token's iss as the token wrote it.
	Issuer string
}

// Option changes how New builds a Verifier.
type Option func(*options)

type options struct {
	jwksURL string
	client  *http.Client
	now     func() time.Time
	logger  *slog.Logger
}

// WithJWKSURL sets the JWK set URL, skipping discovery and the domain
// fallback. Like every URL here it must be https unless the host is a
// loopback address.
func WithJWKSURL(u string) Option { return func(o *options) { o.jwksURL = u } }

// WithHTTPClient sets the client used for discovery and the JWK set. The
// default client has a 10 s timeout and follows redirects only to URLs the
// https rule allows; a client given here is used as it is.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.client = c } }

// WithClock sets the time source for token times and the key cache.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithLogger sets the logger for key fetches. Without it nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Verifier checks identity-provider access tokens. It is safe for
// concurrent use.
type Verifier struct {
	issuer string // normalised
	keys   *keyCache
	parser *jwt.Parser
}

// New builds a Verifier from the idp section. It does no I/O: keys are
// fetched when the first token arrives. It does not look at cfg.Enabled;
// the caller builds a Verifier only when the provider is enabled.
func New(cfg config.IDP, opts ...Option) (*Verifier, error) {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.now == nil {
		return nil, errors.New("idp: WithClock given a nil clock")
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.client == nil {
		o.client = defaultClient()
	}
	issuer := normaliseIssuer(cfg.Issuer)
	if issuer == "" {
		return nil, errors.New("idp.issuer (IDP_ISSUER) is required")
	}
	audience := strings.TrimSpace(cfg.Audience)
	if audience == "" {
		return nil, errors.New("idp.audience (IDP_AUDIENCE) is required")
	}

	c := &keyCache{client: o.client, log: o.logger, now: o.now, issuer: issuer}
	if o.jwksURL != "" {
		if err := checkURL(o.jwksURL); err != nil {
			return nil, fmt.Errorf("idp jwks url: %w", err)
		}
		c.jwksURL = o.jwksURL
	} else {
		c.discoveryURL = issuer + "/.well-known/openid-configuration"
		if err := checkURL(c.discoveryURL); err != nil {
			return nil, fmt.Errorf("idp.issuer (IDP_ISSUER) must be the provider's https URL: %w", err)
		}
		if strings.TrimSpace(cfg.Domain) != "" {
			u, err := domainJWKSURL(cfg.Domain)
			if err != nil {
				return nil, fmt.Errorf("idp.domain (IDP_DOMAIN): %w", err)
			}
			c.fallbackURL = u
		}
	}

	return &Verifier{
		issuer: issuer,
		keys:   c,
		parser: jwt.NewParser(
			jwt.WithValidMethods(validMethods),
			jwt.WithAudience(audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(Leeway),
			jwt.WithTimeFunc(o.now),
		),
	}, nil
}

// Verify checks raw, a compact JWS access token without the "Bearer "
// prefix, and returns the identity it names. It may fetch the provider's
// keys, bounded by ctx and a 10 s fetch timeout. Every error wraps
// ErrInvalid.
func (v *Verifier) Verify(ctx context.Context, raw string) (Identity, error) {
	if raw == "" {
		return Identity{}, fmt.Errorf("%w: empty token", ErrInvalid)
	}
	if len(raw) > maxTokenBytes {
		return Identity{}, fmt.Errorf("%w: token of %d bytes, at most %d", ErrInvalid, len(raw), maxTokenBytes)
	}
	var c claims
	_, err := v.parser.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		// Cheap checks first: a token from another issuer, or one this
		// package cannot fully understand, must not cause a key fetch.
		if normaliseIssuer(c.Issuer) != v.issuer {
			return nil, fmt.Errorf("issuer %q, want %q", c.Issuer, v.issuer)
		}
		if _, ok := t.Header["crit"]; ok {
			// RFC 7515 section 4.1.11: extensions listed in crit must be
			// understood, and this package understands none.
			return nil, errors.New("crit header is not supported")
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errors.New("no kid header")
		}
		return v.keys.key(ctx, kid, t.Method.Alg())
	})
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.Subject == "" {
		return Identity{}, fmt.Errorf("%w: no sub claim", ErrInvalid)
	}
	return Identity{
		Subject:       c.Subject,
		Email:         c.Email,
		EmailVerified: bool(c.EmailVerified),
		Name:          c.Name,
		Issuer:        c.Issuer,
	}, nil
}

// claims are the parts of a provider token Verify reads.
type claims struct {
	jwt.RegisteredClaims
	Email         string   `json:"email"`
	EmailVerified flexBool `json:"email_verified"`
	Name          string   `json:"name"`
}

// flexBool reads a JSON boolean, or the strings "true"/"false" that some
// providers (Cognito among them) emit for email_verified.
type flexBool bool

// UnmarshalJSON implements json.Unmarshaler.
func (b *flexBool) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("decode boolean: %w", err)
	}
	switch x := v.(type) {
	case nil:
		*b = false
	case bool:
		*b = flexBool(x)
	case string:
		switch strings.ToLower(x) {
		case "true":
			*b = true
		case "false":
			*b = false
		default:
			return fmt.Errorf("boolean string %q", x)
		}
	default:
		return fmt.Errorf("boolean of JSON type %T", v)
	}
	return nil
}

// normaliseIssuer trims spaces and trailing slashes, so that
// "https://tenant.auth0.com/" and "https://tenant.auth0.com" compare equal.
func normaliseIssuer(iss string) string {
	return strings.TrimRight(strings.TrimSpace(iss), "/")
}

// domainJWKSURL turns IDP_DOMAIN ("tenant.auth0.com", or a URL such as
// "https://tenant.auth0.com/") into the domain's JWK set URL.
func domainJWKSURL(domain string) (string, error) {
	d := strings.TrimSpace(domain)
	if !strings.Contains(d, "://") {
		d = "https://" + d
	}
	u, err := url.Parse(d)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", domain, err)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", fmt.Errorf("%q is not a host name", domain)
	}
	jwksURL := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/jwks.json"}).String()
	if err := checkURL(jwksURL); err != nil {
		return "", err
	}
	return jwksURL, nil
}

var _ json.Unmarshaler = (*flexBool)(nil)
