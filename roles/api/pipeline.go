package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/breaker"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/spool"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
	"github.com/prometheus/client_golang/prometheus"
)

// pipeline takes each agent MQTT message from topic to stream: parse the
// topic, decode the payload (any codec layers), map it to one message per
// device, and Produce it (de-duplicate on msgId, append, publish live
// values) in one atomic step. When the stream store fails, the write-path
// breaker opens and messages go to the disk spool; without a spool they are
// not acknowledged, so the broker redelivers them. Either way nothing is
// acknowledged before it is durable.
//
// De-duplication (api.dedup_mode) remembers a msgId either as a key of its
// own or, in sequence mode, as one bit of a bitmap per (tenant, agent, kid,
// block of DedupBitmapBits sequence numbers): an agent's sequence never
// repeats, so a set bit is exactly a repeat, however late and out of order
// replayed messages arrive, and a bitmap costs about one bit per message
// instead of a key.
type pipeline struct {
	rt      *rt.Runtime
	streams streamstore.Store
	log     *slog.Logger
	m       *pipelineMetrics
	breaker *breaker.Breaker
	spoolOp *spool.Options
	spool   *spool.Spool
	maxLen  int64
	// ttl is the msgId TTL in ns (api.dedup_ttl); the system config
	// changes it while messages flow.
	ttl    atomic.Int64
	mode   string // api.dedup_mode
	limits codec.Limits
	every  time.Duration
	// holdFor bounds how long a subscriber worker without a spool holds
	// messages that a full stream, an open breaker or a copy in flight
	// refused, retrying them in place (see hold).
	holdFor time.Duration
	// clock refuses readings timed too far ahead of their receipt.
	clock *clockGuard
	// seen, when set, records each agent heard from.
	seen *lastSeen
	// receipts, when set, learns of every agent message the stream holds
	// (appended or a repeat), for the agent's delivery receipts
	// (roles/api/receipts).
	receipts receiptRecorder
	// observe, when set, is handed each batch appended for the first time
	// (anomaly.Evaluator.Observe); it must not block.
	observe func(tenantKey string, msgs []telemetry.Message)
	// topics, when set, counts every agent message by topic and takes the
	// schema samples it asks for (brokermon.Monitor); it must not block.
	topics topicObserver
	// jsonEntries writes stream entries as JSON instead of the compact
	// form (api.stream_entry_format).
	jsonEntries bool
}

// topicObserver is the broker monitor as the pipeline feeds it.
type topicObserver interface {
	// Observe counts one message; true asks for a schema sample of it.
	Observe(tenant, topic string, size int) bool
	SampleMessages(topic string, msgs []telemetry.Message)
}

// receiptRecorder is the receipt tracker as the pipeline uses it
// (*receipts.Tracker): tenant and agent are the topic's 22-character ids.
// It must not block.
type receiptRecorder interface {
	Record(tenant, agent, msgID string)
}

// defaultHoldFor stays well below paho's 10 s ping timeout: while a worker
// holds, the broker's PINGRESP may wait behind it.
const defaultHoldFor = 3 * time.Second

func newPipeline(cfg *config.Config, r *rt.Runtime, streams streamstore.Store) (*pipeline, error) {
	p := &pipeline{
		rt: r, streams: streams, log: r.Component("api-pipeline"), m: newPipelineMetrics(r.Metrics),
		maxLen: int64(cfg.StreamStore.IngestionStreamMaxLen), mode: cfg.API.DedupMode,
		every: time.Second, holdFor: defaultHoldFor, clock: newClockGuard(cfg.API, r.Metrics),
		jsonEntries: cfg.API.StreamEntryFormat == config.StreamEntryJSON,
	}
	p.setDedupTTL(cfg.API.DedupTTL)
	// Load has checked it; a Config built by hand has not, and any other
	// value would silently dedup by key.
	if err := config.ValidateDedupMode(p.mode); err != nil {
		return nil, err
	}
	b, err := breaker.New(breaker.Options{OnChange: func(_, to breaker.State) {
		if to == breaker.Open {
			p.m.breakerOpen.Set(1)
			p.log.Warn("write-path circuit breaker opened: stream store failing", "spool", p.spoolOp != nil)
		} else {
			p.m.breakerOpen.Set(0)
			p.log.Info("write-path circuit breaker closed: stream store healthy")
		}
	}})
	if err != nil {
		return nil, err
	}
	p.breaker = b
	if cfg.Spool.Enabled {
		p.spoolOp = &spool.Options{Dir: cfg.Spool.Path, MaxBytes: int64(cfg.Spool.MaxSizeMB) << 20, Logger: p.log}
	}
	return p, nil
}

