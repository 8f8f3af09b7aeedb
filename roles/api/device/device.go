// Package device serves the routes agents call with their device API key
// (X-Device-API-Key): polling the target state (GET /device/:uuid/state,
// ETag-cached) and uploading log batches (POST /device/:uuid/logs,
// compressed NDJSON, into the agent-logs stream the ingestion service
// writes to the agent_logs table).
package device

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// HeaderAPIKey carries the device API key.
const HeaderAPIKey = "X-Device-API-Key"

// Limits of a log upload: the body as sent, the NDJSON once inflated, and
// its lines. A batch over them is refused whole, never cut.
const (
	MaxUploadBytes   = 1 << 20
	MaxInflatedBytes = 16 << 20
	MaxLines         = 20000
	// batchBytes keeps each stream entry well under telemetry.MaxLogBatchBytes.
	batchBytes = 512 << 10
)

// Deps is what the handlers need from the role.
type Deps struct {
	Agents *registry.Store
	// Streams is the stream store the logs are appended to.
	Streams    streamstore.Store
	WriteError httpx.ErrorWriter
	// Limit is the device rate limit, keyed by the device's key id; nil
	// limits nothing.
	Limit httpx.RateLimiter
	// Failures counts refused keys per client address (ClientKey): once
	// over, the address gets 429 before its next key is looked up. nil
	// counts nothing.
	Failures  httpx.RateLimiter
	ClientKey func(*gin.Context) string
	Log       *slog.Logger
}

type handler struct {
	Deps
	// uploads bounds the log uploads decoded at once: each may hold tens
	// of MiB while it is inflated, checked and batched.
	uploads chan struct{}
}

// maxUploads is how many log uploads are processed at once.
const maxUploads = 4

const deviceKey = "edgeplat.device"

// Register adds the device routes to g, which must not require a user
// credential: these routes check the device key themselves.
func Register(g gin.IRoutes, d Deps) {
	h := &handler{Deps: d, uploads: make(chan struct{}, maxUploads)}
	g.GET("/device/:uuid/state", h.authenticate, h.state)
	g.POST("/device/:uuid/logs", h.authenticate, h.logs)
}

// Authenticator is the device-key check of the device routes, for other
// packages' agent routes (roles/api/jobs): it answers 401, 403 or 429
// itself, or lets the request on with the device for From. The path must
// have the agent's :uuid.
func Authenticator(d Deps) gin.HandlerFunc {
	h := &handler{Deps: d}
	return h.authenticate
}

// From returns the device Authenticator let through; the zero Device on a
// request it did not.
func From(c *gin.Context) registry.Device { return device(c) }

// authenticate checks the device key and that it belongs to the agent the
// path names; the device rate limit is counted per key.
func (h *handler) authenticate(c *gin.Context) {
	addr := ""
	if h.ClientKey != nil {
		addr = h.ClientKey(c)
	}
	ctx := c.Request.Context()
	if h.Failures != nil {
		if d := h.Failures.Peek(ctx, addr); !d.Allowed {
			h.tooMany(c, d.RetryAfter, "too many refused keys from this address")
			return
		}
	}
	refused := func() {
		if h.Failures != nil {
			h.Failures.Take(ctx, addr)
		}
	}
	key := strings.TrimSpace(c.GetHeader(HeaderAPIKey))
	if key == "" {
		refused()
		h.WriteError(c, http.StatusUnauthorized, "unauthorized", "missing "+HeaderAPIKey+" header")
		return
	}
	dev, err := h.Agents.DeviceByKey(c.Request.Context(), key)
	if errors.Is(err, registry.ErrDeviceDenied) {
		refused()
		h.WriteError(c, http.StatusUnauthorized, "unauthorized", "invalid or revoked device API key")
		return
	}
	if err != nil {
		h.Log.Error("device key check failed", "err", err)
		h.WriteError(c, http.StatusServiceUnavailable, "unavailable", "credentials cannot be checked now; retry")
		return
	}
	if u, err := codec.ParseUUID(c.Param("uuid")); err != nil || u.String() != dev.AgentUUID {
		h.WriteError(c, http.StatusForbidden, "forbidden", "this device key belongs to another agent")
		return
	}
	if h.Limit != nil {
		if d := h.Limit.Take(ctx, "device:"+dev.Kid); !d.Allowed {
			h.tooMany(c, d.RetryAfter, "too many requests for this device")
			return
		}
	}
	c.Set(deviceKey, dev)
	c.Next()
}

