// Package cloud is the agent's client of the Cloud API: registration with
// a provisioning key, the target state (ETag-cached) and the state report
// that completes provisioning. It speaks the API's wire contract only; it
// imports nothing of the API role.
package cloud

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

// requestTimeout bounds one call to the cloud.
const requestTimeout = 15 * time.Second

// maxAnswer bounds what the agent reads of one answer.
const maxAnswer = 4 << 20

// MQTT holds the broker credentials registration hands out.
type MQTT struct {
	BrokerURL   string `json:"brokerUrl"`
	Username    string `json:"username"`
	Password    string `json:"password"`
	ClientID    string `json:"clientId"`
	TopicPrefix string `json:"topicPrefix"`
}

// Credentials are what the agent keeps after registering. They are
// secrets: never logged, never returned by the local API.
type Credentials struct {
	APIEndpoint string `json:"apiEndpoint"`
	AgentUUID   string `json:"agentUuid"`
	TenantID    string `json:"tenantId"`
	APIKey      string `json:"apiKey"`
	MQTT        MQTT   `json:"mqtt"`
}

// Registration is the device's side of POST /provision/agent.
type Registration struct {
	Key       string
	AgentUUID string
	Name      string
	Version   string
}

// Error is an answer of the cloud other than success.
type Error struct {
	Status  int
	Code    string
	Message string
	// raw is the answer's body, for callers that read more of it.
	raw []byte
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("cloud answered %d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("cloud answered %d: %s", e.Status, e.Message)
}

// Client calls one Cloud API.
type Client struct {
	base string // e.g. http://cloud:3002/api/v1
	http *http.Client
}

// NewClient checks the endpoint, the cloud's base URL (its /api/v1 is
// added when missing).
func NewClient(endpoint string) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("must be an http:// or https:// URL, got %q", endpoint)
	}
	if u.User != nil {
		return nil, errors.New("must not carry credentials")
	}
	base := strings.TrimSuffix(u.String(), "/")
	if !strings.HasSuffix(base, "/api/v1") {
		base += "/api/v1"
	}
	return &Client{base: base, http: &http.Client{Timeout: requestTimeout}}, nil
}

// Register trades a provisioning key for the device's credentials.
func (c *Client) Register(ctx context.Context, r Registration) (Credentials, error) {
	body, _ := json.Marshal(map[string]string{"key": r.Key, "agentUuid": r.AgentUUID, "agentName": r.Name, "version": r.Version})
	var out Credentials
	if _, _, err := c.do(ctx, http.MethodPost, "/provision/agent", body, nil, &out); err != nil {
		return Credentials{}, fmt.Errorf("register: %w", err)
	}
	if out.APIKey == "" || out.AgentUUID == "" || out.MQTT.BrokerURL == "" {
		return Credentials{}, errors.New("register: the cloud's answer lacks apiKey, agentUuid or mqtt.brokerUrl")
	}
	return out, nil
}

// TargetState is the cloud's desired state of the agent.
type TargetState struct {
	Version   int64           `json:"version"`
	State     json.RawMessage `json:"state"`
	UpdatedAt string          `json:"updatedAt"`
}

// TargetState fetches the target state; with etag set, an unchanged state
// answers changed=false and no body.
func (c *Client) TargetState(ctx context.Context, cr Credentials, etag string) (ts TargetState, newETag string, changed bool, err error) {
	hdr := map[string]string{"X-Device-API-Key": cr.APIKey}
	if etag != "" {
		hdr["If-None-Match"] = etag
	}
	status, h, err := c.do(ctx, http.MethodGet, "/device/"+url.PathEscape(cr.AgentUUID)+"/state", nil, hdr, &ts)
	if err != nil {
		return ts, "", false, fmt.Errorf("target state: %w", err)
	}
	if status == http.StatusNotModified {
		return ts, etag, false, nil
	}
	return ts, h.Get("ETag"), true, nil
}

// do sends one request and decodes a JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, body []byte, hdr map[string]string, out any) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, resp.Header, fmt.Errorf("read answer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotModified, resp.StatusCode == http.StatusNoContent:
		return resp.StatusCode, resp.Header, nil
	case resp.StatusCode >= 300:
		return resp.StatusCode, resp.Header, errorOf(resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("decode answer: %w", err)
		}
	}
	return resp.StatusCode, resp.Header, nil
}
