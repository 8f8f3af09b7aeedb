package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/spool"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// Part states in the health answer.
const (
	StatusUp       = "up"
	StatusDown     = "down"
	StatusDisabled = "disabled"
)

// maxLagStreams bounds the ingestion streams one health answer inspects
// (each costs a few store round trips); past it the figures are marked
// truncated.
const maxLagStreams = 500

// probeTimeout bounds each part's probe, so one hung dependency answers
// "down" instead of holding the whole answer.
const probeTimeout = 2 * time.Second

// Probes are what the health answer reads. Every field may be nil except
// DB and Streams: that part then reports "disabled".
type Probes struct {
	DB      *db.DB
	Streams streamstore.Store
	// Broker is the state of the API's MQTT client.
	Broker func() mqttx.Stats
	// Spool reports the disk spool's figures; ok false when no spool is
	// configured.
	Spool func() (st spool.Stats, ok bool)
	// Breaker is the write path's circuit breaker state.
	Breaker func() string
	Licence func() licence.Status
}

// Part is one dependency in the health answer: its status and figures.
type Part map[string]any

// Health is GET /admin/health's answer.
type Health struct {
	// Status is "ok" when no part is down, "degraded" otherwise.
	Status    string    `json:"status"`
	CheckedAt time.Time `json:"checkedAt"`
	Database  Part      `json:"database"`
	Streams   Part      `json:"streamStore"`
	Broker    Part      `json:"broker"`
	Spool     Part      `json:"spool"`
	IngestLag Part      `json:"ingestLag"`
	Licence   Part      `json:"licence"`
}

// Check probes every part. It never fails: a part that cannot be probed
// says so in its status and error.
func (p Probes) Check(ctx context.Context, now time.Time) Health {
	h := Health{CheckedAt: now.UTC(), Database: p.database(ctx), Streams: p.streamStore(ctx), Broker: p.broker(),
		Spool: p.spool(), IngestLag: p.ingestLag(ctx, now), Licence: p.licence(now)}
	h.Status = "ok"
	for _, part := range []Part{h.Database, h.Streams, h.Broker, h.Spool, h.IngestLag, h.Licence} {
		if part["status"] == StatusDown {
			h.Status = "degraded"
		}
	}
	return h
}

func down(err error) Part { return Part{"status": StatusDown, "error": err.Error()} }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (p Probes) database(ctx context.Context) Part {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	t0 := time.Now()
	err := p.DB.Ping(ctx)
	rtt := time.Since(t0)
	part := Part{"status": StatusUp, "engine": p.DB.Dialect().String()}
	if err != nil {
		part = down(err)
	}
	part["latencyMs"] = ms(rtt)
	st := p.DB.PoolStats()
	part["pool"] = gin.H{"inUse": st.InUse, "idle": st.Idle, "max": st.Max, "waitCount": st.WaitCount,
		"waitMs": ms(st.WaitDuration), "saturation": st.Saturation()}
	return part
}

func (p Probes) streamStore(ctx context.Context) Part {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	t0 := time.Now()
	if err := p.Streams.Ping(ctx); err != nil {
		part := down(err)
		part["latencyMs"] = ms(time.Since(t0))
		return part
	}
	part := Part{"status": StatusUp, "latencyMs": ms(time.Since(t0))}
	if used, maxMem, err := p.Streams.Memory(ctx); err == nil {
		part["memoryUsedBytes"], part["memoryMaxBytes"] = used, maxMem
	}
	if p.Breaker != nil {
		part["circuitBreaker"] = p.Breaker()
	}
	return part
}

func (p Probes) broker() Part {
	if p.Broker == nil {
		return Part{"status": StatusDisabled}
	}
	st := p.Broker()
	part := Part{"status": StatusUp, "state": st.State.String(), "reconnectAttempts": st.ReconnectAttempts,
		"consecutiveFailures": st.ConsecutiveFailures, "queueLength": st.QueueLength, "queueDropped": st.QueueDropped}
	if st.State != mqttx.StateConnected {
		part["status"] = StatusDown
	}
	if !st.ConnectedSince.IsZero() {
		part["connectedSince"] = st.ConnectedSince.UTC()
	}
	if st.LastError != "" {
		part["error"] = st.LastError
	}
	return part
}

