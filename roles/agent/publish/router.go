// Package publish is the agent's subscription router (docs/agent.md,
// section Publishing): it routes every endpoint batch to the destinations
// whose subscriptions match it. Subpackages hold the destinations'
// transports (dest), their workers and offline queues (outbound) and the
// payload formats (payload).
package publish

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/outbound"
	"github.com/edgeplat/edgeplat/roles/agent/publish/payload"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// Keys of agent_meta for message ids. Both start with "sequence." so a
// factory reset keeps them: a msgId must never be reused, also not after
// a reset (the cloud de-duplicates on it for 24 h).
const (
	metaMsgSequence = "sequence.msgid"
	metaLocalKid    = "sequence.local_kid"
)

// msgSequenceBlock is how many message numbers are reserved per store
// write: one write per 1000 payloads, and at most 1000 numbers skipped
// after a crash.
const msgSequenceBlock = 1000

// Router is the subscription router: every endpoint batch goes to each enabled subscription whose
// topic filters match the endpoint's MQTT topic, encoded in that
// subscription's format and compression, and is handed to the worker of
// the subscription's destination. Each destination has its own
// connection, worker and offline queue, so a dead destination never slows
// another: handing over never waits for a destination (see
// outbound.Worker.Offer).
type Router struct {
	log *slog.Logger
	cpu func() float64

	// mu serialises open, reload and close.
	mu     sync.Mutex
	ctx    context.Context // the workers' context, from open
	cancel context.CancelFunc
	st     *store.Store
	queue  *store.Queue
	seq    *store.Sequence
	dests  map[int64]*destRun
	creds  dest.PlatformCredentials
	// loaded holds a channel closed once the first reload made the
	// routes; deliver waits for it, so batches of endpoints that start
	// before the publishing phase are routed, not dropped. It is atomic so
	// deliver never waits on mu while a reload stops workers; it is closed
	// and replaced under mu.
	loaded atomic.Pointer[chan struct{}]

	routes atomic.Pointer[[]*route]
	kid    atomic.Pointer[string]
	// prefix is the platform topic prefix of creds, read without mu.
	prefix atomic.Pointer[string]
	// onCommand receives the platform destination's commands; set once,
	// before Open.
	onCommand func(ctx context.Context, topic string, payload []byte)

	// warned limits the log lines about a subscription that cannot
	// publish (a missing route topic) to one per subscription and reload.
	warned sync.Map
}

// destRun is one running destination.
type destRun struct {
	row store.Destination
	// creds are the platform credentials the run was started with; a
	// platform destination restarts when they change.
	creds  dest.PlatformCredentials
	t      dest.Transport
	w      *outbound.Worker
	cancel context.CancelFunc
	done   chan struct{}
}

// route is one enabled subscription bound to its running destination.
type route struct {
	sub    store.Subscription
	format payload.Format
	comp   *payload.Compressor
	topic  string // route_json.topic
	d      *destRun
}

func New(log *slog.Logger, cpu func() float64) *Router {
	p := &Router{log: log.With("component", "publish"), cpu: cpu, dests: map[int64]*destRun{}}
	first := make(chan struct{})
	p.loaded.Store(&first)
	return p
}

// OnCommand sets the receiver of the commands the platform destination's
// connection subscribes to (dest.Env.OnCommand). Call it before Open.
func (p *Router) OnCommand(fn func(ctx context.Context, topic string, payload []byte)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onCommand = fn
}

// TopicPrefix is the platform topic prefix "i/{tenant}/a/{agent}" of the
// current credentials; "" while the device is not provisioned.
func (p *Router) TopicPrefix() string {
	if s := p.prefix.Load(); s != nil {
		return *s
	}
	return ""
}

// Open starts publishing on st: the message sequence, the offline queue,
// and every enabled destination. ctx is the lifetime of the workers.
func (p *Router) Open(ctx context.Context, st *store.Store, creds dest.PlatformCredentials, kid string) error {
	seq, err := st.NewSequence(ctx, metaMsgSequence, msgSequenceBlock)
	if err != nil {
		return err
	}
	q, err := st.OfflineQueue(store.DefaultQueueOptions())
	if err != nil {
		return err
	}
	if kid == "" {
		kid, err = st.MetaOrCreate(ctx, metaLocalKid, newLocalKid)
		if err != nil {
			return err
		}
	}
	p.kid.Store(&kid)
	p.mu.Lock()
	p.ctx, p.cancel = context.WithCancel(ctx)
	p.st, p.queue, p.seq, p.creds = st, q, seq, creds
	p.prefix.Store(&creds.TopicPrefix)
	p.mu.Unlock()
	if err := p.Reload(ctx); err != nil {
		return err
	}
	p.Release()
	return nil
}

