// Package logship ships the agent's own log lines to the cloud when
// logging.cloudEnabled is on (docs/control-channel.md, section "Agent
// logs"): every line the agent logs at or above its level goes into a
// buffer bounded in lines and bytes, and batches of it go as gzip NDJSON
// (core/telemetry.LogEntry lines) to POST /device/:uuid/logs with the
// device key.
//
// The buffer drops its oldest lines when full and counts them; a batch
// leaves it only once the cloud took it. A circuit breaker (core/breaker)
// stops the uploads while the cloud fails, and one probe batch every
// ProbeEvery closes it again. The shipper's own log lines carry the
// component "log-shipper" and are never shipped, so a failing cloud
// cannot feed the buffer with lines about itself; it logs only when the
// breaker opens or closes.
package logship

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/breaker"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/logring"
)

// Component is the log component of the shipper's own lines, which it
// never ships.
const Component = "log-shipper"

// ErrNotReady is what an Uploader answers while the agent has no cloud
// to ship to (not provisioned): the lines wait, and the breaker does not
// count it as a failure.
var ErrNotReady = errors.New("no cloud to ship logs to")

// Uploader posts one gzip NDJSON batch to the cloud.
type Uploader interface {
	UploadLogs(ctx context.Context, gzipped []byte) error
}

// Defaults of Options. A batch stays well under the cloud's limits of
// one upload (roles/api/device: 1 MiB compressed, 20000 lines).
const (
	DefaultMaxLines   = 10000
	DefaultMaxBytes   = 4 << 20
	DefaultBatchLines = 1000
	DefaultBatchBytes = 512 << 10
	DefaultFlushEvery = time.Second
	DefaultProbeEvery = 10 * time.Second
	// maxMessage bounds one line's message, so one huge line cannot take
	// a batch of its own past the cloud's line limit.
	maxMessage    = 16 << 10
	uploadTimeout = 15 * time.Second
)

// Options builds a Shipper; zero fields take the defaults.
type Options struct {
	Uploader Uploader
	// Enabled returns logging.cloudEnabled as in force now.
	Enabled func() bool
	// MaxLines and MaxBytes bound the buffer.
	MaxLines, MaxBytes int
	// BatchLines and BatchBytes bound one upload (uncompressed).
	BatchLines, BatchBytes int
	// FlushEvery is how often the buffer is sent; ProbeEvery how often a
	// batch probes the cloud while the breaker is open.
	FlushEvery, ProbeEvery time.Duration
	// Breaker tunes the circuit breaker (tests shorten its window).
	Breaker breaker.Options
	Log     *slog.Logger
	Metrics prometheus.Registerer
}

// Status is the shipper's part of GET /v1/buffer/status.
type Status struct {
	Enabled        bool  `json:"agentLogBufferEnabled"`
	Logs           int   `json:"agentLogBufferLogs"`
	Bytes          int   `json:"agentLogBufferBytes"`
	PendingBatches int   `json:"agentLogPendingBatches"`
	Dropped        int64 `json:"agentLogDroppedTotal"`
	CircuitOpen    bool  `json:"agentLogCircuitOpen"`
}

// Shipper is the log shipping service. Its Run may be called again after
// it returned (a soft reboot); the buffer lives as long as the Shipper.
type Shipper struct {
	o   Options
	buf *buffer
	br  *breaker.Breaker
	m   *metrics
	log *slog.Logger
	// flushing makes Run's flush and ShipNow's one at a time: two would
	// send the same batch twice.
	flushing sync.Mutex
	// sent counts the lines shipped, for ShipNow's answer.
	sent atomic.Int64
}

// New builds a Shipper and registers its metrics; it does no I/O.
func New(o Options) (*Shipper, error) {
	if o.Uploader == nil || o.Enabled == nil {
		return nil, errors.New("logship: Uploader and Enabled are required")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxLines, DefaultMaxLines)
	def(&o.MaxBytes, DefaultMaxBytes)
	def(&o.BatchLines, DefaultBatchLines)
	def(&o.BatchBytes, DefaultBatchBytes)
	if o.FlushEvery <= 0 {
		o.FlushEvery = DefaultFlushEvery
	}
	if o.ProbeEvery <= 0 {
		o.ProbeEvery = DefaultProbeEvery
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	br, err := breaker.New(o.Breaker)
	if err != nil {
		return nil, fmt.Errorf("logship: %w", err)
	}
	s := &Shipper{o: o, buf: newBuffer(o.MaxLines, o.MaxBytes), br: br, log: o.Log.With("component", Component)}
	s.m = newMetrics(o.Metrics, s)
	return s, nil
}

// Add takes one log entry (logring.Ring.SetTap). It runs on the logging
// goroutine: it encodes the line, appends it and returns.
func (s *Shipper) Add(e logring.Entry) {
	if e.Component == Component || !s.o.Enabled() {
		return
	}
	msg := e.Message
	if len(msg) > maxMessage {
		msg = truncate(msg, maxMessage)
	}
	js, err := json.Marshal(telemetry.LogEntry{Level: e.Level, Message: msg, Component: e.Component, Source: e.Source,
		Timestamp: telemetry.TimestampOf(time.UnixMilli(e.Timestamp).UTC())})
	if err != nil {
		return // a string and a time always encode
	}
	if n := s.buf.add(js); n > 0 {
		s.m.dropped.WithLabelValues("overflow").Add(float64(n))
	}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Status implements the buffer-status part of the shipper.
func (s *Shipper) Status() Status {
	lines, bytes, dropped := s.buf.stats()
	return Status{
		Enabled: s.o.Enabled(), Logs: lines, Bytes: bytes, Dropped: dropped,
		PendingBatches: (lines + s.o.BatchLines - 1) / s.o.BatchLines,
		CircuitOpen:    s.br.State() == breaker.Open,
	}
}

// Name implements lifecycle.Service.
func (s *Shipper) Name() string { return "log-shipper" }

// Start implements lifecycle.Service.
func (s *Shipper) Start(context.Context) error { return nil }

// Stop implements lifecycle.Service.
func (s *Shipper) Stop(context.Context) error { return nil }

// Run sends the buffer every FlushEvery until ctx ends. Lines still
// buffered then stay for the next Run.
func (s *Shipper) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.FlushEvery)
	defer t.Stop()
	var nextProbe time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !s.o.Enabled() {
			s.buf.clear()
			continue
		}
		s.flushing.Lock()
		nextProbe, _ = s.flush(ctx, nextProbe)
		s.flushing.Unlock()
	}
}

