package idp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Key cache timing and fetch bounds.
const (
	// minRefreshInterval bounds how often tokens can make us fetch. A flood
	// of tokens with made-up kids must not turn this API into a tool
	// against the identity provider (or get it rate limited there).
	minRefreshInterval = 30 * time.Second
	// defaultMaxAge applies when the JWKS response does not say how long
	// it may be cached.
	defaultMaxAge = time.Hour
	// minMaxAge and maxMaxAge clamp the provider's Cache-Control: too short
	// fetches on nearly every request, too long misses a revoked key.
	minMaxAge = 5 * time.Minute
	maxMaxAge = 24 * time.Hour
	// maxBodyBytes caps discovery and JWKS bodies. Real sets are a few KiB.
	maxBodyBytes = 1 << 20
	// fetchTimeout bounds one refresh (discovery plus JWKS). Requests
	// waiting for it are bounded by this too.
	fetchTimeout = 10 * time.Second
	// maxRedirects is what the default client follows.
	maxRedirects = 5
)

// keyCache holds the provider's keys. It fetches lazily, serves from memory
// until the keys expire, refetches on an unknown kid at most once per
// minRefreshInterval, lets concurrent callers share one fetch, and keeps
// the last good keys when a refresh fails.
type keyCache struct {
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
	issuer string // normalised, for the discovery document check

	// discoveryURL and fallbackURL are used until a JWKS URL is known.
	discoveryURL string
	fallbackURL  string

	mu sync.Mutex
	// jwksURL is set by WithJWKSURL or by the first successful discovery.
	jwksURL  string
	keys     keySet
	fetched  bool // keys holds a successfully fetched set
	expires  time.Time
	lastTry  time.Time
	tried    bool
	lastErr  error
	inflight *fetchCall
}

// fetchCall is one refresh in progress; done is closed when it ends.
type fetchCall struct {
	done chan struct{}
}