// setDedupTTL changes the TTL of the de-duplication marks set from now on.
func (p *pipeline) setDedupTTL(d time.Duration) { p.ttl.Store(int64(d)) }

func (p *pipeline) Name() string { return "api-pipeline" }

func (p *pipeline) Start(ctx context.Context) error {
	// Messages are acknowledged to the broker once they are in the stream:
	// a Redis that keeps nothing over a restart loses them.
	streamstore.CheckPersistence(ctx, p.streams, p.log)
	if p.spoolOp != nil {
		sp, err := spool.Open(*p.spoolOp)
		if err != nil {
			return fmt.Errorf("open spool (%s): %w", config.Label("spool.path"), err)
		}
		p.spool = sp
		p.rt.Health.Register("api-spool", p.checkSpool)
	}
	return nil
}

// checkSpool reports a spool whose disk is full: while it is, a failing
// store leaves messages unacknowledged instead of spooled, which operators
// must hear of before the broker's queue for this client overflows.
func (p *pipeline) checkSpool(context.Context) error {
	if st := p.spool.Stats(); st.DiskFull {
		return fmt.Errorf("spool disk full (spool.path %s): messages stay unacknowledged at the broker until space returns", p.spoolOp.Dir)
	}
	return nil
}

// Run is the breaker's background poller and the spool replayer.
func (p *pipeline) Run(ctx context.Context) error {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.recover(ctx)
		}
	}
}

func (p *pipeline) Stop(context.Context) error {
	if p.spool != nil {
		return p.spool.Close()
	}
	return nil
}

// handle is the MQTT handler of one message; a nil return acknowledges it.
// Messages that can never be processed (bad topic, undecodable payload) are
// counted, logged at debug and acknowledged: redelivery cannot fix them.
func (p *pipeline) handle(ctx context.Context, msg mqttx.Message) error {
	t, b, ok := p.prepare(msg)
	if !ok {
		return nil
	}
	return p.produce(ctx, msg.Topic, t, b, false)
}

// handleBatch is handle for the messages a subscriber worker has waiting:
// the usable ones go to the store in one ProduceBatch, one round trip for
// all of them instead of one each, and each message is settled (appended,
// duplicate, spooled, or left unacknowledged) by its own result.
func (p *pipeline) handleBatch(ctx context.Context, msgs []mqttx.Message) []error {
	errs := make([]error, len(msgs))
	type mapped struct {
		i int
		t envelope.Topic
		b envelope.Batch
	}
	var todo []mapped
	var reqs []streamstore.ProduceRequest
	for i, msg := range msgs {
		t, b, ok := p.prepare(msg)
		if !ok {
			continue
		}
		req, err := p.request(t, b)
		if err != nil {
			errs[i] = err
			continue
		}
		todo, reqs = append(todo, mapped{i, t, b}), append(reqs, req)
	}
	if len(reqs) == 0 {
		return errs
	}
	deadline := time.Now().Add(p.holdFor)
	if !p.breaker.Allow() && (p.spool != nil || !p.holdUntil(ctx, deadline, p.breaker.Allow)) {
		for _, m := range todo {
			errs[m.i] = p.spoolBatch(msgs[m.i].Topic, m.b, errors.New("circuit breaker open"))
		}
		return errs
	}
	results, perrs := p.streams.ProduceBatch(ctx, reqs)
	if p.spool == nil {
		p.hold(ctx, deadline, reqs, results, perrs)
	}
	for k, m := range todo {
		errs[m.i] = p.settle(ctx, msgs[m.i].Topic, m.t, m.b, results[k], perrs[k], false)
	}
	return errs
}

