package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/store"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

// Settings are the agent's adjustable settings (docs/agent.md, section
// "Settings, logs, diagnostics"). Only settings something acts on are
// here: a field that looks configurable but changes nothing is a lie to
// the operator. The read-only agent group is added when they are shown.
type Settings struct {
	Logging   LoggingSettings  `json:"logging"`
	Intervals IntervalSettings `json:"intervals"`
	Runtime   RuntimeSettings  `json:"runtime"`
	// Features and AnomalyDetection: see anomaly.go.
	Features         FeatureSettings `json:"features"`
	AnomalyDetection anomaly.Config  `json:"anomalyDetection"`
}

// LoggingSettings: level applies at once to the agent's log;
// cloudEnabled ships the agent's own log lines to the cloud
// (docs/control-channel.md, section "Agent logs").
type LoggingSettings struct {
	Level        string `json:"level"`
	CloudEnabled bool   `json:"cloudEnabled"`
}

// IntervalSettings time the cloud state exchange: statePollMs is the
// period of the target-state pull, stateReportMs that of the state and
// system-metrics reports, jobPollMs that of the job poll and of a
// running job's heartbeat.
type IntervalSettings struct {
	StatePollMS   int `json:"statePollMs"`
	StateReportMS int `json:"stateReportMs"`
	JobPollMS     int `json:"jobPollMs"`
}

// RuntimeSettings bound the agent's resources; maxMemoryMb 0 turns the
// memory restart policy off.
type RuntimeSettings struct {
	MaxMemoryMB int `json:"maxMemoryMb"`
}

func defaultSettings() Settings {
	return Settings{
		Logging:   LoggingSettings{Level: "info"},
		Intervals: IntervalSettings{StatePollMS: 60000, StateReportMS: 10000, JobPollMS: 30000},
		Features:  FeatureSettings{AnomalyDetection: true, Discovery: true}, AnomalyDetection: anomaly.DefaultConfig(),
	}
}

// settingsGroups are the keys PATCH /v1/settings accepts; any other
// top-level key is ignored (docs/agent.md, section "Settings, logs,
// diagnostics"), but for unavailableSettings.
var settingsGroups = []string{"logging", "intervals", "runtime", "features", "anomalyDetection"}

// unavailableSettings are settings of features this build does not have.
// A PATCH naming one is refused, so a client does not believe it switched
// something on; a stored document that still holds one (an older build
// wrote it) loses it quietly.
var unavailableSettings = map[string][]string{}

func (s Settings) validate() error {
	var errs []error
	if _, err := parseLevel(s.Logging.Level); err != nil {
		errs = append(errs, adapters.Fieldf("logging.level", "must be one of debug, info, warn, error, got %q", s.Logging.Level))
	}
	if s.Intervals.StatePollMS < 1000 || s.Intervals.StatePollMS > 86400000 {
		errs = append(errs, adapters.Fieldf("intervals.statePollMs", "must be 1000..86400000, got %d", s.Intervals.StatePollMS))
	}
	if s.Intervals.StateReportMS < 1000 || s.Intervals.StateReportMS > 86400000 {
		errs = append(errs, adapters.Fieldf("intervals.stateReportMs", "must be 1000..86400000, got %d", s.Intervals.StateReportMS))
	}
	if s.Intervals.JobPollMS < 1000 || s.Intervals.JobPollMS > 86400000 {
		errs = append(errs, adapters.Fieldf("intervals.jobPollMs", "must be 1000..86400000, got %d", s.Intervals.JobPollMS))
	}
	if s.Runtime.MaxMemoryMB < 0 || s.Runtime.MaxMemoryMB > 1<<20 {
		errs = append(errs, adapters.Fieldf("runtime.maxMemoryMb", "must be 0 (off) or a size in MB, got %d", s.Runtime.MaxMemoryMB))
	}
	errs = append(errs, s.anomalyErrors())
	return errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	switch s {
	case "debug", "info", "warn", "error":
		return l, l.UnmarshalText([]byte(s))
	}
	return l, fmt.Errorf("unknown level %q", s)
}

// mergeSettings applies a partial settings document to cur: accepted
// groups are merged key by key (objects recursively, everything else
// replaced), other top-level keys are ignored. The result is decoded
// strictly, so a misspelt key inside a group is an error naming it. A
// setting of unavailableSettings is an error too, unless stored is set:
// a stored document loses those quietly.
func mergeSettings(cur Settings, patch []byte, stored bool) (Settings, []string, error) {
	var p map[string]json.RawMessage
	if err := httpx.DecodeStrict(patch, &p); err != nil {
		return cur, nil, err
	}
	if p == nil {
		return cur, nil, errors.New("body: settings must be a JSON object")
	}
	if err := dropUnavailable(p, stored); err != nil {
		return cur, nil, err
	}
	base, err := json.Marshal(cur)
	if err != nil {
		return cur, nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		return cur, nil, err
	}
	var ignored []string
	for k, raw := range p {
		if !slices.Contains(settingsGroups, k) {
			ignored = append(ignored, k)
			continue
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return cur, nil, fmt.Errorf("%s: %w", k, err)
		}
		doc[k] = mergeValue(doc[k], v)
	}
	merged, err := json.Marshal(doc)
	if err != nil {
		return cur, nil, err
	}
	var out Settings
	if err := httpx.DecodeStrict(merged, &out); err != nil {
		return cur, nil, err
	}
	if err := syncAnomalySwitch(p, &out); err != nil {
		return cur, nil, err
	}
	return out, ignored, out.validate()
}