// newLocalKid makes the key identifier of msgIds sent before the agent
// has a device key: eight characters of the msgId alphabet.
func newLocalKid() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b [codec.KidLen]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// KidOf returns the key identifier of a device key dk2_{kid}_{secret}, or
// "" for any other key.
func KidOf(apiKey string) string {
	rest, ok := strings.CutPrefix(apiKey, "dk2_")
	if !ok {
		return ""
	}
	kid, _, ok := strings.Cut(rest, "_")
	if !ok || len(kid) != codec.KidLen {
		return ""
	}
	if _, err := codec.FormatMsgID(kid, 1); err != nil {
		return ""
	}
	return kid
}

// SetCredentials changes the platform credentials (provisioning,
// deprovisioning) and restarts the platform destinations with them.
func (p *Router) SetCredentials(ctx context.Context, creds dest.PlatformCredentials, kid string) error {
	if kid != "" {
		p.kid.Store(&kid)
	}
	p.mu.Lock()
	changed := p.creds != creds
	p.creds = creds
	p.prefix.Store(&creds.TopicPrefix)
	p.mu.Unlock()
	if !changed {
		return nil
	}
	return p.Reload(ctx)
}

// Reload makes the running destinations and the routes follow the store:
// a destination whose row changed is restarted (its queue is kept: it is
// in the store under the destination's id), a deleted or disabled one is
// stopped, and the routes are rebuilt from the enabled subscriptions.
func (p *Router) Reload(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st == nil {
		return nil // not open: Open loads everything
	}
	all, err := p.st.Publishing().Destinations(ctx, true)
	if err != nil {
		return err
	}
	stored := make(map[int64]bool, len(all))
	rows := all[:0:0]
	for _, d := range all {
		stored[d.ID] = true
		if d.Enabled {
			rows = append(rows, d)
		}
	}
	subs, err := p.st.Publishing().Subscriptions(ctx, 0, false)
	if err != nil {
		return err
	}
	want := make(map[int64]store.Destination, len(rows))
	for _, d := range rows {
		want[d.ID] = d
	}
	var deleted []*destRun
	for id, r := range p.dests {
		d, ok := want[id]
		if ok && sameDestination(d, r.row) && (d.Type != "platform" || r.creds == p.creds) {
			continue
		}
		p.stopDest(r)
		delete(p.dests, id)
		if !stored[id] {
			deleted = append(deleted, r)
		}
	}
	var errs []error
	for _, d := range rows {
		if _, ok := p.dests[d.ID]; ok {
			continue
		}
		r, err := p.startDest(d)
		if err != nil {
			// A destination that cannot be built (a config a newer
			// version wrote, a missing certificate file) must not stop
			// the others.
			p.log.Error("publish destination not started", "destination", d.Name, "id", d.ID, "err", err)
			errs = append(errs, fmt.Errorf("destination %s: %w", d.Name, err))
			continue
		}
		p.dests[d.ID] = r
	}
	routes := make([]*route, 0, len(subs))
	for _, s := range subs {
		r := p.dests[s.DestinationID]
		if r == nil {
			continue
		}
		rt, err := p.newRoute(s, r)
		if err != nil {
			p.log.Error("subscription not routed", "subscription", s.ID, "err", err)
			continue
		}
		routes = append(routes, rt)
	}
	p.routes.Store(&routes)
	p.warned.Clear()
	// A deleted destination's queue goes with it: after its worker put
	// back what it held, and after the routes stopped naming it, so no
	// batch lands in the queue once it is purged.
	for _, r := range deleted {
		n, err := p.queue.Purge(ctx, r.row.ID)
		if err != nil {
			p.log.Error("offline queue of a deleted destination not purged", "destination", r.row.Name, "err", err)
		} else if n > 0 {
			p.log.Warn("destination deleted with records still queued; they are discarded", "destination", r.row.Name, "records", n)
		}
	}
	p.log.Debug("publishing reloaded", "destinations", len(p.dests), "routes", len(routes))
	if len(errs) > 0 {
		p.log.Warn("some publish destinations did not start", "err", errors.Join(errs...))
	}
	return nil
}

func sameDestination(a, b store.Destination) bool {
	return a.Type == b.Type && a.Name == b.Name && a.Enabled == b.Enabled && string(a.Config) == string(b.Config)
}

