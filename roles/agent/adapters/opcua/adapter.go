package opcua

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"
)

// errNotConnected is returned by Poll and Listen before Connect succeeded
// or after Close.
var errNotConnected = adapters.WithCode(adapters.CodeDeviceOffline, errors.New("opc-ua session is not connected"))

// Pushes reports whether the endpoint uses monitored items (subscribe)
// rather than polling.
func (a *Adapter) Pushes() bool { return a.conn.Subscribe }

// Adapter reads the nodes of one OPC-UA endpoint.
type Adapter struct {
	ep     adapters.Endpoint
	conn   Connection
	points []point
	log    *slog.Logger
	cert   generatedCert

	mu     sync.Mutex
	client *opcua.Client
	// nodes[i] is the node of points[i] on the current server, nil when
	// its namespace URI is unknown there (nodeErrs[i] says why). Set by
	// Connect, read by Poll and Listen on the runner's goroutine.
	nodes    []*ua.NodeID
	nodeErrs []error

	stats stats
}

// Connect opens the secure channel and the session.
func (a *Adapter) Connect(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client != nil {
		closeClient(a.client, a.timeout())
		a.client = nil
	}
	sec := a.conn.security()
	sec.generated = &a.cert
	c, err := dial(ctx, sec)
	if err != nil {
		a.stats.noteError(err)
		return fmt.Errorf("opcua endpoint %q: %w", a.ep.Name, err)
	}
	a.client = c
	a.resolve(c.Namespaces())
	a.stats.noteConnected(time.Now())
	a.log.Info("opc-ua session open", "url", a.conn.EndpointURL,
		"securityMode", orDefault(a.conn.SecurityMode, "None"), "securityPolicy", strings.TrimPrefix(sec.policyURI, ua.SecurityPolicyURIPrefix))
	return nil
}

// resolve maps every point to its node on the connected server.
func (a *Adapter) resolve(namespaces []string) {
	a.nodes = make([]*ua.NodeID, len(a.points))
	a.nodeErrs = make([]error, len(a.points))
	for i, p := range a.points {
		if p.nsURI == "" {
			a.nodes[i] = p.node
			continue
		}
		ns := slices.Index(namespaces, p.nsURI)
		if ns < 0 || ns > math.MaxUint16 {
			a.nodeErrs[i] = adapters.WithCode(adapters.CodeReadError,
				fmt.Errorf("node %s: the server has no namespace %q", p.Register, p.nsURI))
			continue
		}
		n, err := ua.ParseNodeID(fmt.Sprintf("ns=%d;%s", ns, strings.SplitN(p.Register, ";", 2)[1]))
		if err != nil {
			a.nodeErrs[i] = adapters.WithCode(adapters.CodeReadError, fmt.Errorf("node %s: %w", p.Register, err))
			continue
		}
		a.nodes[i] = n
	}
}

// unresolved is the BAD reading of every point without a node.
func (a *Adapter) unresolved(now time.Time) []adapters.Reading {
	var out []adapters.Reading
	for i, p := range a.points {
		if a.nodeErrs[i] != nil {
			r := adapters.BadReading(a.ep.Name, a.ep.UUID, p.DataPoint, now, a.nodeErrs[i])
			r.Protocol = Protocol
			out = append(out, r)
		}
	}
	return out
}

// Close ends the session and the secure channel, and with them gopcua's
// goroutines. It is safe to call more than once.
func (a *Adapter) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client == nil {
		return nil
	}
	closeClient(a.client, a.timeout())
	a.client = nil
	a.stats.noteClosed()
	return nil
}

func (a *Adapter) timeout() time.Duration {
	return time.Duration(a.conn.TimeoutMS) * time.Millisecond
}

// session returns the client if its session is still up. gopcua marks the
// client Disconnected when the channel fails and, without auto-reconnect,
// never brings it back, so anything else is a lost connection.
func (a *Adapter) session() (*opcua.Client, error) {
	a.mu.Lock()
	c := a.client
	a.mu.Unlock()
	if c == nil {
		return nil, errNotConnected
	}
	if st := c.State(); st != opcua.Connected {
		return nil, adapters.WithCode(adapters.CodeDeviceOffline, fmt.Errorf("opc-ua connection to %s is %s", a.conn.EndpointURL, st))
	}
	return c, nil
}