// dropUnavailable removes the settings of unavailableSettings from p, or
// names the first it finds when they are refused.
func dropUnavailable(p map[string]json.RawMessage, quietly bool) error {
	var errs []error
	for _, group := range slices.Sorted(maps.Keys(unavailableSettings)) {
		keys := unavailableSettings[group]
		target := p
		if group != "" {
			target = nil
			if json.Unmarshal(p[group], &target) != nil || target == nil {
				continue
			}
		}
		removed := false
		for _, k := range keys {
			if _, ok := target[k]; !ok {
				continue
			}
			name := k
			if group != "" {
				name = group + "." + k
			}
			errs = append(errs, adapters.Fieldf(name, "unknown field: this build has no such setting"))
			delete(target, k)
			removed = true
		}
		if removed && group != "" {
			p[group] = must(json.Marshal(target))
		}
	}
	if quietly {
		return nil
	}
	return errors.Join(errs...)
}

func mergeValue(dst, src any) any {
	d, dok := dst.(map[string]any)
	s, sok := src.(map[string]any)
	if !dok || !sok {
		return src
	}
	for k, v := range s {
		d[k] = mergeValue(d[k], v)
	}
	return d
}

// settingsService is httpapi.Settings: it keeps the settings in force and
// applies a change at once.
type settingsService struct {
	st     *storeRef
	id     *atomic.Pointer[identity]
	memory *sysinfo.MemoryMonitor
	level  *slog.LevelVar
	log    *slog.Logger
	// anomaly takes the anomalyDetection group when it is applied.
	anomaly *anomaly.Service
	// managed refuses local changes to what the target state manages.
	managed *managedGuard

	cur atomic.Pointer[Settings]
	// mu serialises read-modify-write of the settings.
	mu sync.Mutex
}

func newSettingsService(st *storeRef, id *atomic.Pointer[identity], memory *sysinfo.MemoryMonitor, level *slog.LevelVar, log *slog.Logger) *settingsService {
	s := &settingsService{st: st, id: id, memory: memory, level: level, log: log}
	def := defaultSettings()
	s.cur.Store(&def)
	return s
}

// current returns the settings in force.
func (s *settingsService) current() Settings { return *s.cur.Load() }

// load reads the stored settings (defaults when none) and applies them.
func (s *settingsService) load(ctx context.Context, st *store.Store) error {
	body, err := st.Settings(ctx)
	if err != nil {
		return err
	}
	cur := defaultSettings()
	if body != nil {
		if cur, _, err = mergeSettings(cur, body, true); err != nil {
			// A document a newer or older build wrote must not keep the
			// agent from starting; its valid parts are lost, and said so.
			s.log.Error("stored settings are invalid; using defaults", "err", err)
			cur = defaultSettings()
		}
	}
	s.apply(cur)
	return nil
}

func (s *settingsService) apply(cur Settings) {
	if l, err := parseLevel(cur.Logging.Level); err == nil {
		s.level.Set(l)
	}
	s.memory.SetMaxMemoryMb(cur.Runtime.MaxMemoryMB)
	if s.anomaly != nil {
		if err := s.anomaly.Configure(cur.AnomalyDetection); err != nil {
			s.log.Error("anomaly detection settings not applied", "err", err)
		}
	}
	s.cur.Store(&cur)
}

// View implements httpapi.Settings: the settings plus the read-only agent
// group, which reports the cloud the agent really uses.
func (s *settingsService) View(ctx context.Context) any {
	cur := s.current()
	agent := map[string]any{"uuid": "", "name": "", "version": version(), "provisioned": false, "apiEndpoint": "", "mqttBrokerUrl": ""}
	if id := s.id.Load(); id != nil {
		agent["uuid"], agent["name"] = id.UUID, id.Name
	}
	if st := s.st.Load(); st != nil {
		if cr, err := credentials(ctx, st); err == nil && cr != nil {
			agent["provisioned"] = provisioned(ctx, st)
			agent["apiEndpoint"], agent["mqttBrokerUrl"] = cr.APIEndpoint, cr.MQTT.BrokerURL
		}
	}
	return map[string]any{"settings": map[string]any{"logging": cur.Logging, "intervals": cur.Intervals, "runtime": cur.Runtime,
		"features": cur.Features, "anomalyDetection": cur.AnomalyDetection.Normalized(), "agent": agent}}
}

// Patch implements httpapi.Settings.
func (s *settingsService) Patch(ctx context.Context, doc []byte) error {
	st, err := s.st.Open()
	if err != nil {
		return err
	}
	if err := s.guard(ctx, doc); err != nil {
		return err
	}
	return s.patch(ctx, st, doc)
}

// patch merges doc into the settings, stores and applies them.
func (s *settingsService) patch(ctx context.Context, st *store.Store, doc []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	merged, ignored, err := mergeSettings(s.current(), doc, false)
	if err != nil {
		return httpapi.Invalid(err)
	}
	body, err := json.Marshal(merged)
	if err != nil {
		return fmt.Errorf("encode settings: %w", err)
	}
	if err := st.SaveSettings(ctx, body); err != nil {
		return err
	}
	s.apply(merged)
	if len(ignored) > 0 {
		s.log.Info("settings keys ignored", "keys", ignored)
	}
	return nil
}