// ErrDisabled is ShipNow's answer while logging.cloudEnabled is off.
var ErrDisabled = errors.New("log shipping is off (logging.cloudEnabled is false)")

// ShipNow uploads the buffered lines now, past an open breaker, and
// returns how many lines it shipped; an error says why lines were left
// (ErrNotReady, ErrDisabled, or the cloud's failure).
func (s *Shipper) ShipNow(ctx context.Context) (int, error) {
	if !s.o.Enabled() {
		return 0, ErrDisabled
	}
	s.flushing.Lock()
	defer s.flushing.Unlock()
	before := s.sent.Load()
	_, err := s.flush(ctx, time.Time{})
	return int(s.sent.Load() - before), err
}

// flush uploads batches until the buffer is empty, the cloud fails or the
// breaker is open and no probe is due; it returns when the next probe is,
// and the failure that stopped it.
func (s *Shipper) flush(ctx context.Context, nextProbe time.Time) (time.Time, error) {
	for ctx.Err() == nil {
		open := s.br.State() == breaker.Open
		if open && time.Now().Before(nextProbe) {
			return nextProbe, errors.New("the cloud failed the last uploads; waiting to probe it")
		}
		lines, last := s.buf.batch(s.o.BatchLines, s.o.BatchBytes)
		if len(lines) == 0 {
			return nextProbe, nil
		}
		body, err := gzipLines(lines)
		if err != nil {
			s.log.Error("log batch not compressed", "err", err)
			return nextProbe, err
		}
		uctx, cancel := context.WithTimeout(ctx, uploadTimeout)
		err = s.o.Uploader.UploadLogs(uctx, body)
		cancel()
		switch {
		case errors.Is(err, ErrNotReady):
			return nextProbe, err
		case err == nil:
			s.buf.ack(last)
			s.m.shipped.Add(float64(len(lines)))
			s.sent.Add(int64(len(lines)))
			s.m.uploads.WithLabelValues("ok").Inc()
			s.br.Record(nil)
			if open {
				s.br.Reset()
				s.log.Info("cloud takes the agent's logs again")
			}
		case refused(err):
			// The cloud will never take this batch: keeping it would
			// block every line behind it.
			n := s.buf.discard(last)
			s.m.dropped.WithLabelValues("refused").Add(float64(n))
			s.m.uploads.WithLabelValues("refused").Inc()
			s.log.Warn("cloud refused a log batch; its lines are dropped", "lines", n, "err", err)
		default:
			if ctx.Err() != nil {
				return nextProbe, ctx.Err()
			}
			s.m.uploads.WithLabelValues("failed").Inc()
			if s.br.Record(err) == breaker.Open && !open {
				s.log.Warn("cloud log uploads failing; buffering and probing", "err", err, "probe_every", s.o.ProbeEvery)
			}
			if open || s.br.State() == breaker.Open {
				if !open {
					s.m.opened.Inc()
				}
				return time.Now().Add(s.o.ProbeEvery), err
			}
			return nextProbe, err
		}
	}
	return nextProbe, ctx.Err()
}

// refused tells a batch the cloud refuses for what it is (invalid, too
// large) from a cloud that cannot take it now.
func refused(err error) bool {
	var ce *cloud.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

func gzipLines(lines [][]byte) ([]byte, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	for _, l := range lines {
		if _, err := zw.Write(l); err != nil {
			return nil, fmt.Errorf("gzip log lines: %w", err)
		}
		if _, err := zw.Write([]byte{'\n'}); err != nil {
			return nil, fmt.Errorf("gzip log lines: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip log lines: %w", err)
	}
	return b.Bytes(), nil
}