// key returns the verification key for kid and alg, fetching or refreshing
// the set when needed.
func (c *keyCache) key(ctx context.Context, kid, alg string) (any, error) {
	c.mu.Lock()
	k, known := c.keys.find(kid, alg)
	if c.fetched && c.now().Before(c.expires) && known {
		c.mu.Unlock()
		return keyOrMismatch(k, kid, alg)
	}
	// The set is missing, expired, or does not know kid (a rotation, or a
	// made-up kid): refresh if the throttle allows, and otherwise answer
	// from whatever keys there are.
	call := c.refreshLocked(ctx)
	c.mu.Unlock()
	if call != nil {
		select {
		case <-call.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for idp keys: %w", ctx.Err())
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fetched {
		if c.lastErr == nil {
			return nil, fmt.Errorf("%w: keys not fetched yet", ErrUnavailable)
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, c.lastErr)
	}
	k, known = c.keys.find(kid, alg)
	if !known {
		return nil, fmt.Errorf("no key with kid %q", kid)
	}
	return keyOrMismatch(k, kid, alg)
}

func keyOrMismatch(k *publicKey, kid, alg string) (any, error) {
	if k == nil {
		return nil, fmt.Errorf("key %q does not verify %s", kid, alg)
	}
	return k.key, nil
}

// refreshLocked joins the refresh in progress or starts one, unless the
// last attempt was under minRefreshInterval ago; then it returns nil. The
// attempt time is taken at the start, so a refresh that is slow or fails
// throttles the next one just the same. c.mu must be held.
func (c *keyCache) refreshLocked(ctx context.Context) *fetchCall {
	if c.inflight != nil {
		return c.inflight
	}
	now := c.now()
	if c.tried && now.Sub(c.lastTry) < minRefreshInterval {
		return nil
	}
	c.tried, c.lastTry = true, now
	call := &fetchCall{done: make(chan struct{})}
	c.inflight = call
	jwksURL := c.jwksURL
	// The fetch runs on its own goroutine with its own deadline so that one
	// caller giving up does not fail the others sharing it; it keeps the
	// caller's values (trace ids) but not its cancellation.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	go func() {
		defer cancel()
		c.finish(call, c.fetch(fctx, jwksURL))
	}()
	return call
}

// fetchResult is what one refresh produced.
type fetchResult struct {
	jwksURL string
	keys    keySet
	maxAge  time.Duration
	err     error
}

// finish stores a refresh's outcome and wakes its waiters.
func (c *keyCache) finish(call *fetchCall, r fetchResult) {
	c.mu.Lock()
	if r.jwksURL != "" {
		c.jwksURL = r.jwksURL
	}
	if r.err == nil {
		c.keys, c.fetched, c.expires, c.lastErr = r.keys, true, c.now().Add(r.maxAge), nil
	} else {
		// The previous keys stay: an identity provider outage must not log
		// every user out while the keys they were issued with are known.
		c.lastErr = r.err
	}
	c.inflight = nil
	fetched := c.fetched
	c.mu.Unlock()
	if r.err != nil {
		c.log.Warn("idp keys refresh failed", "err", r.err, "serving_cached", fetched)
	}
	close(call.done)
}

// fetch resolves the JWKS URL when it is not known yet and downloads the
// set.
func (c *keyCache) fetch(ctx context.Context, jwksURL string) fetchResult {
	if jwksURL == "" {
		u, err := c.discover(ctx)
		if err != nil {
			return fetchResult{err: err}
		}
		jwksURL = u
	}
	body, header, err := c.get(ctx, jwksURL)
	if err != nil {
		return fetchResult{jwksURL: jwksURL, err: fmt.Errorf("fetch jwks %s: %w", jwksURL, err)}
	}
	set, skipped, err := parseKeySet(body)
	if err != nil {
		return fetchResult{jwksURL: jwksURL, err: fmt.Errorf("fetch jwks %s: %w", jwksURL, err)}
	}
	if len(skipped) > 0 {
		c.log.Warn("idp jwks keys skipped", "url", jwksURL, "count", len(skipped), "err", errors.Join(skipped...))
	}
	maxAge := cacheMaxAge(header.Get("Cache-Control"))
	c.log.Info("idp keys fetched", "url", jwksURL, "kids", len(set), "max_age", maxAge)
	return fetchResult{jwksURL: jwksURL, keys: set, maxAge: maxAge}
}

// discover reads jwks_uri from the issuer's OpenID discovery document. An
// issuer without one (404/410) falls back to the domain's
// /.well-known/jwks.json, where Auth0-style providers publish their keys.
// Other failures are returned, so a brief outage is retried later instead
// of settling on the fallback.
func (c *keyCache) discover(ctx context.Context) (string, error) {
	body, _, err := c.get(ctx, c.discoveryURL)
	var se statusError
	if errors.As(err, &se) && (se.code == http.StatusNotFound || se.code == http.StatusGone) && c.fallbackURL != "" {
		c.log.Info("idp has no discovery document, using the domain's jwks", "discovery_url", c.discoveryURL, "jwks_url", c.fallbackURL)
		return c.fallbackURL, nil
	}
	if err != nil {
		return "", fmt.Errorf("discover %s: %w", c.discoveryURL, err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("discover %s: decode: %w", c.discoveryURL, err)
	}
	// OpenID Connect Discovery section 4.3: the document must name the issuer it
	// was fetched for, or its keys belong to someone else.
	if normaliseIssuer(doc.Issuer) != c.issuer {
		return "", fmt.Errorf("discover %s: document is for issuer %q, not %q", c.discoveryURL, doc.Issuer, c.issuer)
	}
	if doc.JWKSURI == "" {
		return "", fmt.Errorf("discover %s: no jwks_uri", c.discoveryURL)
	}
	if err := checkURL(doc.JWKSURI); err != nil {
		return "", fmt.Errorf("discover %s: jwks_uri: %w", c.discoveryURL, err)
	}
	return doc.JWKSURI, nil
}

// statusError is a non-200 answer.
type statusError struct{ code int }

func (e statusError) Error() string { return "status " + strconv.Itoa(e.code) }

// get fetches u and returns at most maxBodyBytes of its body.
func (c *keyCache) get(ctx context.Context, u string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, err // *url.Error names the method and URL already
	}
	defer func() {
		// Drain a little so the connection can be reused, then close.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, statusError{resp.StatusCode}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read body: %w", err)
	}
	if len(body) > maxBodyBytes {
		return nil, nil, fmt.Errorf("body larger than %d bytes", maxBodyBytes)
	}
	return body, resp.Header, nil
}

// cacheMaxAge reads max-age from a Cache-Control header and clamps it to
// [minMaxAge, maxMaxAge]. no-cache and no-store without max-age give the
// minimum: the provider asks for freshness, but refetching on every
// request is not an option.
func cacheMaxAge(header string) time.Duration {
	age, found, noCache := int64(0), false, false
	for part := range strings.SplitSeq(header, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "max-age":
			n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(value), `"`), 10, 64)
			if err == nil && n >= 0 && !found {
				age, found = n, true
			}
		case "no-cache", "no-store":
			noCache = true
		}
	}
	switch {
	case found:
		// Clamp in seconds first: a huge max-age would overflow Duration.
		return time.Duration(min(max(age, int64(minMaxAge/time.Second)), int64(maxMaxAge/time.Second))) * time.Second
	case noCache:
		return minMaxAge
	default:
		return defaultMaxAge
	}
}

// checkURL accepts https URLs, and http only on loopback hosts (a local
// provider in development, httptest servers in tests): keys fetched in
// clear text could be swapped on the way.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse url: %w", err)
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute URL without credentials or fragment", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%q: http is allowed for loopback hosts only, use https", raw)
	default:
		return fmt.Errorf("%q: scheme must be https", raw)
	}
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// defaultClient is the client used unless WithHTTPClient gives one. Its
// redirects must pass checkURL too, so an https endpoint cannot bounce the
// fetch to plain http.
func defaultClient() *http.Client {
	return &http.Client{
		Timeout: fetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return checkURL(req.URL.String())
		},
	}
}
