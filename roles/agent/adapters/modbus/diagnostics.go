package modbus

import (
	"time"
)

// Diagnostics is what GET /v1/adapters/modbus/devices/:deviceName shows
// at register level.
type Diagnostics struct {
	Transport string `json:"transport"`
	Address   string `json:"address"`
	Connected bool   `json:"connected"`
	// Blocks is the read plan; RequestsPerPoll is its length, the number
	// of requests a poll sends when nothing fails.
	Blocks          []BlockInfo `json:"blocks"`
	RequestsPerPoll int         `json:"requestsPerPoll"`
	Polls           uint64      `json:"polls"`
	// TotalRequests counts every request sent, reads and writes.
	TotalRequests uint64 `json:"totalRequests"`
	Writes        uint64 `json:"writes"`
	// TotalErrors counts failed requests and failed connects: exceptions,
	// undecodable answers and transport errors.
	TotalErrors uint64 `json:"totalErrors"`
	// LastError is the text of the last exception or error, with its time.
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
	LastPollAt  *time.Time `json:"lastPollAt,omitempty"`
	// LastPollRequests is how many requests the last poll sent; fewer than
	// RequestsPerPoll when a transport error cut it short.
	LastPollRequests   int     `json:"lastPollRequests"`
	LastPollDurationMs float64 `json:"lastPollDurationMs"`
}

// BlockInfo is one planned read request.
type BlockInfo struct {
	Area       string   `json:"area"`
	Unit       uint8    `json:"unit"`
	Start      uint16   `json:"start"`
	Count      uint16   `json:"count"`
	DataPoints []string `json:"dataPoints"`
}

type stats struct {
	connected        bool
	polls            uint64
	requests         uint64
	writes           uint64
	errors           uint64
	lastErr          string
	lastErrAt        time.Time
	lastPollAt       time.Time
	lastPollRequests int
	lastPollDuration time.Duration
}

// Diagnostics returns a snapshot of the plan and the counters. It is safe
// for concurrent use and does not wait for a poll in progress.
func (a *Adapter) Diagnostics() any {
	d := Diagnostics{
		Transport: a.cfg.Transport, Address: a.cfg.Address(),
		Blocks: make([]BlockInfo, len(a.blocks)), RequestsPerPoll: len(a.blocks),
	}
	for i, b := range a.blocks {
		names := make([]string, len(b.points))
		for j, p := range b.points {
			names[j] = a.points[p].dp.Name
		}
		d.Blocks[i] = BlockInfo{Area: b.area.String(), Unit: b.unit, Start: b.start, Count: b.count, DataPoints: names}
	}
	a.statsMu.Lock()
	defer a.statsMu.Unlock()
	s := a.stats
	d.Connected = s.connected
	d.Polls, d.TotalRequests, d.Writes, d.TotalErrors = s.polls, s.requests, s.writes, s.errors
	d.LastError = s.lastErr
	if !s.lastErrAt.IsZero() {
		t := s.lastErrAt
		d.LastErrorAt = &t
	}
	if !s.lastPollAt.IsZero() {
		t := s.lastPollAt
		d.LastPollAt = &t
	}
	d.LastPollRequests = s.lastPollRequests
	d.LastPollDurationMs = float64(s.lastPollDuration) / float64(time.Millisecond)
	return d
}

func (a *Adapter) recordError(err error, at time.Time) {
	a.statsMu.Lock()
	defer a.statsMu.Unlock()
	a.stats.errors++
	a.stats.lastErr = err.Error()
	a.stats.lastErrAt = at
}

func (a *Adapter) recordPoll(begin time.Time, requests int) {
	a.statsMu.Lock()
	defer a.statsMu.Unlock()
	a.stats.polls++
	a.stats.requests += uint64(requests)
	a.stats.lastPollAt = begin
	a.stats.lastPollRequests = requests
	a.stats.lastPollDuration = time.Since(begin)
}

func (a *Adapter) recordWrite(err error, at time.Time) {
	a.statsMu.Lock()
	a.stats.requests++
	a.stats.writes++
	a.statsMu.Unlock()
	if err != nil {
		a.recordError(err, at)
	}
}
