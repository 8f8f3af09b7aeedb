package extdash

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Errors of the Grafana client.
var (
	// ErrUpstream is Grafana failing or answering what it should not.
	ErrUpstream = errors.New("grafana request failed")
	// ErrNotFound is an alert rule Grafana does not have.
	ErrNotFound = errors.New("not found")
	// ErrNoThreshold is a rule whose condition is not a one-value
	// threshold this package can change.
	ErrNoThreshold = errors.New("no threshold to change")
)

// maxResponse caps what is read of one Grafana answer.
const maxResponse = 8 << 20

// searchLimit is the page size of the dashboard search (Grafana's most).
const searchLimit = 5000

// requestTimeout bounds each call to Grafana.
const requestTimeout = 10 * time.Second

// Client calls Grafana's HTTP API with a service account token.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// NewClient returns a client for the Grafana at rawURL (http or https,
// possibly with a sub-path); hc nil uses a client with a 10 s timeout.
func NewClient(rawURL, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(rawURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("want an http or https URL, got %q", rawURL)
	}
	if hc == nil {
		hc = &http.Client{Timeout: requestTimeout}
	}
	return &Client{base: u, token: token, hc: hc}, nil
}

// Dashboard is one dashboard of the search.
type Dashboard struct {
	UID         string   `json:"uid"`
	Title       string   `json:"title"`
	URL         string   `json:"url"`
	Tags        []string `json:"tags"`
	FolderUID   string   `json:"folderUid,omitempty"`
	FolderTitle string   `json:"folderTitle,omitempty"`
}

// Dashboards lists the dashboards (GET /api/search?type=dash-db), their
// URLs made absolute; truncated reports a full page, past which Grafana
// holds more.
func (c *Client) Dashboards(ctx context.Context) (ds []Dashboard, truncated bool, err error) {
	q := url.Values{"type": {"dash-db"}, "limit": {fmt.Sprint(searchLimit)}}
	body, err := c.do(ctx, http.MethodGet, "/api/search?"+q.Encode(), nil)
	if err != nil {
		return nil, false, err
	}
	ds, err = DecodeDashboards(body)
	if err != nil {
		return nil, false, err
	}
	for i := range ds {
		ds[i].URL = c.absolute(ds[i].URL)
	}
	return ds, len(ds) >= searchLimit, nil
}

// DecodeDashboards reads a search answer.
func DecodeDashboards(body []byte) ([]Dashboard, error) {
	var hits []struct {
		Dashboard
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &hits); err != nil {
		return nil, fmt.Errorf("%w: search answer: %v", ErrUpstream, err)
	}
	out := make([]Dashboard, 0, len(hits))
	for _, h := range hits {
		if h.Type != "" && h.Type != "dash-db" {
			continue
		}
		if h.Tags == nil {
			h.Tags = []string{}
		}
		out = append(out, h.Dashboard)
	}
	return out, nil
}

// absolute makes a Grafana-relative path ("/d/uid/slug") a URL users open.
func (c *Client) absolute(p string) string {
	if p == "" || strings.Contains(p, "://") {
		return p
	}
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + "/" + strings.TrimLeft(p, "/")
	return u.String()
}

// AlertRules lists the Grafana-managed alert rules (GET
// /api/v1/provisioning/alert-rules).
func (c *Client) AlertRules(ctx context.Context) ([]AlertRule, error) {
	body, err := c.do(ctx, http.MethodGet, "/api/v1/provisioning/alert-rules", nil)
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, fmt.Errorf("%w: alert rules answer: %v", ErrUpstream, err)
	}
	out := make([]AlertRule, 0, len(raws))
	for _, raw := range raws {
		r, err := DecodeAlertRule(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, r.AlertRule)
	}
	return out, nil
}

// UpdateThreshold sets the threshold of rule uid to value: it reads the
// rule (GET /api/v1/provisioning/alert-rules/:uid), changes the one
// number, and writes the whole rule back (PUT, with X-Disable-Provenance
// so the rule stays editable in Grafana's UI), every other field as
// Grafana sent it. It returns the rule as Grafana answered the PUT and
// the threshold before.
func (c *Client) UpdateThreshold(ctx context.Context, uid string, value float64) (AlertRule, float64, error) {
	path := "/api/v1/provisioning/alert-rules/" + url.PathEscape(uid)
	body, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return AlertRule{}, 0, err
	}
	r, err := DecodeAlertRule(body)
	if err != nil {
		return AlertRule{}, 0, err
	}
	if r.Threshold == nil {
		return AlertRule{}, 0, fmt.Errorf("%w: alert rule %s: its condition %s is not a threshold of one value", ErrNoThreshold, uid, r.Condition)
	}
	old := r.Threshold.Value
	updated, err := r.withThreshold(value)
	if err != nil {
		return AlertRule{}, 0, err
	}
	body, err = c.do(ctx, http.MethodPut, path, updated)
	if err != nil {
		return AlertRule{}, 0, err
	}
	after, err := DecodeAlertRule(body)
	if err != nil {
		return AlertRule{}, 0, err
	}
	return after.AlertRule, old, nil
}

// do sends one request and returns the answer's body when it is 2xx.
func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	ref, err := url.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("BUG: grafana path %q: %w", path, err)
	}
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + ref.Path
	u.RawPath = ""
	if ref.RawPath != "" {
		u.RawPath = strings.TrimRight(c.base.EscapedPath(), "/") + ref.RawPath
	}
	u.RawQuery = ref.RawQuery
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Disable-Provenance", "true")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s %s: %v", ErrUpstream, method, ref.Path, redact(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: read answer: %v", ErrUpstream, method, ref.Path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && method == http.MethodGet && strings.HasPrefix(ref.Path, "/api/v1/provisioning/alert-rules/"):
		return nil, fmt.Errorf("%w: alert rule %s", ErrNotFound, strings.TrimPrefix(ref.Path, "/api/v1/provisioning/alert-rules/"))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("%w: %s %s answered %d%s", ErrUpstream, method, ref.Path, resp.StatusCode, grafanaMessage(data))
	case len(data) > maxResponse:
		return nil, fmt.Errorf("%w: %s %s: answer over %d bytes", ErrUpstream, method, ref.Path, maxResponse)
	}
	return data, nil
}

// grafanaMessage is Grafana's error message ({"message": ...}), short,
// for the log and the 502's message: it names what Grafana refused.
func grafanaMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil || e.Message == "" {
		return ""
	}
	m := e.Message
	if len(m) > 200 {
		m = m[:200] + "..."
	}
	return ": " + m
}

// redact drops the URL from a transport error: it is ours to log, but
// the answer needs only what failed.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