func (h *handler) tooMany(c *gin.Context, wait time.Duration, why string) {
	secs := strconv.Itoa(httpx.RetryAfterSeconds(wait))
	c.Header("Retry-After", secs)
	h.WriteError(c, http.StatusTooManyRequests, "rate_limited", why+"; retry in "+secs+" s")
}

func device(c *gin.Context) registry.Device {
	v, _ := c.Get(deviceKey)
	d, _ := v.(registry.Device)
	return d
}

// state answers the agent's target state with its version as a strong
// ETag; If-None-Match with the current one answers 304.
func (h *handler) state(c *gin.Context) {
	dev := device(c)
	ts, tag, err := h.Agents.ResolvedTargetState(c.Request.Context(), dev.TenantUUID, dev.AgentUUID)
	if err != nil {
		h.Log.Error("read target state", "agent", dev.AgentUUID, "err", err)
		h.WriteError(c, http.StatusServiceUnavailable, "unavailable", "the target state cannot be read now; retry")
		return
	}
	// The secret values it carries are part of the ETag: a changed
	// secret must reach the agent though the version did not move.
	etag := `"` + strconv.FormatInt(ts.Version, 10) + `"`
	if tag != "" {
		etag = `"` + strconv.FormatInt(ts.Version, 10) + "-" + tag + `"`
	}
	c.Header("ETag", etag)
	c.Header("Cache-Control", "no-cache")
	if match := c.GetHeader("If-None-Match"); match != "" && etagMatches(match, etag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.JSON(http.StatusOK, gin.H{"agentUuid": ts.AgentUUID, "version": ts.Version, "state": ts.State, "updatedAt": ts.UpdatedAt})
}

// etagMatches implements If-None-Match's weak comparison over a list.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// logs takes a batch of NDJSON log lines, compressed with gzip, zlib or
// deflate (Content-Encoding, or detected from the bytes), checks every
// line, and appends them to the tenant's agent-logs stream in entries of
// at most 512 KiB. A bad line refuses the whole upload, naming the line.
func (h *handler) logs(c *gin.Context) {
	select {
	case h.uploads <- struct{}{}:
		defer func() { <-h.uploads }()
	default:
		c.Header("Retry-After", "1")
		h.WriteError(c, http.StatusServiceUnavailable, "unavailable", "too many log uploads at once; retry")
		return
	}
	dev := device(c)
	// Compressed NDJSON, not JSON: read as is, with the body timeout's
	// 408 for an upload that trickles in.
	body, ok := httpx.ReadBodyAllowEmpty(c, MaxUploadBytes, h.WriteError)
	if !ok {
		return
	}
	plain, err := inflate(body, c.GetHeader("Content-Encoding"))
	if errors.Is(err, errTooLarge) {
		h.WriteError(c, http.StatusRequestEntityTooLarge, "body_too_large", err.Error())
		return
	}
	if err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", err.Error())
		return
	}
	entries, lines, err := parseLines(plain)
	if errors.Is(err, errTooLarge) {
		h.WriteError(c, http.StatusRequestEntityTooLarge, "body_too_large", err.Error())
		return
	}
	if err != nil {
		h.WriteError(c, http.StatusUnprocessableEntity, "validation_failed", err.Error())
		return
	}
	values, err := batches(dev.AgentUUID, entries)
	if err != nil {
		h.WriteError(c, http.StatusUnprocessableEntity, "validation_failed", err.Error())
		return
	}
	tu, _ := codec.ParseUUID(dev.TenantUUID)
	req := streamstore.ProduceRequest{Stream: telemetry.LogsStream(codec.EncodeID(tu))}
	for _, v := range values {
		req.Entries = append(req.Entries, map[string]string{telemetry.StreamField: string(v)})
	}
	if _, err := h.Streams.Produce(c.Request.Context(), req); err != nil {
		if !errors.Is(err, context.Canceled) {
			h.Log.Error("append agent logs", "agent", dev.AgentUUID, "err", err)
		}
		h.WriteError(c, http.StatusServiceUnavailable, "unavailable", "the logs cannot be stored now; retry")
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"accepted": lines})
}