func (p *Router) startDest(d store.Destination) (*destRun, error) {
	t, err := dest.New(d, dest.Env{Logger: p.log, Platform: p.creds, OnCommand: p.onCommand})
	if err != nil {
		return nil, err
	}
	ro, err := dest.Receipts(d.Type, d.Config)
	if err != nil {
		return nil, err
	}
	w, err := outbound.New(outbound.Options{
		Destination: d.ID, Name: d.Name, Transport: t, Queue: p.queue, QueueOptions: p.queue.Options(),
		Logger:   p.log.With("destination", d.Name, "destination_id", d.ID),
		Receipts: ro.On, ReceiptWait: ro.Wait,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(p.ctx)
	if err := t.Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	r := &destRun{row: d, creds: p.creds, t: t, w: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			p.log.Error("publish worker ended", "destination", d.Name, "err", err)
		}
	}()
	p.log.Info("publish destination started", "destination", d.Name, "id", d.ID, "type", d.Type)
	return r, nil
}

// stopDest stops a destination's worker, which queues whatever it still
// held, then its connection.
func (p *Router) stopDest(r *destRun) {
	r.cancel()
	<-r.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.t.Stop(ctx); err != nil {
		p.log.Warn("stop publish destination", "destination", r.row.Name, "err", err)
	}
}

func (p *Router) newRoute(s store.Subscription, r *destRun) (*route, error) {
	f, err := payload.ParseFormat(s.PayloadFormat)
	if err != nil {
		return nil, err
	}
	cf, err := payload.ParseCompression(s.Compression)
	if err != nil {
		return nil, err
	}
	comp, err := payload.NewCompressor(cf, p.cpu)
	if err != nil {
		return nil, err
	}
	var rj struct {
		Topic string `json:"topic"`
	}
	if len(s.Route) > 0 && string(s.Route) != "null" {
		if err := json.Unmarshal(s.Route, &rj); err != nil {
			return nil, fmt.Errorf("route_json: %w", err)
		}
	}
	return &route{sub: s, format: f, comp: comp, topic: rj.Topic, d: r}, nil
}

// ForgetStopped purges the queue of a deleted destination that was not
// running (disabled); Reload purges those it stops.
func (p *Router) ForgetStopped(ctx context.Context, id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.queue == nil || p.dests[id] != nil {
		return
	}
	if n, err := p.queue.Purge(ctx, id); err != nil {
		p.log.Error("offline queue of a deleted destination not purged", "destination_id", id, "err", err)
	} else if n > 0 {
		p.log.Warn("destination deleted with records still queued; they are discarded", "destination_id", id, "records", n)
	}
}

// Close stops every destination; their workers queue what they held.
func (p *Router) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, r := range p.dests {
		p.stopDest(r)
		delete(p.dests, id)
	}
	if p.cancel != nil {
		p.cancel()
	}
	empty := []*route{}
	p.routes.Store(&empty)
	p.st, p.queue, p.seq = nil, nil, nil
	p.releaseLocked()
	// The next Open (a soft reboot) starts with endpoints that wait again.
	next := make(chan struct{})
	p.loaded.Store(&next)
}

// Release lets batches stop waiting for routes that will not come: the
// agent is tearing down before the publishing phase ran. They are routed
// nowhere.
func (p *Router) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked()
}