// hold retries in place, until deadline, the requests that a full stream
// or a copy in flight refused. It runs only without a spool, where the
// alternative is to leave them unacknowledged: the broker resends those
// only on a new connection, so every refusal would cost a reconnect (and a
// stream that stays full for a while, a storm of them, each redelivery
// refused again), for what is usually a stream that ingest drains within a
// second or a copy another replica is appending this millisecond. Holding
// stops this worker reading from the broker, which keeps the rest queued:
// back-pressure, as a full stream means. A stream still full at the
// deadline leaves its messages unacknowledged as before.
func (p *pipeline) hold(ctx context.Context, deadline time.Time, reqs []streamstore.ProduceRequest, results []streamstore.ProduceResult, errs []error) {
	retryable := func(err error) bool {
		return errors.Is(err, streamstore.ErrStreamFull) || errors.Is(err, streamstore.ErrCopyInFlight)
	}
	delay := 10 * time.Millisecond
	for {
		var idx []int
		for k, err := range errs {
			if retryable(err) {
				idx = append(idx, k)
			}
		}
		if len(idx) == 0 || time.Now().Add(delay).After(deadline) || !lifecycle.Sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, 250*time.Millisecond)
		sub := make([]streamstore.ProduceRequest, len(idx))
		for j, k := range idx {
			sub[j] = reqs[k]
		}
		p.m.held.Add(float64(len(sub)))
		r, e := p.streams.ProduceBatch(ctx, sub)
		for j, k := range idx {
			results[k], errs[k] = r[j], e[j]
		}
	}
}

// holdUntil waits until ok() or deadline, polling; false when ok() never
// held.
func (p *pipeline) holdUntil(ctx context.Context, deadline time.Time, ok func() bool) bool {
	for !ok() {
		if time.Now().Add(50*time.Millisecond).After(deadline) || !lifecycle.Sleep(ctx, 50*time.Millisecond) {
			return false
		}
	}
	return true
}

// prepare parses, decodes and maps one telemetry message; false means it
// was dropped (and counted) as unusable.
func (p *pipeline) prepare(msg mqttx.Message) (envelope.Topic, envelope.Batch, bool) {
	t, err := envelope.ParseTopic(msg.Topic)
	if err != nil {
		p.m.dropped.WithLabelValues("topic").Inc()
		p.log.Debug("message on a malformed topic dropped", "topic", msg.Topic, "err", err)
		return t, envelope.Batch{}, false
	}
	p.m.received.WithLabelValues(kindLabel(t.Kind)).Inc()
	sample := p.topics != nil && p.topics.Observe(t.Tenant, msg.Topic, len(msg.Payload))
	if t.Kind == envelope.Telemetry && p.seen != nil {
		// Any message on the agent's own topic shows it alive (the
		// broker admits no other publisher there), even one whose payload
		// is refused below.
		p.seen.touch(t.Tenant, t.AgentUUID)
	}
	if t.Kind != envelope.Telemetry {
		// State and system-metrics reports have their own subscriptions
		// (reports.handle); a filter that also matched them must not turn
		// them into telemetry.
		return t, envelope.Batch{}, false
	}
	// Agents publish MessagePack envelopes almost always; those are mapped
	// straight from their bytes. Anything the fast path is not sure of goes
	// the generic way, which also words the error.
	var b envelope.Batch
	if codec.Unwrap(msg.Payload, p.limits, func(raw []byte, enc codec.Encoding, lim codec.Limits) bool {
		var ok bool
		if enc == codec.EncodingMsgpack {
			b, ok = envelope.MapMsgpack(t, raw, lim)
		}
		return ok
	}) {
		p.m.decoded.Inc()
		p.countSkipped(msg.Topic, b)
		if sample {
			p.topics.SampleMessages(msg.Topic, b.Messages)
		}
		return t, b, p.guardClock(msg.Topic, t, &b)
	}
	dec, err := codec.Decode(msg.Payload, p.limits)
	if err != nil {
		p.m.dropped.WithLabelValues(decodeReason(err)).Inc()
		p.log.Debug("undecodable payload dropped", "topic", msg.Topic, "err", err)
		return t, envelope.Batch{}, false
	}
	b, err = envelope.Map(t, dec.Value)
	if err != nil {
		p.m.dropped.WithLabelValues("envelope").Inc()
		p.log.Debug("invalid telemetry envelope dropped", "topic", msg.Topic, "err", err)
		return t, envelope.Batch{}, false
	}
	p.m.decoded.Inc()
	p.countSkipped(msg.Topic, b)
	if sample {
		p.topics.SampleMessages(msg.Topic, b.Messages)
	}
	return t, b, p.guardClock(msg.Topic, t, &b)
}

