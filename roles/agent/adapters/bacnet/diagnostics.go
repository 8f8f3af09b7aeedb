package bacnet

import (
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// Diagnostics is what GET /v1/adapters/bacnet/devices/:deviceName shows
// at protocol level.
type Diagnostics struct {
	Address        string `json:"address"`
	DeviceInstance int    `json:"deviceInstance"`
	LocalAddress   string `json:"localAddress,omitempty"`
	Connected      bool   `json:"connected"`
	// BBMD is the BBMD registered with, and ForeignDevice whether the
	// last registration (or re-registration) succeeded.
	BBMD          string `json:"bbmd,omitempty"`
	ForeignDevice bool   `json:"foreignDeviceRegistered"`
	// IAm is the device's last I-Am; nil when it has not sent one to
	// this socket (a device that broadcasts its I-Am to port 47808 is only
	// heard with connection.localPort 47808).
	IAm *IAmInfo `json:"iAm"`
	// DeviceMaxAPDU is the device's max-apdu-length-accepted, MaxAPDU the
	// limit the requests are planned for.
	DeviceMaxAPDU int `json:"deviceMaxApdu,omitempty"`
	MaxAPDU       int `json:"maxApdu"`
	// Objects is how many objects a poll reads; PlannedRequests how many
	// ReadPropertyMultiple requests that takes when the device takes them.
	Objects         int  `json:"objects"`
	PlannedRequests int  `json:"plannedRequests"`
	UseRPM          bool `json:"usePropertyMultiple"`
	// RPMRefused is set once the device answered that it does not know
	// ReadPropertyMultiple; polls then use ReadProperty per property.
	RPMRefused bool   `json:"propertyMultipleRefused"`
	Polls      uint64 `json:"polls"`
	// LastPollRPM and LastPollRP are the requests the last poll sent.
	LastPollRPM int    `json:"lastPollRpmRequests"`
	LastPollRP  int    `json:"lastPollRpRequests"`
	TotalRPM    uint64 `json:"totalRpmRequests"`
	TotalRP     uint64 `json:"totalRpRequests"`
	// TotalRequests counts every confirmed request, connects and writes
	// included.
	TotalRequests uint64 `json:"totalRequests"`
	Writes        uint64 `json:"writes"`
	TotalErrors   uint64 `json:"totalErrors"`
	// BadFrames counts datagrams that did not decode.
	BadFrames   uint64     `json:"badFrames"`
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
	LastPollAt  *time.Time `json:"lastPollAt,omitempty"`
	// BadPoints maps the data points that were BAD in the last poll to
	// their quality code.
	BadPoints          map[string]string `json:"badPoints,omitempty"`
	LastPollDurationMs float64           `json:"lastPollDurationMs"`
}

// IAmInfo is an I-Am as diagnostics show it.
type IAmInfo struct {
	Address      string    `json:"address"`
	MaxAPDU      uint32    `json:"maxApdu"`
	Segmentation string    `json:"segmentation"`
	VendorID     uint32    `json:"vendorId"`
	ReceivedAt   time.Time `json:"receivedAt"`
}

type stats struct {
	connected      bool
	local          string
	registered     bool
	iam            *IAmInfo
	deviceMaxAPDU  int
	maxAPDU        int
	rpmRefused     bool
	polls          uint64
	requests       uint64
	rpm, rp        uint64
	lastRPM        int
	lastRP         int
	writes         uint64
	errors         uint64
	lastErr        string
	lastErrAt      time.Time
	lastPollAt     time.Time
	lastPollLength time.Duration
	badPoints      map[string]string
	// badFrames is shared with the client, which counts without a lock.
	badFrames atomic.Uint64
}

// Diagnostics returns a snapshot of the plan and the counters. It is safe
// for concurrent use and does not wait for a poll in progress.
func (a *Adapter) Diagnostics() any {
	d := Diagnostics{
		Address: a.cfg.Address(), DeviceInstance: a.cfg.DeviceInstance,
		Objects: len(a.objs), UseRPM: a.cfg.UsePropertyMultiple,
	}
	if a.cfg.BBMD != nil {
		d.BBMD = net.JoinHostPort(a.cfg.BBMD.Host, strconv.Itoa(a.cfg.BBMD.Port))
	}
	a.statsMu.Lock()
	defer a.statsMu.Unlock()
	s := &a.stats
	d.Connected, d.LocalAddress, d.ForeignDevice = s.connected, s.local, s.registered
	if s.iam != nil {
		iam := *s.iam
		d.IAm = &iam
	}
	d.DeviceMaxAPDU, d.MaxAPDU, d.RPMRefused = s.deviceMaxAPDU, s.maxAPDU, s.rpmRefused
	if d.MaxAPDU == 0 {
		d.MaxAPDU = a.cfg.MaxAPDU
	}
	d.PlannedRequests = len(planRequests(a.objs, d.MaxAPDU))
	d.Polls, d.TotalRequests, d.TotalRPM, d.TotalRP = s.polls, s.requests, s.rpm, s.rp
	d.LastPollRPM, d.LastPollRP, d.Writes, d.TotalErrors = s.lastRPM, s.lastRP, s.writes, s.errors
	d.BadFrames = a.stats.badFrames.Load()
	d.LastError = s.lastErr
	if !s.lastErrAt.IsZero() {
		t := s.lastErrAt
		d.LastErrorAt = &t
	}
	if !s.lastPollAt.IsZero() {
		t := s.lastPollAt
		d.LastPollAt = &t
	}
	if len(s.badPoints) > 0 {
		d.BadPoints = make(map[string]string, len(s.badPoints))
		for k, v := range s.badPoints {
			d.BadPoints[k] = v
		}
	}
	d.LastPollDurationMs = float64(s.lastPollLength) / float64(time.Millisecond)
	return d
}

func (a *Adapter) recordError(err error, at time.Time) {
	a.statsMu.Lock()
	defer a.statsMu.Unlock()
	a.stats.errors++
	a.stats.lastErr = err.Error()
	a.stats.lastErrAt = at
}

func (a *Adapter) recordPoll(begin time.Time, rpm, rp int, bad map[string]string) {
	a.statsMu.Lock()
	defer a.statsMu.Unlock()
	a.stats.polls++
	a.stats.requests += uint64(rpm + rp)
	a.stats.rpm += uint64(rpm)
	a.stats.rp += uint64(rp)
	a.stats.lastRPM, a.stats.lastRP = rpm, rp
	a.stats.rpmRefused = a.rpmRefused
	a.stats.lastPollAt = begin
	a.stats.lastPollLength = time.Since(begin)
	a.stats.badPoints = bad
}

func (a *Adapter) recordWrite(requests int, err error, at time.Time) {
	a.statsMu.Lock()
	a.stats.requests += uint64(requests)
	a.stats.writes++
	a.statsMu.Unlock()
	if err != nil {
		a.recordError(err, at)
	}
}

func (a *Adapter) setRegistered(ok bool, err error) {
	a.statsMu.Lock()
	a.stats.registered = ok
	a.statsMu.Unlock()
	if err != nil {
		a.recordError(err, time.Now())
	}
}