func (p *Router) releaseLocked() {
	ch := *p.loaded.Load()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// EndpointTopic is the topic an endpoint's batches are published under
// and the subscriptions' filters are matched against: its MQTT topic,
// else its name.
func EndpointTopic(ep adapters.Endpoint) string {
	if ep.MQTTTopic != "" {
		return ep.MQTTTopic
	}
	return ep.Name
}

func (r *route) matches(topic string) bool {
	if len(r.sub.Topics) == 0 {
		return true
	}
	for _, f := range r.sub.Topics {
		if mqttx.MatchTopic(f, topic) {
			return true
		}
	}
	return false
}

// Deliver routes one batch of ep. It waits for the first load of the
// routes (or ctx), then hands each matching subscription's payload to its
// destination's worker, which never waits for the destination.
func (p *Router) Deliver(ctx context.Context, ep adapters.Endpoint, b batch.Batch) int {
	loaded := *p.loaded.Load()
	select {
	case <-loaded:
	default:
		select {
		case <-loaded:
		case <-ctx.Done():
			return 0
		}
	}
	routes := p.routes.Load()
	if routes == nil {
		return 0
	}
	topic := EndpointTopic(ep)
	sent := 0
	// One msgId per batch, drawn when the first custom payload needs it:
	// every destination that gets the batch in the custom format sees the
	// same identifier for the same message.
	var msgID string
	for _, r := range *routes {
		if !r.matches(topic) {
			continue
		}
		it, err := p.encode(ctx, r, ep, b, topic, &msgID)
		if err != nil {
			if _, seen := p.warned.LoadOrStore(r.sub.ID, true); !seen {
				p.log.Warn("subscription cannot publish", "subscription", r.sub.ID, "destination", r.d.row.Name, "endpoint", ep.Name, "err", err)
			}
			continue
		}
		if it.Payload == nil {
			continue
		}
		if err := r.d.w.Offer(ctx, it); err != nil {
			// Counted and logged, rate-limited, by the worker.
			p.log.Debug("batch not queued", "destination", r.d.row.Name, "endpoint", ep.Name, "msg_id", it.MsgID, "err", err)
			continue
		}
		sent++
	}
	return sent
}

// encode builds the payload of b for one route.
func (p *Router) encode(ctx context.Context, r *route, ep adapters.Endpoint, b batch.Batch, topic string, msgID *string) (outbound.Item, error) {
	target := r.d.t.Topic(r.topic, topic)
	if target == "" {
		if r.d.row.Type == dest.TypePlatform {
			return outbound.Item{}, errors.New("the agent is not provisioned: the platform destination has no topic until it is")
		}
		return outbound.Item{}, errors.New("route_json.topic is required for this destination")
	}
	if r.d.row.Type == "tsdb" {
		lp := dest.LineProtocol(b)
		if len(lp) == 0 {
			return outbound.Item{Topic: target}, nil // nothing GOOD to write
		}
		return outbound.Item{Topic: target, Payload: lp}, nil
	}
	id := ""
	if r.format == payload.Custom {
		if *msgID == "" {
			n, err := p.seq.Next(ctx)
			if err != nil {
				return outbound.Item{}, fmt.Errorf("message sequence: %w", err)
			}
			if *msgID, err = codec.FormatMsgID(*p.kid.Load(), n); err != nil {
				return outbound.Item{}, err
			}
		}
		id = *msgID
	}
	doc, err := payload.Build(r.format, b, payload.Options{Endpoint: ep.Name, Protocol: ep.Protocol, MsgID: id})
	if err != nil {
		return outbound.Item{}, err
	}
	body, _, err := r.comp.Encode(doc)
	if err != nil {
		return outbound.Item{}, err
	}
	return outbound.Item{MsgID: id, Topic: target, Payload: body}, nil
}

// DestinationStatus is one destination's part of GET /v1/buffer/status.
type DestinationStatus struct {
	ID        int64           `json:"id"`
	Name      string          `json:"name"`
	Type      string          `json:"type"`
	Transport dest.Status     `json:"transport"`
	Worker    outbound.Status `json:"publish"`
}

// running returns the running destinations, so callers read their
// workers without holding p.mu.
func (p *Router) running() []*destRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Values(p.dests))
}

// Statuses reports every running destination.
func (p *Router) Statuses(ctx context.Context) ([]DestinationStatus, error) {
	runs := p.running()
	out := make([]DestinationStatus, 0, len(runs))
	for _, r := range runs {
		ws, err := r.w.Status(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, DestinationStatus{ID: r.row.ID, Name: r.row.Name, Type: r.row.Type, Transport: r.t.Status(), Worker: ws})
	}
	return out, nil
}

// platformRuns returns the running platform destinations, for heartbeats.
func (p *Router) platformRuns() []*destRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*destRun
	for _, r := range p.dests {
		if r.row.Type == "platform" {
			out = append(out, r)
		}
	}
	return out
}

// SendEphemeral offers body on topic (relative to each destination's own
// topic prefix) to every platform destination that is connected and not
// buffering, never queueing it: heartbeats that cannot go out now are
// dropped, so an outage silences them instead of replaying stale ones. It
// reports whether one destination took it.
func (p *Router) SendEphemeral(ctx context.Context, topic string, body []byte) bool {
	sent := false
	for _, r := range p.platformRuns() {
		if !r.t.Connected() || r.w.Mode() == outbound.ModeBufferOnly {
			continue
		}
		it := outbound.Item{Topic: r.t.Topic("", topic), Payload: body, Ephemeral: true}
		if err := r.w.Offer(ctx, it); err != nil {
			p.log.Debug("ephemeral message not sent", "topic", topic, "destination", r.row.Name, "err", err)
			continue
		}
		sent = true
	}
	return sent
}

// ApplyReceipts deletes the records that r, a delivery receipt of the
// cloud (control.CmdReceipts), covers from the queue of every running
// destination with receipts on (docs/agent-delivery.md, section Delivery
// receipts), and returns how many it deleted. Destinations without
// receipts ignore it: the cloud confirms only what reached it.
func (p *Router) ApplyReceipts(ctx context.Context, r control.Receipts) (int64, error) {
	var total int64
	var errs []error
	for _, run := range p.running() {
		n, err := run.w.ApplyReceipts(ctx, r)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}