// guardClock removes the readings timed beyond the clock window (counted
// by the guard); a message left without readings is dropped, as "clock".
func (p *pipeline) guardClock(topic string, t envelope.Topic, b *envelope.Batch) bool {
	if p.clock.guard(t.Tenant, t.AgentUUID, b) {
		return true
	}
	p.m.dropped.WithLabelValues("clock").Inc()
	p.log.Debug("telemetry timed ahead of the clock window dropped", "topic", topic)
	return false
}

// countSkipped counts readings an envelope carried that the readings table
// cannot hold (text values); the envelope's other readings go on.
func (p *pipeline) countSkipped(topic string, b envelope.Batch) {
	if b.Skipped > 0 {
		p.m.skipped.Add(float64(b.Skipped))
		p.log.Debug("text readings left out", "topic", topic, "readings", b.Skipped)
	}
}

// produce appends one mapped batch, or spools it when the store fails.
func (p *pipeline) produce(ctx context.Context, source string, t envelope.Topic, b envelope.Batch, replay bool) error {
	req, err := p.request(t, b)
	if err != nil {
		return err
	}
	if !replay && !p.breaker.Allow() {
		return p.spoolBatch(source, b, errors.New("circuit breaker open"))
	}
	res, err := p.streams.Produce(ctx, req)
	return p.settle(ctx, source, t, b, res, err, replay)
}

// settle records the outcome of producing b: success or failure for the
// breaker, the counters, and the spool for a failure outside a replay
// (a replayed line stays in the spool when it fails again).
func (p *pipeline) settle(ctx context.Context, source string, t envelope.Topic, b envelope.Batch, res streamstore.ProduceResult, err error, replay bool) error {
	if err != nil {
		// A copy of the message being appended by another replica at this
		// instant is no sign of a failing store; it is kept for a retry
		// like a failure, and the retry finds it a repeat.
		if ctx.Err() == nil && !errors.Is(err, streamstore.ErrCopyInFlight) {
			p.breaker.Record(err)
		}
		if replay {
			return err
		}
		return p.spoolBatch(source, b, err)
	}
	p.breaker.Record(nil)
	// The stream holds it, appended now or before: the agent may delete
	// it. A spooled batch is receipted when its replay appends it.
	if p.receipts != nil && b.MsgID != "" {
		p.receipts.Record(t.Tenant, t.Agent, b.MsgID)
	}
	if res.Duplicate {
		p.m.duplicates.Inc()
		return nil
	}
	p.m.appended.Add(float64(len(res.IDs)))
	if p.observe != nil {
		p.observe(t.Tenant, b.Messages)
	}
	return nil
}

