package cloud

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// UploadLogs posts one batch of the agent's log lines, NDJSON compressed
// with gzip, to POST /device/:uuid/logs with the device key. A refusal is
// an *Error carrying the status, so the caller can tell a batch the cloud
// will never take (4xx) from a cloud that is down.
func (c *Client) UploadLogs(ctx context.Context, cr Credentials, gzipped []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/device/"+url.PathEscape(cr.AgentUUID)+"/logs", bytes.NewReader(gzipped))
	if err != nil {
		return fmt.Errorf("upload logs: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("X-Device-API-Key", cr.APIKey)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("upload logs: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("upload logs: %w", errorOf(resp.StatusCode, raw))
	}
	return nil
}

// errorOf reads the Cloud API's error shape, or keeps the raw answer.
func errorOf(status int, raw []byte) *Error {
	e := &Error{Status: status, Message: strings.TrimSpace(string(raw)), raw: raw}
	var shape struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &shape) == nil && shape.Error.Message != "" {
		e.Code, e.Message = shape.Error.Code, shape.Error.Message
	}
	return e
}
