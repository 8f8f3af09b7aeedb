package detect

import (
	"strconv"
	"time"
)

// Alert severities.
const (
	SeverityCritical = "critical"
	SeverityWarning  = "warning"
	SeverityInfo     = "info"
)

// Alert limits of Alerts.
const (
	DefaultAlertLimit = 200
	MaxAlertLimit     = 500
)

// Alert is a flagged observation, kept in memory only.
type Alert struct {
	ID       string  `json:"id"`
	Metric   string  `json:"metric"`
	DeviceID string  `json:"device_id,omitempty"`
	Value    float64 `json:"value"`
	// Threshold is the anomaly_threshold the score passed.
	Threshold    float64 `json:"threshold"`
	Severity     string  `json:"severity"`
	Timestamp    int64   `json:"timestamp"`
	AnomalyScore float64 `json:"anomaly_score"`
}

// severityOf grades a flagged reading by how far its strongest method
// score went past the threshold T (docs/anomaly.md, "Severities"): 1.5·T
// or more is critical (6σ at medium, a tail probability of 1e-9), 1.25·T
// or more a warning, less is info.
func severityOf(strongest, threshold float64) string {
	switch {
	case strongest >= 1.5*threshold:
		return SeverityCritical
	case strongest >= 1.25*threshold:
		return SeverityWarning
	}
	return SeverityInfo
}

// AlertFilter selects alerts; zero fields select everything.
type AlertFilter struct {
	// Since keeps alerts whose timestamp is at or after it.
	Since    time.Time
	Severity string
	Metric   string
	// Limit caps the answer: 0 or less means DefaultAlertLimit, more than
	// MaxAlertLimit means MaxAlertLimit.
	Limit int
}

// alertRing keeps the newest size alerts.
type alertRing struct {
	buf  []Alert
	next int
	size int
	seq  uint64
}

func (r *alertRing) add(a Alert) Alert {
	r.seq++
	a.ID = strconv.FormatUint(r.seq, 10)
	if n := len(r.buf); n < r.size {
		if n == cap(r.buf) {
			// Grown as alerts come, to exactly size: a detector that
			// raises few alerts does not hold maxAlerts of them (96 KB
			// at the default).
			grown := make([]Alert, n, min(r.size, max(16, 2*n)))
			copy(grown, r.buf)
			r.buf = grown
		}
		r.buf = append(r.buf, a)
	} else {
		r.buf[r.next] = a
		r.next = (r.next + 1) % r.size
	}
	return a
}

// Alerts returns the matching alerts, newest first, at most the filter's
// limit, and how many matched in all.
func (d *Detector) Alerts(f AlertFilter) ([]Alert, int) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultAlertLimit
	}
	limit = min(limit, MaxAlertLimit)
	var since int64
	if !f.Since.IsZero() {
		since = f.Since.UnixMilli()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r := &d.alerts
	out := []Alert{}
	total := 0
	n := len(r.buf)
	for i := range n {
		// Newest first: the slot before next, walking back.
		a := r.buf[(r.next-1-i+2*n)%n]
		if (!f.Since.IsZero() && a.Timestamp < since) ||
			(f.Severity != "" && a.Severity != f.Severity) ||
			(f.Metric != "" && a.Metric != f.Metric) {
			continue
		}
		total++
		if len(out) < limit {
			out = append(out, a)
		}
	}
	return out, total
}

// ClearAlerts empties the alert ring; alert ids keep increasing.
func (d *Detector) ClearAlerts() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.alerts.buf, d.alerts.next = d.alerts.buf[:0], 0
}

// Carry takes over the alerts, the alert id sequence and the running
// totals of prev, the detector d replaces: a configuration change loses
// no alert, and alert ids, which name the alert events of a run, are not
// issued twice. d must not be in use yet.
func (d *Detector) Carry(prev *Detector) {
	prev.mu.Lock()
	defer prev.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.counts = prev.counts
	r := &prev.alerts
	n := len(r.buf)
	keep := min(n, d.alerts.size)
	// Oldest first from index 0, where a ring that is not yet wrapped
	// keeps them; the newest stay if the ring is smaller.
	d.alerts.buf, d.alerts.next = make([]Alert, 0, keep), 0
	for i := n - keep; i < n; i++ {
		d.alerts.buf = append(d.alerts.buf, r.buf[(r.next+i)%n])
	}
	d.alerts.seq = r.seq
}
