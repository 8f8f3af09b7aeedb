package dest

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
)

// Probe backoff of an unreachable tsdb destination.
const (
	tsdbProbeBase = time.Second
	tsdbProbeMax  = 30 * time.Second
)

// maxErrorBody bounds how much of an error answer is read for its message.
const maxErrorBody = 4 << 10

// tsdb states, as Status reports them.
const (
	tsdbStopped     = "stopped"
	tsdbConnecting  = "connecting"
	tsdbConnected   = "connected"
	tsdbUnreachable = "unreachable"
)

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// tsdbTransport writes line protocol to an InfluxDB v2 write API. HTTP has
// no connection to watch, so "connected" means the last request or probe
// got an HTTP answer; after a transient failure a goroutine probes the
// server with backoff until it answers again.
type tsdbTransport struct {
	id       int64
	log      *slog.Logger
	base     string // the configured URL
	writeURL string
	probeURL string
	token    string
	client   *http.Client
	changes  chan struct{}
	kick     chan struct{} // cap 1: probe now
	// Probe backoff; tests shorten it.
	backoffBase, backoffMax time.Duration

	mu             sync.Mutex
	state          string
	lastErr        string
	connectedSince time.Time
	probes         uint64
	// answered counts writes in a row the server refused with errAnswered;
	// holdUntil is when the prober may call the server reachable again.
	answered  int
	holdUntil time.Time
	started   bool
	stopped   bool
	cancel    context.CancelFunc
	done      chan struct{}
}

// errAnswered marks a write the server answered with a status that is not
// the message's fault (401, 403, 408, 429, 5xx). The server is up, so a
// health probe would say "reachable" at once; what must wait is the next
// write, with backoff, or a wrong token would be retried in a tight loop.
var errAnswered = errors.New("the server refused the write")

func newTSDB(id int64, c tsdbConfig, env Env) (*tsdbTransport, error) {
	base := strings.TrimSuffix(c.URL, "/")
	q := url.Values{"org": {c.Org}, "bucket": {c.Bucket}, "precision": {"ms"}}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   2,
		ForceAttemptHTTP2:     true,
		// The body is already gzip; the answer is small.
		DisableCompression: true,
	}
	return &tsdbTransport{
		id:          id,
		log:         env.logger().With("destination_id", id, "destination_type", TypeTSDB),
		base:        base,
		writeURL:    base + "/api/v2/write?" + q.Encode(),
		probeURL:    base + "/health",
		token:       c.Token,
		client:      &http.Client{Transport: tr, Timeout: 60 * time.Second},
		changes:     make(chan struct{}, 1),
		kick:        make(chan struct{}, 1),
		backoffBase: tsdbProbeBase,
		backoffMax:  tsdbProbeMax,
		state:       tsdbStopped,
	}, nil
}

// Start implements Transport: the first probe runs in the background.
func (t *tsdbTransport) Start(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started || t.stopped {
		return errors.New("dest: Start called twice or after Stop")
	}
	t.started = true
	t.state = tsdbConnecting
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.cancel, t.done = cancel, make(chan struct{})
	go t.prober(pctx, t.done)
	return nil
}

// Stop implements Transport.
func (t *tsdbTransport) Stop(ctx context.Context) error {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return nil
	}
	t.stopped = true
	wasConnected := t.state == tsdbConnected
	t.state, t.connectedSince = tsdbStopped, time.Time{}
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	if wasConnected {
		signal(t.changes)
	}
	var err error
	if cancel != nil {
		cancel()
		select {
		case <-done:
		case <-ctx.Done():
			err = fmt.Errorf("tsdb prober did not end: %w", ctx.Err())
		}
	}
	t.client.CloseIdleConnections()
	return err
}

// prober probes while the server is not known to answer, with backoff,
// and sleeps while it is.
func (t *tsdbTransport) prober(ctx context.Context, done chan struct{}) {
	defer close(done)
	delay := t.backoffBase
	for ctx.Err() == nil {
		if t.Connected() {
			select {
			case <-ctx.Done():
				return
			case <-t.kick:
				delay = t.backoffBase
			}
			continue
		}
		t.mu.Lock()
		hold := time.Until(t.holdUntil)
		t.mu.Unlock()
		if hold > 0 && !lifecycle.Sleep(ctx, hold) {
			return
		}
		if err := t.probe(ctx); err == nil {
			t.setConnected()
			delay = t.backoffBase
			continue
		} else if ctx.Err() == nil {
			t.setDisconnected(err)
		}
		if !lifecycle.Sleep(ctx, delay) {
			return
		}
		delay = min(delay*2, t.backoffMax)
	}
}

// probe asks the server's health endpoint; any HTTP answer means it is
// reachable (the write itself tells whether it accepts us).
func (t *tsdbTransport) probe(ctx context.Context) error {
	t.mu.Lock()
	t.probes++
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.probeURL, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", t.probeURL, err)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	return nil
}