var errTooLarge = errors.New("too large")

// inflate undoes the upload's compression. Without a Content-Encoding the
// bytes say: a gzip or zlib header, else plain NDJSON.
func inflate(body []byte, encoding string) ([]byte, error) {
	enc := strings.ToLower(strings.TrimSpace(encoding))
	var r io.Reader
	var err error
	switch {
	case enc == "gzip" || enc == "x-gzip" || (enc == "" && len(body) > 2 && body[0] == 0x1f && body[1] == 0x8b):
		r, err = gzip.NewReader(bytes.NewReader(body))
	case enc == "deflate" && isZlib(body), enc == "" && isZlib(body):
		r, err = zlib.NewReader(bytes.NewReader(body))
	case enc == "deflate":
		r = flate.NewReader(bytes.NewReader(body))
	case enc == "" || enc == "identity":
		if len(body) > MaxInflatedBytes {
			return nil, fmt.Errorf("%w: log upload over %d bytes", errTooLarge, MaxInflatedBytes)
		}
		return body, nil
	default:
		return nil, fmt.Errorf("Content-Encoding %q is not gzip, deflate or identity", encoding)
	}
	if err != nil {
		return nil, fmt.Errorf("decompress the upload: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(r, MaxInflatedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("decompress the upload: %v", err)
	}
	if len(out) > MaxInflatedBytes {
		return nil, fmt.Errorf("%w: the upload inflates past %d bytes", errTooLarge, MaxInflatedBytes)
	}
	return out, nil
}

func isZlib(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

// parseLines decodes one log entry per non-blank line.
func parseLines(plain []byte) ([]json.RawMessage, int, error) {
	var out []json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(plain))
	sc.Buffer(make([]byte, 0, 64<<10), telemetry.MaxLogBatchBytes/2)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if len(out) == MaxLines {
			return nil, 0, fmt.Errorf("%w: more than %d log lines in one upload", errTooLarge, MaxLines)
		}
		var e telemetry.LogEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, 0, fmt.Errorf("line %d: not a JSON log entry: %v", n, err)
		}
		out = append(out, json.RawMessage(bytes.Clone(line)))
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("line %d: %v", n+1, err)
	}
	if len(out) == 0 {
		return nil, 0, errors.New("the upload holds no log lines")
	}
	return out, len(out), nil
}

// batches groups the lines into stream entry values (telemetry.LogBatch
// JSON) of at most batchBytes, each checked by the parser the ingestion
// service uses, so nothing the service would refuse is appended.
func batches(agent string, lines []json.RawMessage) ([][]byte, error) {
	var out [][]byte
	start := 0
	for start < len(lines) {
		size, end := 64, start
		for end < len(lines) && (end == start || size+len(lines[end])+1 <= batchBytes) {
			size += len(lines[end]) + 1
			end++
		}
		v, err := json.Marshal(struct {
			AgentUUID string            `json:"agentUuid"`
			Logs      []json.RawMessage `json:"logs"`
		}{agent, lines[start:end]})
		if err != nil {
			return nil, err
		}
		if _, err := telemetry.ParseLogBatch(v); err != nil {
			return nil, fmt.Errorf("lines %d..%d: %v", start+1, end, err)
		}
		out = append(out, v)
		start = end
	}
	return out, nil
}
