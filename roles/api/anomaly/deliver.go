package anomaly

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
)

// Webhook headers (docs/anomaly-cloud.md, section Verifying a webhook).
const (
	// HeaderSignature carries "sha256=" and the hex HMAC-SHA256, keyed
	// with the alert rule's secret, of the timestamp, a dot and the body.
	HeaderSignature = "X-Edgeplat-Signature"
	// HeaderTimestamp is the Unix time in seconds the signature was made
	// at; receivers refuse one far from their clock, so a captured
	// request cannot be replayed later.
	HeaderTimestamp = "X-Edgeplat-Timestamp"
	// HeaderEvent names the notification: incident.opened,
	// incident.recovered, incident.resolved or edge.anomaly_alert.
	HeaderEvent = "X-Edgeplat-Event"
)

// Delivery bounds.
const (
	noticeQueue  = 1000
	jobQueue     = 1000
	workers      = 4
	sendTimeout  = 10 * time.Second
	maxAttempts  = 5
	maxErrorText = 300
)

// Sign returns the signature header value of body sent at ts (Unix
// seconds) with secret: "sha256=" + hex(HMAC-SHA256(secret, ts + "." +
// body)).
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Notification is the JSON every target receives: a webhook's body, the
// live stream's "anomaly" event, the data an e-mail describes.
type Notification struct {
	Event     string         `json:"event"`
	AlertRule map[string]any `json:"alertRule,omitempty"`
	Incident  *Incident      `json:"incident,omitempty"`
	EdgeAlert *Event         `json:"edgeAlert,omitempty"`
	SentAt    time.Time      `json:"sentAt"`
}

// notice is something that happened, before the alert rules are matched.
type notice struct {
	tenant   string
	event    string
	incident *Incident
	edge     *Event
}

// job is one notification to one target.
type job struct {
	alert   AlertRule
	tenant  string
	event   string
	body    []byte
	subject string
	text    string
	attempt int
}

// Dispatcher delivers notifications to the alert rules' targets. Incident
// and EdgeAlert only queue (dropping, counted, when the queue is full), so
// the evaluator never waits on a target; workers send, and a failed send
// is retried with backoff (1 s, 2 s, 4 s, 8 s: five attempts) from a
// timer, not a sleeping worker, so one dead webhook does not hold the
// others. Each outcome is kept on the alert rule (lastDelivery) and
// counted.
type Dispatcher struct {
	st      *store
	d       *Deps
	m       *metrics
	client  *http.Client
	notices chan notice
	jobs    chan job
	backoff func(attempt int) time.Duration

	mu     sync.Mutex
	timers map[*time.Timer]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newDispatcher(st *store, d *Deps, m *metrics) *Dispatcher {
	return &Dispatcher{st: st, d: d, m: m, notices: make(chan notice, noticeQueue), jobs: make(chan job, jobQueue),
		timers:  map[*time.Timer]struct{}{},
		client:  &http.Client{Timeout: sendTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		backoff: func(attempt int) time.Duration { return time.Second << min(attempt-1, 3) }}
}

// Name implements lifecycle.Service.
func (p *Dispatcher) Name() string { return "api-anomaly-alerts" }

// Start implements lifecycle.Service.
func (p *Dispatcher) Start(context.Context) error { return nil }

// Stop implements lifecycle.Service; Run has returned by then.
func (p *Dispatcher) Stop(context.Context) error { return nil }

// Run matches notices to alert rules and sends until ctx ends; pending
// retries are dropped then.
func (p *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { p.work(ctx) })
	}
	for {
		select {
		case <-ctx.Done():
			p.mu.Lock()
			p.closed = true
			for t := range p.timers {
				if t.Stop() {
					p.wg.Done()
				}
			}
			p.mu.Unlock()
			p.wg.Wait()
			wg.Wait()
			return nil
		case n := <-p.notices:
			p.route(ctx, n)
		}
	}
}

// Incident queues the news of an incident (event opened, recovered or
// resolved).
func (p *Dispatcher) Incident(inc Incident, event string) {
	p.offer(notice{tenant: inc.TenantUUID, event: "incident." + event, incident: &inc})
}

// EdgeAlert queues an agent's own anomaly alert.
func (p *Dispatcher) EdgeAlert(tenant string, ev Event) {
	p.offer(notice{tenant: tenant, event: "edge." + control.EventAnomalyAlert, edge: &ev})
}

func (p *Dispatcher) offer(n notice) {
	select {
	case p.notices <- n:
	default:
		p.m.deliveries.WithLabelValues("any", "dropped").Inc()
	}
}

// route finds the alert rules n concerns and queues a job for each.
func (p *Dispatcher) route(ctx context.Context, n notice) {
	rules, err := p.st.alertRules(ctx, n.tenant, true)
	if err != nil {
		if ctx.Err() == nil {
			p.d.Log.Warn("load alert rules", "tenant", n.tenant, "err", err)
			p.m.deliveries.WithLabelValues("any", "dropped").Inc()
		}
		return
	}
	for _, a := range rules {
		switch {
		case n.incident != nil && !a.matches(n.incident.RuleID, n.incident.Severity, max(n.incident.Score, n.incident.PeakScore)):
			continue
		case n.edge != nil && (!a.Condition.IncludeEdgeAlerts || severityRank(n.edge.Severity) < severityRank(a.Condition.MinSeverity)):
			continue
		}
		body, err := json.Marshal(Notification{Event: n.event, AlertRule: map[string]any{"id": a.ID, "name": a.Name},
			Incident: n.incident, EdgeAlert: n.edge, SentAt: p.d.Now().UTC()})
		if err != nil {
			p.d.Log.Error("encode notification", "err", err)
			continue
		}
		subject, text := describe(n)
		select {
		case p.jobs <- job{alert: a, tenant: n.tenant, event: n.event, body: body, subject: subject, text: text}:
		default:
			p.m.deliveries.WithLabelValues(a.Target.Type, "dropped").Inc()
		}
	}
}

