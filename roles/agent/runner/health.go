package runner

import (
	"sort"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Health is the live health of a running endpoint (the endpoint's `health`
// field). Status is State in lower case.
type Health struct {
	Status               string     `json:"status"`
	State                string     `json:"state"`
	Connected            bool       `json:"connected"`
	CommunicationQuality float64    `json:"communicationQuality"`
	LastSeen             *time.Time `json:"lastSeen"`
	LastPoll             *time.Time `json:"lastPoll"`
	LastError            string     `json:"lastError,omitempty"`
	ResponseTimeMS       float64    `json:"responseTimeMs"`
	// Reason says why an enabled endpoint does not run (the agent's run
	// state stopped it); the runner leaves it empty.
	Reason string `json:"reason,omitempty"`
}

// DeviceSummary is one entry of GET /v1/adapters/:protocol/devices.
type DeviceSummary struct {
	DeviceName           string     `json:"deviceName"`
	EndpointUUID         string     `json:"endpointUuid"`
	Protocol             string     `json:"protocol"`
	Status               string     `json:"status"`
	Connected            bool       `json:"connected"`
	LastSeen             *time.Time `json:"lastSeen"`
	CommunicationQuality float64    `json:"communicationQuality"`
}

// PointStatus is the last value of one data point.
type PointStatus struct {
	Name        string     `json:"name"`
	Register    string     `json:"register"`
	Type        string     `json:"type,omitempty"`
	Unit        string     `json:"unit,omitempty"`
	Value       any        `json:"value"`
	Quality     string     `json:"quality,omitempty"`
	QualityCode string     `json:"qualityCode,omitempty"`
	Timestamp   *time.Time `json:"timestamp"`
}

// DeviceDetail is GET /v1/adapters/:protocol/devices/:deviceName: health,
// every data point's last value, quality and time, and the adapter's own
// protocol diagnostics when it has them.
type DeviceDetail struct {
	DeviceSummary
	Health      Health        `json:"health"`
	DataPoints  []PointStatus `json:"dataPoints"`
	Diagnostics any           `json:"diagnostics,omitempty"`
}

// Metrics are a polled device's read statistics since the endpoint started.
type Metrics struct {
	DeviceName      string  `json:"deviceName"`
	Since           string  `json:"since"`
	Polls           int64   `json:"polls"`
	PollFailures    int64   `json:"pollFailures"`
	ReadsGood       int64   `json:"readsGood"`
	ReadsBad        int64   `json:"readsBad"`
	ReadRatePerSec  float64 `json:"readRatePerSec"`
	ErrorRate       float64 `json:"errorRate"`
	PollLatencyMS   Latency `json:"pollLatencyMs"`
	ConnectFailures int64   `json:"connectFailures"`
}

// Latency summarises poll durations in milliseconds.
type Latency struct {
	Last float64 `json:"last"`
	Avg  float64 `json:"avg"`
	Max  float64 `json:"max"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func (e *endpointRun) health() Health {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.healthLocked()
}

func (e *endpointRun) healthLocked() Health {
	n := min(e.nOutcomes, qualityWindow)
	q := 0.0
	for i := range n {
		q += e.outcomes[i]
	}
	if n > 0 {
		q = float64(int(q/float64(n)*1000)) / 10 // percent, one decimal
	}
	return Health{
		Status: strings.ToLower(e.state), State: e.state, Connected: e.state == StateConnected,
		CommunicationQuality: q, LastSeen: timePtr(e.lastSeen), LastPoll: timePtr(e.lastPoll),
		LastError: e.lastError, ResponseTimeMS: ms(e.responseTime),
	}
}

func (e *endpointRun) summary() DeviceSummary {
	h := e.health()
	return DeviceSummary{DeviceName: e.ep.Name, EndpointUUID: e.ep.UUID, Protocol: e.ep.Protocol,
		Status: h.Status, Connected: h.Connected, LastSeen: h.LastSeen, CommunicationQuality: h.CommunicationQuality}
}

func (e *endpointRun) detail() DeviceDetail {
	d := DeviceDetail{DeviceSummary: e.summary()}
	e.mu.Lock()
	d.Health = e.healthLocked()
	seen := map[string]bool{}
	for _, dp := range e.ep.DataPoints {
		ps := PointStatus{Name: dp.Name, Register: dp.Register, Type: dp.Type, Unit: dp.Unit}
		if r, ok := e.points[dp.Name]; ok {
			ps.Value, ps.Quality, ps.QualityCode, ps.Timestamp = r.Value, r.Quality, r.QualityCode, timePtr(r.Timestamp)
		}
		seen[dp.Name] = true
		d.DataPoints = append(d.DataPoints, ps)
	}
	// Adapters without configured data points (MQTT) name their own.
	var extra []PointStatus
	for name, r := range e.points {
		if !seen[name] {
			extra = append(extra, PointStatus{Name: name, Unit: r.Unit, Value: r.Value, Quality: r.Quality,
				QualityCode: r.QualityCode, Timestamp: timePtr(r.Timestamp)})
		}
	}
	e.mu.Unlock()
	sort.Slice(extra, func(i, j int) bool { return extra[i].Name < extra[j].Name })
	d.DataPoints = append(d.DataPoints, extra...)
	if d.DataPoints == nil {
		d.DataPoints = []PointStatus{}
	}
	if dg, ok := e.adapter.(adapters.Diagnoser); ok {
		d.Diagnostics = dg.Diagnostics()
	}
	return d
}

func (e *endpointRun) metrics() (Metrics, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.listening {
		return Metrics{}, false
	}
	up := time.Since(e.started).Seconds()
	m := Metrics{DeviceName: e.ep.Name, Since: e.started.UTC().Format(time.RFC3339Nano), Polls: e.polls,
		ReadsGood: e.readsGood, ReadsBad: e.readsBad, PollFailures: e.pollFailures, ConnectFailures: e.connectTotal,
		PollLatencyMS: Latency{Last: ms(e.responseTime), Max: ms(e.latencyMax)}}
	if up > 0 {
		m.ReadRatePerSec = float64(int64(float64(e.readsGood+e.readsBad)/up*100)) / 100
	}
	if total := e.readsGood + e.readsBad; total > 0 {
		m.ErrorRate = float64(int64(float64(e.readsBad)/float64(total)*10000)) / 10000
	}
	if e.polls > 0 {
		m.PollLatencyMS.Avg = ms(e.latencySum / time.Duration(e.polls))
	}
	return m, true
}