func (p Probes) spool() Part {
	if p.Spool == nil {
		return Part{"status": StatusDisabled}
	}
	st, ok := p.Spool()
	if !ok {
		return Part{"status": StatusDisabled}
	}
	part := Part{"status": StatusUp, "files": st.Files, "bytes": st.Bytes, "sizeMb": float64(st.Bytes) / (1 << 20),
		"droppedFiles": st.DroppedFiles, "skippedLines": st.SkippedLines, "diskFull": st.DiskFull}
	if st.DiskFull {
		// While it is full a failing store leaves messages unacknowledged
		// instead of spooled.
		part["status"] = StatusDown
		part["error"] = "the spool's disk is full"
	}
	return part
}

// ingestLag sums, over every tenant's ingestion stream, what the
// ingestion workers' consumer group has not written yet: entries
// delivered and not acknowledged (pending) and entries not delivered yet
// (undelivered), with the age of the oldest of them.
func (p Probes) ingestLag(ctx context.Context, now time.Time) Part {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	streams, err := p.Streams.Streams(ctx, telemetry.IngestionStreamPattern)
	if err != nil {
		return down(err)
	}
	truncated := len(streams) > maxLagStreams
	if truncated {
		streams = streams[:maxLagStreams]
	}
	var length, pending, undelivered int64
	var oldest time.Time
	noGroup := 0
	for _, s := range streams {
		tenant, err := telemetry.TenantOfStream(s)
		if err != nil {
			continue
		}
		group := telemetry.WriterGroup(tenant)
		n, err := p.Streams.Len(ctx, s)
		if err != nil {
			return down(err)
		}
		length += n
		g, err := p.Streams.Group(ctx, s, group)
		if errors.Is(err, streamstore.ErrNoGroup) {
			// No worker has read this stream yet: all of it waits.
			noGroup++
			undelivered += n
			if first, err := p.Streams.Range(ctx, s, "-", "+", 1); err == nil && len(first) > 0 {
				oldest = older(oldest, first[0].ID)
			}
			continue
		}
		if err != nil {
			return down(err)
		}
		pending += g.Pending
		if g.Lag > 0 {
			undelivered += g.Lag
		}
		if pe, err := p.Streams.PendingEntries(ctx, s, group, 1); err == nil && len(pe) > 0 {
			oldest = older(oldest, pe[0].ID)
		} else if next, err := p.Streams.Range(ctx, s, "("+g.LastDeliveredID, "+", 1); err == nil && len(next) > 0 {
			oldest = older(oldest, next[0].ID)
		}
	}
	part := Part{"status": StatusUp, "streams": len(streams), "length": length, "pending": pending,
		"undelivered": undelivered, "streamsWithoutConsumers": noGroup, "oldestUnwrittenAgeSeconds": 0.0, "truncated": truncated}
	if !oldest.IsZero() {
		part["oldestUnwrittenAgeSeconds"] = max(now.Sub(oldest), 0).Seconds()
	}
	return part
}

// older returns the earlier of t and the time of stream entry id.
func older(t time.Time, id string) time.Time {
	at, err := streamstore.IDTime(id)
	if err != nil || (!t.IsZero() && !at.Before(t)) {
		return t
	}
	return at
}

func (p Probes) licence(now time.Time) Part {
	if p.Licence == nil {
		return Part{"status": StatusDisabled}
	}
	st := p.Licence()
	features := st.Features
	if features == nil {
		features = []string{}
	}
	part := Part{"status": StatusUp, "state": st.State, "maxAgents": st.MaxAgents, "features": features, "demo": st.Demo}
	if !st.Valid() {
		part["status"] = StatusDown
		part["reason"], part["error"] = st.Reason, st.Message
	}
	if st.ExpiresAt != nil {
		part["expiresAt"] = st.ExpiresAt.UTC()
		part["expiresInSeconds"] = st.ExpiresAt.Sub(now).Seconds()
	}
	return part
}

// health serves GET /admin/health: 200 with every part, down ones too.
func (h *handler) health(c *gin.Context) {
	c.JSON(http.StatusOK, h.Health.Check(c.Request.Context(), h.Now()))
}
