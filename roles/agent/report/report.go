// Package report is the agent's periodic reports to the cloud
// (docs/control-channel.md, sections "State reports" and "System
// metrics"): a control.StateReport on {prefix}/state and a
// control.MetricsReport on {prefix}/metrics every
// intervals.stateReportMs.
//
// Reports are ephemeral, like heartbeats: they go out only while the
// platform connection is up and are never queued, so an outage silences
// them instead of replaying stale ones, and the cloud's "offline" follows
// the silence. The first tick after the connection comes back sends one at
// once, so the cloud sees the agent again without waiting an interval.
package report

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
	"github.com/prometheus/client_golang/prometheus"
)

// Publisher is the agent's publish router, seen from the reports.
type Publisher interface {
	// PlatformConnected reports whether a report could go out now.
	PlatformConnected() bool
	// SendReport publishes body as the report name without queueing it,
	// and reports whether a destination took it.
	SendReport(ctx context.Context, name string, body []byte) bool
}

// TargetProvider tells what the agent did with its target state.
type TargetProvider interface {
	TargetStatus() control.TargetStatus
}

// StateSource fills a state report: everything but Timestamp and
// TargetState, which the service sets.
type StateSource interface {
	StateReport(ctx context.Context) (control.StateReport, error)
}

// Sampler gives the host figures of the metrics report (*sysinfo.Sampler).
type Sampler interface {
	Sample(ctx context.Context) (sysinfo.Dashboard, error)
}

// DefaultTick is how often the service looks at the connection and the
// interval: a report is late by at most one tick, and one goes out at
// most one tick after a reconnect.
const DefaultTick = time.Second

// sampleTimeout bounds one report's sampling, so a stuck /proc read
// cannot hold the loop past a few intervals.
const sampleTimeout = 5 * time.Second

// Options builds a Service.
type Options struct {
	Publisher Publisher
	State     StateSource
	Target    TargetProvider
	Sampler   Sampler
	// Interval returns intervals.stateReportMs as in force now; it is
	// read at every tick, so a settings change applies at once.
	Interval func() time.Duration
	// SysRoot is where /sys is ("/sys" normally), for the temperature.
	SysRoot string
	// Started is when the agent process started, for agent_uptime.
	Started time.Time
	// Tick replaces DefaultTick (tests).
	Tick    time.Duration
	Log     *slog.Logger
	Metrics prometheus.Registerer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Service publishes the reports. Its Run may be called again after it
// returned (a soft reboot runs the agent's group again).
type Service struct {
	o Options
	m *metrics
}

// New builds the service and registers its metrics; it does no I/O.
func New(o Options) *Service {
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{o: o, m: newMetrics(o.Metrics)}
}

// Name implements lifecycle.Service.
func (s *Service) Name() string { return "reports" }

// Start implements lifecycle.Service.
func (s *Service) Start(context.Context) error { return nil }

// Stop implements lifecycle.Service.
func (s *Service) Stop(context.Context) error { return nil }

// Run sends the reports until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.Tick)
	defer t.Stop()
	var last time.Time // last time both reports went out
	connected := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !s.o.Publisher.PlatformConnected() {
			if connected {
				s.m.paused.Inc()
			}
			connected = false
			continue
		}
		now := s.o.Now()
		// A reconnect sends at once; otherwise at the interval.
		if connected && now.Sub(last) < s.o.Interval() {
			continue
		}
		if s.send(ctx, now) {
			last, connected = now, true
		} else {
			connected = false
		}
	}
}

// send publishes one state and one metrics report and reports whether
// the state report went out.
func (s *Service) send(ctx context.Context, now time.Time) bool {
	sctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	ok := false
	if st, err := s.State(sctx, now); err != nil {
		s.m.failed.WithLabelValues(control.ReportState).Inc()
		s.o.Log.Debug("state report not built", "err", err)
	} else {
		ok = s.publish(ctx, control.ReportState, st)
	}
	if mr, err := s.Metrics(sctx, now); err != nil {
		s.m.failed.WithLabelValues(control.ReportMetrics).Inc()
		s.o.Log.Debug("metrics report not built", "err", err)
	} else {
		s.publish(ctx, control.ReportMetrics, mr)
	}
	return ok
}

func (s *Service) publish(ctx context.Context, name string, v any) bool {
	body, err := json.Marshal(v)
	if err != nil {
		s.m.failed.WithLabelValues(name).Inc()
		s.o.Log.Debug("report not encoded", "report", name, "err", err)
		return false
	}
	if !s.o.Publisher.SendReport(ctx, name, body) {
		s.m.failed.WithLabelValues(name).Inc()
		return false
	}
	s.m.sent.WithLabelValues(name).Inc()
	return true
}

// State builds the state report as of now.
func (s *Service) State(ctx context.Context, now time.Time) (control.StateReport, error) {
	r, err := s.o.State.StateReport(ctx)
	if err != nil {
		return r, err
	}
	r.Timestamp = now.UnixMilli()
	if s.o.Target != nil {
		r.TargetState = s.o.Target.TargetStatus()
	}
	if r.Endpoints == nil {
		r.Endpoints = []control.EndpointState{}
	}
	return r, nil
}

// Metrics builds the system metrics report as of now; the temperature
// is left out where the host has no thermal zone.
func (s *Service) Metrics(ctx context.Context, now time.Time) (control.MetricsReport, error) {
	d, err := s.o.Sampler.Sample(ctx)
	if err != nil {
		return control.MetricsReport{}, err
	}
	r := control.MetricsReport{
		Timestamp: now.UnixMilli(), CPUUsage: d.CPUUsage,
		MemoryPercent: d.MemoryPercent, MemoryUsed: d.MemoryUsed, MemoryTotal: d.MemoryTotal,
		StoragePercent: d.StoragePercent, StorageUsed: d.StorageUsed, StorageTotal: d.StorageTotal,
		Uptime: float64(d.Uptime), Hostname: d.Hostname,
	}
	if !s.o.Started.IsZero() {
		r.AgentUptime = now.Sub(s.o.Started).Seconds()
	}
	if c, ok := sysinfo.Temperature(s.o.SysRoot); ok {
		r.Temperature = &c
	}
	return r, nil
}