func (t *tsdbTransport) setConnected() {
	t.mu.Lock()
	changed := t.state != tsdbConnected && !t.stopped
	if changed {
		t.state, t.lastErr, t.connectedSince = tsdbConnected, "", time.Now()
	}
	t.mu.Unlock()
	if changed {
		t.log.Info("tsdb destination reachable", "url", redactURL(t.base))
		signal(t.changes)
	}
}

func (t *tsdbTransport) setDisconnected(err error) {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	was := t.state
	t.state, t.lastErr, t.connectedSince = tsdbUnreachable, err.Error(), time.Time{}
	if errors.Is(err, errAnswered) {
		t.answered++
		t.holdUntil = time.Now().Add(min(t.backoffBase<<min(t.answered-1, 16), t.backoffMax))
	}
	t.mu.Unlock()
	if was == tsdbConnected {
		t.log.Warn("tsdb destination unreachable", "url", redactURL(t.base), "err", err)
		signal(t.changes)
		signal(t.kick)
	}
}

// Connected implements Transport.
func (t *tsdbTransport) Connected() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == tsdbConnected
}

// Changes implements Transport.
func (t *tsdbTransport) Changes() <-chan struct{} { return t.changes }

// Send implements Transport: one write request per message, in order.
// After a transient failure the rest are not tried, so that they keep
// their order behind the failed one.
func (t *tsdbTransport) Send(ctx context.Context, msgs []Message) []error {
	errs := make([]error, len(msgs))
	failed := error(nil)
	if !t.Connected() {
		failed = fmt.Errorf("tsdb: %w: %s", ErrNotConnected, t.Status().State)
	}
	for i, m := range msgs {
		if failed != nil {
			errs[i] = failed
			continue
		}
		err := t.write(ctx, m.Payload)
		errs[i] = err
		if err == nil {
			t.mu.Lock()
			t.answered = 0
			t.mu.Unlock()
		}
		if err != nil && !IsRejected(err) {
			failed = fmt.Errorf("tsdb: %w: not sent after an earlier message failed", ErrNotConnected)
			if ctx.Err() == nil {
				t.setDisconnected(err)
			}
		}
	}
	return errs
}

// write posts one gzip body. Line protocol without lines is delivered by
// definition: there is nothing to write.
func (t *tsdbTransport) write(ctx context.Context, payload []byte) error {
	if len(strings.TrimSpace(string(payload))) == 0 {
		return nil
	}
	pr, pw := io.Pipe()
	zipped := make(chan struct{})
	go func() {
		defer close(zipped)
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(pw)
		_, err := zw.Write(payload)
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
		gzipWriters.Put(zw)
		_ = pw.CloseWithError(err)
	}()
	// Whatever way the request ends, the gzip goroutine must too.
	defer func() { _ = pr.Close(); <-zipped }()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.writeURL, pr)
	if err != nil {
		return fmt.Errorf("tsdb write: %w: %w", ErrNotConnected, err)
	}
	req.Header.Set("Authorization", "Token "+t.token)
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("tsdb write: %w: %w", ErrNotConnected, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	msg := errorMessage(resp)
	switch {
	// A refused token, a missing bucket or org is the destination's problem, not the
	// message's: counted as a rejection it would use up every record's
	// retries and dead-letter an outage's worth of data. The records wait
	// until an operator fixes the credentials.
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden,
		resp.StatusCode == http.StatusNotFound, // a bucket or org that does not exist (yet)
		resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode >= 500, resp.StatusCode < 400:
		return fmt.Errorf("tsdb write: %w: %w: %s: %s", ErrNotConnected, errAnswered, resp.Status, msg)
	}
	return Rejectedf("tsdb write: %s: %s", resp.Status, msg)
}

// errorMessage is the server's explanation: InfluxDB answers
// {"code":..,"message":..}, VictoriaMetrics plain text.
func errorMessage(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		return e.Message
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	return "(no message)"
}

// Topic implements Transport: HTTP has no topics, but the route topic is
// expanded like the others' so the caller's checks stay uniform.
func (t *tsdbTransport) Topic(routeTopic, endpointTopic string) string {
	return expand(routeTopic, map[string]string{"mqttTopic": endpointTopic})
}

// Status implements Transport.
func (t *tsdbTransport) Status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Status{
		Type: TypeTSDB, Connected: t.state == tsdbConnected, State: t.state, LastError: t.lastErr,
		Target: redactURL(t.base), ConnectedSince: t.connectedSince, ReconnectAttempts: t.probes,
	}
}

// redactURL drops credentials from a URL for display.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Redacted()
}

var _ Transport = (*tsdbTransport)(nil)