// Poll reads every data point with one Read request.
func (a *Adapter) Poll(ctx context.Context) ([]adapters.Reading, error) {
	c, err := a.session()
	if err != nil {
		err = fmt.Errorf("opcua endpoint %q: %w", a.ep.Name, err)
		return a.allBad(err), err
	}
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnBoth}
	var at []int // at[k] is the point of NodesToRead[k]
	for i := range a.points {
		if a.nodes[i] != nil {
			req.NodesToRead = append(req.NodesToRead, &ua.ReadValueID{NodeID: a.nodes[i], AttributeID: ua.AttributeIDValue})
			at = append(at, i)
		}
	}
	if len(at) == 0 {
		// A Read of nothing is BadNothingToDo, which is no reason to
		// reconnect an endpoint that simply has no readable points.
		return a.unresolved(time.Now().UTC()), nil
	}
	rctx, cancel := context.WithTimeout(ctx, a.timeout())
	defer cancel()
	start := time.Now()
	res, err := c.Read(rctx, req)
	if err == nil && res.ResponseHeader != nil && !isGood(res.ResponseHeader.ServiceResult) {
		err = res.ResponseHeader.ServiceResult
	}
	if err == nil && len(res.Results) != len(at) {
		err = adapters.WithCode(adapters.CodeBadData, fmt.Errorf("server answered %d values for %d nodes", len(res.Results), len(at)))
	}
	if err != nil {
		err = classify(fmt.Errorf("opcua endpoint %q: read: %w", a.ep.Name, err))
		return a.allBad(err), err
	}
	a.stats.noteRead(time.Since(start))
	now := time.Now().UTC()
	readings := make([]adapters.Reading, 0, len(a.points))
	for k, i := range at {
		readings = append(readings, a.reading(a.points[i], res.Results[k], now))
	}
	return append(readings, a.unresolved(now)...), nil
}

// allBad is the BAD reading of every data point for one shared error.
func (a *Adapter) allBad(err error) []adapters.Reading {
	now := time.Now().UTC()
	a.stats.noteError(err)
	out := make([]adapters.Reading, len(a.points))
	for i, p := range a.points {
		out[i] = adapters.BadReading(a.ep.Name, a.ep.UUID, p.DataPoint, now, err)
		out[i].Protocol = Protocol
	}
	return out
}

// Diagnostics reports the session and counters for the devices API.
func (a *Adapter) Diagnostics() any {
	a.mu.Lock()
	state := "closed"
	if a.client != nil {
		state = a.client.State().String()
	}
	a.mu.Unlock()
	d := a.stats.snapshot()
	d.EndpointURL = a.conn.EndpointURL
	d.SecurityMode = orDefault(a.conn.SecurityMode, "None")
	d.SecurityPolicy = orDefault(a.conn.SecurityPolicy, "None")
	d.Subscribe = a.conn.Subscribe
	d.State = state
	d.Nodes = len(a.points)
	return d
}

// Diagnostics is what Adapter.Diagnostics returns.
type Diagnostics struct {
	EndpointURL    string    `json:"endpointUrl"`
	SecurityMode   string    `json:"securityMode"`
	SecurityPolicy string    `json:"securityPolicy"`
	Subscribe      bool      `json:"subscribe"`
	State          string    `json:"state"`
	Nodes          int       `json:"nodes"`
	Reads          int64     `json:"reads"`
	Notifications  int64     `json:"notifications"`
	Errors         int64     `json:"errors"`
	LastError      string    `json:"lastError,omitempty"`
	LastReadMS     int64     `json:"lastReadMs"`
	ConnectedAt    time.Time `json:"connectedAt,omitzero"`
	Connects       int64     `json:"connects"`
}

// stats are counters the runner's goroutine writes and Diagnostics reads.
type stats struct {
	mu            sync.Mutex
	reads         int64
	notifications int64
	errors        int64
	lastError     string
	lastRead      time.Duration
	connectedAt   time.Time
	connects      int64
}

func (s *stats) noteRead(d time.Duration) {
	s.mu.Lock()
	s.reads++
	s.lastRead = d
	s.mu.Unlock()
}

func (s *stats) noteNotifications(n int) {
	s.mu.Lock()
	s.notifications += int64(n)
	s.mu.Unlock()
}

func (s *stats) noteError(err error) {
	s.mu.Lock()
	s.errors++
	s.lastError = err.Error()
	s.mu.Unlock()
}

func (s *stats) noteConnected(at time.Time) {
	s.mu.Lock()
	s.connects++
	s.connectedAt = at
	s.mu.Unlock()
}

func (s *stats) noteClosed() {
	s.mu.Lock()
	s.connectedAt = time.Time{}
	s.mu.Unlock()
}

func (s *stats) snapshot() Diagnostics {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Diagnostics{
		Reads: s.reads, Notifications: s.notifications, Errors: s.errors, LastError: s.lastError,
		LastReadMS: s.lastRead.Milliseconds(), ConnectedAt: s.connectedAt, Connects: s.connects,
	}
}

// Interface guards.
var (
	_ adapters.Driver    = Driver{}
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Listener  = (*Adapter)(nil)
	_ adapters.Diagnoser = (*Adapter)(nil)
	_ adapters.Pusher    = (*Adapter)(nil)
)
