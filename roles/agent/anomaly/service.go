package anomaly

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
)

// Defaults of Options (docs/anomaly-agent.md).
const (
	// DefaultSaveInterval is how often the baselines are saved: at most
	// 5 minutes of learning is lost to a crash, and a save of the largest
	// detector (1000 series × 24 slots) stays rare.
	DefaultSaveInterval = 5 * time.Minute
	// DefaultSystemInterval is how often the system metrics are sampled
	// and observed.
	DefaultSystemInterval = 10 * time.Second
	// eventQueue bounds the alerts waiting to be handed to the publisher.
	eventQueue = 256
)

// Store keeps the baselines (the agent's store).
type Store interface {
	AnomalyBaselines(ctx context.Context) ([]detect.Baseline, error)
	SaveAnomalyBaselines(ctx context.Context, bs []detect.Baseline) error
}

// Events takes the alerts to the cloud (publish.Router): it queues each
// as a critical record of every provisioned platform destination.
type Events interface {
	SendEvent(ctx context.Context, e control.Event) (int, error)
}

// Options builds a Service.
type Options struct {
	// Store opens the agent's store of the current run.
	Store  func() (Store, error)
	Events Events
	// System samples the system metrics (SystemMetrics names them); a
	// metric the host does not have is left out.
	System func(ctx context.Context) (map[string]float64, error)
	// Endpoints lists the configured endpoints' data points, for the
	// metric listing.
	Endpoints func(ctx context.Context) ([]EndpointPoints, error)

	SaveInterval   time.Duration // DefaultSaveInterval when 0
	SystemInterval time.Duration // DefaultSystemInterval when 0
	// Location decides the hour-of-day baseline of a reading; nil is the
	// host's local time, where daily cycles happen.
	Location *time.Location
	Log      *slog.Logger
	Metrics  prometheus.Registerer
}

// EndpointPoints is one endpoint's configured data points.
type EndpointPoints struct {
	Name   string
	Points []string
}

// SystemMetrics are the metrics the agent observes of its host.
var SystemMetrics = []string{"cpu_usage", "memory_percent", "cpu_temp", "disk_usage"}

// SystemDevice is the device of the system metrics' series.
const SystemDevice = "system"

// Service is the anomaly lifecycle service. The detector lives for one
// run of the agent's group: Start builds it and restores the saved
// baselines, Stop saves them.
type Service struct {
	o   Options
	log *slog.Logger
	m   *metrics

	on  atomic.Bool
	det atomic.Pointer[detect.Detector]

	cfgMu sync.Mutex
	cfg   Config

	// saveMu orders saves with Forget: a save that began before a
	// factory reset ends before the reset deletes the table.
	saveMu  sync.Mutex
	discard bool
	// runID makes alert event ids unique across runs: the detector's
	// alert ids start again at 1 each time.
	runID  string
	events chan detect.Alert

	cat     catalog
	scratch sync.Pool
}

// New builds the service; no I/O.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Events == nil {
		return nil, fmt.Errorf("anomaly: Store and Events are required")
	}
	if o.SaveInterval <= 0 {
		o.SaveInterval = DefaultSaveInterval
	}
	if o.SystemInterval <= 0 {
		o.SystemInterval = DefaultSystemInterval
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &Service{o: o, log: o.Log, m: newMetrics(o.Metrics), cfg: DefaultConfig(), cat: catalog{live: map[string]string{}}}
	s.on.Store(true)
	s.scratch.New = func() any { return new(scratch) }
	return s, nil
}

// Name implements lifecycle.Service.
func (s *Service) Name() string { return "anomaly" }

// Start builds the detector with the configuration in force and restores
// the saved baselines. A store that cannot give them back costs a new
// warm-up, not the agent's start.
func (s *Service) Start(ctx context.Context) error {
	st, err := s.o.Store()
	if err != nil {
		return fmt.Errorf("anomaly: %w", err)
	}
	bs, err := st.AnomalyBaselines(ctx)
	if err != nil {
		s.log.Error("anomaly baselines not restored; detection warms up again", "err", err)
		bs = nil
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	s.saveMu.Lock()
	s.discard = false
	s.runID = hex.EncodeToString(id[:])
	s.saveMu.Unlock()
	s.events = make(chan detect.Alert, eventQueue)
	// Built under cfgMu, so a Configure meanwhile is not lost.
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	d, err := s.newDetector(s.cfg)
	if err != nil {
		return err
	}
	if err := d.Restore(bs); err != nil {
		s.log.Error("anomaly baselines not restored; detection warms up again", "err", err)
	} else if len(bs) > 0 {
		s.log.Info("anomaly baselines restored", "baselines", len(bs))
	}
	s.det.Store(d)
	return nil
}

// Run sends the alerts to the cloud, observes the system metrics and
// saves the baselines on schedule until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	save := time.NewTicker(s.o.SaveInterval)
	defer save.Stop()
	sys := time.NewTicker(s.o.SystemInterval)
	defer sys.Stop()
	for {
		select {
		case <-ctx.Done():
			s.drainEvents(context.WithoutCancel(ctx))
			return nil
		case a := <-s.events:
			s.send(ctx, a)
		case <-sys.C:
			s.observeSystem(ctx)
		case <-save.C:
			if _, err := s.Save(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("anomaly baselines not saved", "err", err)
			}
		}
	}
}