func (p *pipeline) request(t envelope.Topic, b envelope.Batch) (streamstore.ProduceRequest, error) {
	entries := make([]map[string]string, len(b.Messages))
	// The live payload is the JSON array of the messages. The stream
	// entries are their compact form (docs/stream-contract.md), which
	// ingest reads without parsing text, all in one buffer; a message that
	// form declines, or every message with api.stream_entry_format json,
	// gets a copy of its JSON part. AppendEntryJSON writes
	// json.Marshal's bytes at a quarter of its cost, without the readings'
	// timestamps that repeat the message's.
	size, csize := 2, 0
	for i := range b.Messages {
		size += 128 + 128*len(b.Messages[i].Readings)
		csize += 96 + 24*len(b.Messages[i].Readings)
	}
	live := append(make([]byte, 0, size), '[')
	var compact []byte
	if !p.jsonEntries {
		compact = make([]byte, 0, csize)
	}
	for i := range b.Messages {
		if i > 0 {
			live = append(live, ',')
		}
		start := len(live)
		var err error
		if live, err = b.Messages[i].AppendEntryJSON(live); err != nil {
			return streamstore.ProduceRequest{}, fmt.Errorf("encode message: %w", err)
		}
		entries[i] = map[string]string{telemetry.StreamField: p.entry(&compact, &b.Messages[i], live[start:])}
	}
	live = append(live, ']')
	req := streamstore.ProduceRequest{
		Stream: telemetry.IngestionStream(t.Tenant), Entries: entries, MaxLen: p.maxLen,
		Channel: telemetry.MetricsChannel(t.Tenant, t.AgentUUID), Payload: live,
	}
	if b.MsgID != "" {
		p.dedup(&req, t, b.MsgID)
	}
	return req, nil
}

// entry is a message's stream entry: its compact form, appended to
// *compact, or a copy of its JSON form js.
func (p *pipeline) entry(compact *[]byte, m *telemetry.Message, js []byte) string {
	if !p.jsonEntries {
		if c, ok := m.AppendCompactEntry(*compact); ok {
			n := len(*compact)
			*compact = c
			// The entry's bytes are never written again (appends go past
			// them, or to a new array), so the string may share them.
			return unsafe.String(&c[n], len(c)-n)
		}
	}
	return string(js)
}

// dedup sets req's de-duplication mark for msgID. Marks are scoped by tenant
// and agent: another tenant's message with the same msgId is a different
// message.
func (p *pipeline) dedup(req *streamstore.ProduceRequest, t envelope.Topic, msgID string) {
	scope := "tenant:" + t.Tenant + ":agent:" + t.Agent
	req.DedupTTL = time.Duration(p.ttl.Load())
	if p.mode == config.DedupModeSequence {
		// The kid is in the key so that sequences sent under two API keys
		// never share a bitmap, whatever the agent does with its counter
		// when its key is rotated.
		if kid, seq, err := codec.ParseMsgID(msgID); err == nil {
			block := seq / streamstore.DedupBitmapBits
			req.DedupKey = scope + ":seq:" + kid + ":" + strconv.FormatUint(block, 10)
			req.DedupBitmap, req.DedupBit = true, uint16(seq%streamstore.DedupBitmapBits)
			return
		}
		// envelope.Map admits v2 ids only, but a replayed spool line is read
		// back from disk unchecked: whatever it carries, a key of its own
		// still catches repeats of it.
	}
	req.DedupKey = scope + ":msgid:" + msgID
}

// spoolBatch keeps a batch the store could not take. Without a spool the
// error goes back to the MQTT client, which leaves the message
// unacknowledged for the broker to redeliver.
func (p *pipeline) spoolBatch(source string, b envelope.Batch, cause error) error {
	if p.spool == nil {
		p.m.unacked.Inc()
		return fmt.Errorf("stream store: %w", cause)
	}
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode spool entry: %w", err)
	}
	if err := p.spool.Append(spool.Entry{Source: source, Data: data}); err != nil {
		if spool.IsNoSpace(err) && storeFailed(cause) {
			// The spool was the fallback for a store that just failed; with
			// it full too, direct writes stop until recover has drained it.
			// A refusal of one message (a copy in flight, one tenant's full
			// stream) says nothing of the store: the others still go direct.
			p.breaker.Trip()
		}
		return fmt.Errorf("spool after %v: %w", cause, err)
	}
	p.m.spooled.Inc()
	return nil
}

// storeFailed reports whether err is a failure of the stream store itself,
// rather than its refusal of one message.
func storeFailed(err error) bool {
	return !errors.Is(err, streamstore.ErrCopyInFlight) && !errors.Is(err, streamstore.ErrStreamFull)
}

