package agent

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/roles/agent/publish/outbound"
)

// bufferStatus answers GET /v1/buffer/status (docs/agent.md, section
// Publishing). The transport figures are those of the platform destination
// (the cloud), summed when there are several; every destination's own
// figures are under destinations.
//
// The agent sends its state report only while provisioning, at once, and
// does not ship its own logs to the cloud, so it reports no cloud report
// queue and no agent log buffer: figures that are always zero would look
// like a queue that happens to be empty.
func (a *Agent) bufferStatus(c *gin.Context) {
	st, ok := a.storeFor(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	dests, err := a.pub.Statuses(ctx)
	if err != nil {
		a.internal(c, "buffer status", err)
		return
	}
	mode := outbound.ModeDirect
	var count, bytes int64
	var lastAttempt, lastSuccess time.Time
	for _, d := range dests {
		if d.Type != "platform" {
			continue
		}
		count += d.Worker.Records
		bytes += d.Worker.Bytes
		mode = worse(mode, d.Worker.Mode)
		lastAttempt = later(lastAttempt, d.Worker.LastFlushAttempt)
		lastSuccess = later(lastSuccess, d.Worker.LastFlushSuccess)
	}
	c.JSON(http.StatusOK, gin.H{
		"mode":                   a.mode(ctx, st),
		"transportPublishMode":   mode,
		"mqttMessageBufferCount": count,
		"mqttBufferBytes":        bytes,
		"lastFlushAttempt":       optionalTime(lastAttempt),
		"lastFlushSuccess":       optionalTime(lastSuccess),
		"destinations":           dests,
	})
}

// worse orders publish modes by how far from normal they are, so several
// platform destinations report the one in the worst state.
func worse(a, b outbound.Mode) outbound.Mode {
	rank := map[outbound.Mode]int{outbound.ModeDirect: 0, outbound.ModeRecovering: 1, outbound.ModeBufferOnly: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func optionalTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}