// Stop saves the baselines one last time and retires the detector.
func (s *Service) Stop(ctx context.Context) error {
	defer s.det.Store(nil)
	if _, err := s.Save(ctx); err != nil {
		return fmt.Errorf("anomaly: save baselines at stop: %w", err)
	}
	return nil
}

func (s *Service) newDetector(cfg Config) (*detect.Detector, error) {
	dc := cfg.detector()
	dc.Location = s.o.Location
	return detect.New(dc)
}

// Configure applies a configuration at once (the settings call it on
// load and on every change). Switching detection off keeps the detector
// and its baselines; a change of the metrics rebuilds the detector from
// the current baselines and carries the run's alerts and totals over.
func (s *Service) Configure(cfg Config) error {
	cfg = cfg.Normalized()
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	prev := s.cfg
	s.cfg = cfg
	s.on.Store(cfg.Enabled)
	old := s.det.Load()
	if old == nil || slices.Equal(prev.Metrics, cfg.Metrics) {
		return nil
	}
	d, err := s.newDetector(cfg)
	if err != nil {
		return err
	}
	if err := d.Restore(old.Baselines()); err != nil {
		return fmt.Errorf("anomaly: carry baselines over: %w", err)
	}
	d.Carry(old)
	s.det.Store(d)
	s.log.Info("anomaly detection reconfigured", "metrics", len(cfg.Metrics))
	return nil
}

// Config returns the configuration in force.
func (s *Service) Config() Config {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	return s.cfg.Normalized()
}

// Enabled reports whether detection is on.
func (s *Service) Enabled() bool { return s.on.Load() }

// detector returns the detector of the run, nil before Start.
func (s *Service) detector() *detect.Detector { return s.det.Load() }

// raise queues an alert for the cloud without waiting: the hot path never
// blocks on the publisher. A full queue drops the event (counted); the
// alert stays in the ring of GET /v1/anomaly/alerts.
func (s *Service) raise(a detect.Alert) {
	s.m.alerts.WithLabelValues(a.Severity).Inc()
	select {
	case s.events <- a:
	default:
		s.m.eventsDropped.Inc()
	}
}

func (s *Service) drainEvents(ctx context.Context) {
	for {
		select {
		case a := <-s.events:
			s.send(ctx, a)
		default:
			return
		}
	}
}

func (s *Service) send(ctx context.Context, a detect.Alert) {
	data, err := json.Marshal(a)
	if err != nil {
		s.log.Error("anomaly alert not encoded", "err", err)
		return
	}
	s.saveMu.Lock()
	id := s.runID + "-" + a.ID
	s.saveMu.Unlock()
	n, err := s.o.Events.SendEvent(ctx, control.Event{ID: id, Kind: control.EventAnomalyAlert,
		Severity: a.Severity, Timestamp: a.Timestamp, Data: data})
	switch {
	case err != nil:
		s.m.eventsFailed.Inc()
		s.log.Warn("anomaly alert not queued for the cloud", "alert", id, "err", err)
	case n > 0:
		s.m.eventsSent.Inc()
	}
}

// Save writes the detector's baselines to the store and returns how many.
func (s *Service) Save(ctx context.Context) (int, error) {
	d := s.detector()
	if d == nil {
		return 0, nil
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.discard {
		return 0, nil
	}
	st, err := s.o.Store()
	if err != nil {
		return 0, err
	}
	bs := d.Baselines()
	if err := st.SaveAnomalyBaselines(ctx, bs); err != nil {
		return 0, err
	}
	s.m.saves.Inc()
	return len(bs), nil
}

// Forget stops every save until the next Start: a factory reset is about
// to delete the baselines, and the detector of this run must not write
// them back.
func (s *Service) Forget() {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.discard = true
}

// observeSystem samples the system metrics and observes them as one
// batch of the system device.
func (s *Service) observeSystem(ctx context.Context) {
	if !s.on.Load() || s.o.System == nil {
		return
	}
	d := s.detector()
	if d == nil {
		return
	}
	vals, err := s.o.System(ctx)
	if err != nil {
		s.log.Debug("system metrics not sampled", "err", err)
		return
	}
	now := time.Now()
	sc := s.scratch.Get().(*scratch)
	defer s.scratch.Put(sc)
	obs := sc.obs[:0]
	for _, m := range SystemMetrics {
		if v, ok := vals[m]; ok {
			obs = append(obs, detect.Observation{Metric: m, Device: SystemDevice, Value: v, At: now})
		}
	}
	sc.obs = obs
	// The results do not leave this call: the scratch slice is reused.
	sc.res = d.ObserveAppend(sc.res[:0], obs)
	for _, r := range sc.res {
		if r.Alert != nil {
			s.raise(*r.Alert)
		}
	}
	s.m.observed.Add(float64(len(obs)))
}
