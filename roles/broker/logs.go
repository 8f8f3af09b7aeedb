package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/edgeplat/edgeplat/core/logging"
)

// logEvery is the least time between two log lines about the same client's
// refused packets (and between two about ended connections): a client that
// repeats a refused publish in a loop must not fill the disk.
const logEvery = 10 * time.Second

// maxLoggedTopic bounds the topic in a log line; a topic may be 64 KiB.
const maxLoggedTopic = 256

// mochiLog is the slog.Handler mochi logs through. mochi's records need
// rework before they reach the process log:
//   - "error processing packet" carries the whole packet, payload included
//     (a refused 2 MiB publish wrote 5 MiB of decimal bytes); it becomes
//     "mqtt packet refused" with the client, packet type, topic, size and
//     reason, at most once per client per logEvery.
//   - a listener logs every ended connection as a WARN with an empty
//     message, including each client closed by a clean shutdown; those
//     become "mqtt connection closed", at Debug when routine (end of
//     stream, shutdown) and at Info, rate-limited, otherwise.
//
// Any other record loses its packet attribute to a summary, and mochi's
// routine Info chatter stays out unless the process logs at Debug.
type mochiLog struct {
	quiet   slog.Handler // mochi's own records, Warn and up unless at Debug
	base    slog.Handler // reworked records, at the level chosen here
	lim     *logging.Limiter
	closing *atomic.Bool
}

func newMochiLog(quiet, base slog.Handler, closing *atomic.Bool, now func() time.Time) *mochiLog {
	return &mochiLog{quiet: quiet, base: base, lim: logging.NewLimiter(logEvery, now), closing: closing}
}

// Enabled implements slog.Handler.
func (h *mochiLog) Enabled(ctx context.Context, l slog.Level) bool { return h.quiet.Enabled(ctx, l) }

// WithAttrs implements slog.Handler.
func (h *mochiLog) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.quiet, c.base = h.quiet.WithAttrs(as), h.base.WithAttrs(as)
	return &c
}

// WithGroup implements slog.Handler.
func (h *mochiLog) WithGroup(name string) slog.Handler {
	c := *h
	c.quiet, c.base = h.quiet.WithGroup(name), h.base.WithGroup(name)
	return &c
}

// Handle implements slog.Handler.
func (h *mochiLog) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case "error processing packet":
		return h.refused(ctx, r)
	case "":
		return h.connectionEnded(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if pk, ok := a.Value.Any().(packets.Packet); ok {
			out.AddAttrs(packetAttrs(pk)...)
			return true
		}
		out.AddAttrs(a)
		return true
	})
	return h.quiet.Handle(ctx, out)
}

func (h *mochiLog) refused(ctx context.Context, r slog.Record) error {
	var client string
	var reason any
	var pk packets.Packet
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "client":
			client = a.Value.String()
		case "error":
			reason = a.Value.Any()
		case "pk":
			pk, _ = a.Value.Any().(packets.Packet)
		}
		return true
	})
	ok, suppressed := h.lim.Allow("client:" + client)
	if !ok || !h.base.Enabled(ctx, slog.LevelWarn) {
		return nil
	}
	out := slog.NewRecord(r.Time, slog.LevelWarn, "mqtt packet refused", r.PC)
	out.AddAttrs(slog.String("client", client))
	out.AddAttrs(packetAttrs(pk)...)
	out.AddAttrs(slog.Any("reason", reason))
	if suppressed > 0 {
		out.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return h.base.Handle(ctx, out)
}

func (h *mochiLog) connectionEnded(ctx context.Context, r slog.Record) error {
	var err error
	r.Attrs(func(a slog.Attr) bool {
		if e, ok := a.Value.Any().(error); ok && a.Key == "error" {
			err = e
		}
		return true
	})
	level := slog.LevelInfo
	if h.closing.Load() || routineEnd(err) {
		level = slog.LevelDebug
	}
	if !h.base.Enabled(ctx, level) {
		return nil
	}
	out := slog.NewRecord(r.Time, level, "mqtt connection closed", r.PC)
	out.AddAttrs(slog.Any("reason", err))
	if level > slog.LevelDebug {
		ok, suppressed := h.lim.Allow("connection")
		if !ok {
			return nil
		}
		if suppressed > 0 {
			out.AddAttrs(slog.Int("suppressed", suppressed))
		}
	}
	return h.base.Handle(ctx, out)
}

// routineEnd tells a connection that simply ended (the peer went away, or
// the broker is closing) from one the broker ended for a cause.
func routineEnd(err error) bool {
	return err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, packets.ErrServerShuttingDown) || errors.Is(err, packets.CodeDisconnect)
}

// packetAttrs describe a packet by everything but its payload.
func packetAttrs(pk packets.Packet) []slog.Attr {
	topic := pk.TopicName
	if len(topic) > maxLoggedTopic {
		topic = topic[:maxLoggedTopic] + "…"
	}
	as := []slog.Attr{slog.String("type", packets.PacketNames[pk.FixedHeader.Type])}
	if pk.FixedHeader.Type == packets.Publish {
		as = append(as, slog.String("topic", topic), slog.Int("bytes", len(pk.Payload)), slog.Int("qos", int(pk.FixedHeader.Qos)))
	}
	return as
}