// recover closes the breaker once the store answers and the spool is
// drained, replaying the spool oldest first in the background meanwhile.
func (p *pipeline) recover(ctx context.Context) {
	open := !p.breaker.Allow()
	if !open && (p.spool == nil || p.spool.Empty()) {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := p.streams.Ping(pctx)
	cancel()
	if err != nil {
		return
	}
	if p.spool != nil && !p.spool.Empty() {
		n, err := p.spool.Replay(ctx, 100, p.replay)
		if n > 0 || err != nil {
			st := p.spool.Stats()
			p.log.Info("spool replay", "entries", n, "left_files", st.Files, "left_bytes", st.Bytes, "err", err)
		}
		if err != nil || !p.spool.Empty() {
			return
		}
	}
	if open {
		p.breaker.Reset()
	}
}

func (p *pipeline) replay(ctx context.Context, entries []spool.Entry) error {
	for _, en := range entries {
		t, err := envelope.ParseTopic(en.Source)
		if err != nil {
			p.log.Warn("spool entry with an unknown topic dropped", "source", en.Source)
			continue
		}
		var b envelope.Batch
		if err := json.Unmarshal(en.Data, &b); err != nil {
			p.log.Warn("unreadable spool entry dropped", "source", en.Source, "err", err)
			continue
		}
		if err := p.produce(ctx, en.Source, t, b, true); err != nil {
			return err
		}
		p.m.replayed.Inc()
	}
	return nil
}

func kindLabel(k envelope.Kind) string {
	switch k {
	case envelope.State:
		return "state"
	case envelope.Metrics:
		return "metrics"
	case envelope.Events:
		return "events"
	}
	return "telemetry"
}

func decodeReason(err error) string {
	switch {
	case errors.Is(err, codec.ErrTooLarge):
		return "too_large"
	case errors.Is(err, codec.ErrTooDeep):
		return "too_deep"
	case errors.Is(err, codec.ErrUnknownIndex):
		return "unknown_key_index"
	}
	return "malformed"
}

type pipelineMetrics struct {
	received    *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	decoded     prometheus.Counter
	skipped     prometheus.Counter
	duplicates  prometheus.Counter
	appended    prometheus.Counter
	spooled     prometheus.Counter
	replayed    prometheus.Counter
	unacked     prometheus.Counter
	held        prometheus.Counter
	breakerOpen prometheus.Gauge
}

func newPipelineMetrics(reg prometheus.Registerer) *pipelineMetrics {
	m := &pipelineMetrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_mqtt_messages_received_total",
			Help: "Agent MQTT messages received, by kind (telemetry, state, metrics, events)."}, []string{"kind"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_mqtt_messages_dropped_total",
			Help: "Messages dropped because they can never be processed, by reason."}, []string{"reason"}),
		decoded: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_telemetry_decoded_total",
			Help: "Telemetry payloads decoded and mapped."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_telemetry_text_readings_skipped_total",
			Help: "Readings left out of decoded payloads because their value is text, not a number."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_telemetry_duplicates_total",
			Help: "Telemetry payloads dropped as repeats of a msgId seen within the TTL."}),
		appended: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_telemetry_appended_total",
			Help: "Device messages appended to ingestion streams."}),
		spooled: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_telemetry_spooled_total",
			Help: "Telemetry payloads written to the disk spool."}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_telemetry_replayed_total",
			Help: "Spooled telemetry payloads replayed into the stream store."}),
		unacked: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_telemetry_unacknowledged_total",
			Help: "Telemetry payloads left unacknowledged because the store failed and no spool is configured."}),
		held: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_telemetry_held_retries_total",
			Help: "Telemetry payloads retried in place after a full stream or a copy in flight refused them (no spool: the subscriber holds them rather than leave them unacknowledged)."}),
		breakerOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_api_write_circuit_breaker_open",
			Help: "1 while the write-path circuit breaker is open."}),
	}
	reg.MustRegister(m.received, m.dropped, m.decoded, m.skipped, m.duplicates, m.appended, m.spooled, m.replayed, m.unacked, m.held, m.breakerOpen)
	return m
}

var _ lifecycle.Service = (*pipeline)(nil)