// describe is an e-mail's subject and text.
func describe(n notice) (string, string) {
	if n.incident != nil {
		i := n.incident
		subject := fmt.Sprintf("[edgeplat] %s %s: %s on %s", i.Severity, n.event, i.RuleName, i.Metric)
		text := fmt.Sprintf("Rule: %s (%s)\nSeverity: %s\nAgent: %s\nDevice: %s\nMetric: %s\nValue: %g\nScore: %g\nOpened: %s\n",
			i.RuleName, i.RuleType, i.Severity, i.AgentUUID, i.DeviceName, i.Metric, i.Value, i.Score, i.OpenedAt.Format(time.RFC3339))
		if i.ClosedAt != nil {
			text += fmt.Sprintf("Closed: %s (%s)\n", i.ClosedAt.Format(time.RFC3339), i.CloseReason)
		}
		return subject, text
	}
	e := n.edge
	return fmt.Sprintf("[edgeplat] %s anomaly alert from agent %s", e.Severity, e.AgentUUID),
		fmt.Sprintf("Agent: %s\nSeverity: %s\nEvent: %s\nAt: %s\nData: %s\n", e.AgentUUID, e.Severity, e.ID, e.Timestamp.Format(time.RFC3339), e.Data)
}

func (p *Dispatcher) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-p.jobs:
			p.attempt(ctx, j)
		}
	}
}

func (p *Dispatcher) attempt(ctx context.Context, j job) {
	j.attempt++
	err := p.send(ctx, j)
	if ctx.Err() != nil {
		return
	}
	at := p.d.Now().UTC().Truncate(time.Microsecond)
	d := Delivery{Status: "delivered", Attempts: j.attempt, At: &at}
	switch {
	case err == nil:
		p.m.deliveries.WithLabelValues(j.alert.Target.Type, "delivered").Inc()
	case j.attempt < maxAttempts && p.retry(j):
		d.Status, d.Error = "retrying", clip(err.Error())
		p.m.deliveries.WithLabelValues(j.alert.Target.Type, "retried").Inc()
	default:
		d.Status, d.Error = "failed", clip(err.Error())
		p.m.deliveries.WithLabelValues(j.alert.Target.Type, "failed").Inc()
		p.d.Log.Warn("alert delivery failed", "alert_rule", j.alert.ID, "target", j.alert.Target.Type, "attempts", j.attempt, "err", err)
	}
	if err := p.st.recordDelivery(ctx, j.alert.ID, d); err != nil && ctx.Err() == nil {
		p.d.Log.Warn("record alert delivery", "alert_rule", j.alert.ID, "err", err)
	}
}

// retry queues j again after its backoff; false when the dispatcher is
// stopping.
func (p *Dispatcher) retry(j job) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(p.backoff(j.attempt), func() {
		defer p.wg.Done()
		p.mu.Lock()
		delete(p.timers, t)
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		select {
		case p.jobs <- j:
		default:
			p.m.deliveries.WithLabelValues(j.alert.Target.Type, "dropped").Inc()
		}
	})
	p.timers[t] = struct{}{}
	return true
}

func (p *Dispatcher) send(ctx context.Context, j job) error {
	switch j.alert.Target.Type {
	case TargetWebhook:
		return p.webhook(ctx, j)
	case TargetEmail:
		if p.d.Mailer == nil {
			return errors.New("no mail server is configured")
		}
		ctx, cancel := context.WithTimeout(ctx, sendTimeout)
		defer cancel()
		return p.d.Mailer.Send(ctx, j.alert.Target.To, j.subject, j.text)
	case TargetLive:
		if p.d.Streams == nil {
			return errors.New("no stream store to publish on")
		}
		u, err := codec.ParseUUID(j.tenant)
		if err != nil {
			return fmt.Errorf("tenant %s: %w", j.tenant, err)
		}
		return p.d.Streams.Publish(ctx, Channel(codec.EncodeID(u)), j.body)
	}
	return fmt.Errorf("unknown target type %q", j.alert.Target.Type)
}

func (p *Dispatcher) webhook(ctx context.Context, j job) error {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.alert.Target.URL, bytes.NewReader(j.body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	ts := p.d.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "edgeplat-alerts")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(j.alert.secret, ts, j.body))
	req.Header.Set(HeaderEvent, j.event)
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook post: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// Channel is the pub/sub channel of a tenant's anomaly notifications to
// live targets, which GET /agents/events relays as "anomaly" events.
// tenant is the 22-character id (codec.EncodeID).
func Channel(tenant string) string { return "tenant:" + tenant + ":anomaly" }

func clip(s string) string {
	if len(s) > maxErrorText {
		return s[:maxErrorText] + "..."
	}
	return s
}
