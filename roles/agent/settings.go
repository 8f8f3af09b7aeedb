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

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Settings are the agent's adjustable settings (docs/agent.md, section
// "Settings, logs, diagnostics"). Only settings something acts on are
// here: a field that looks configurable but changes nothing is a lie to
// the operator. The read-only agent group is added when they are shown.
type Settings struct {
	Logging   LoggingSettings  `json:"logging"`
	Intervals IntervalSettings `json:"intervals"`
	Runtime   RuntimeSettings  `json:"runtime"`
}

// LoggingSettings: level applies at once to the agent's log.
type LoggingSettings struct {
	Level string `json:"level"`
}

// IntervalSettings time the cloud state exchange: statePollMs is the
// period of the target-state pull.
type IntervalSettings struct {
	StatePollMS int `json:"statePollMs"`
}

// RuntimeSettings bound the agent's resources; maxMemoryMb 0 turns the
// memory restart policy off.
type RuntimeSettings struct {
	MaxMemoryMB int `json:"maxMemoryMb"`
}

func defaultSettings() Settings {
	return Settings{
		Logging:   LoggingSettings{Level: "info"},
		Intervals: IntervalSettings{StatePollMS: 60000},
	}
}

// settingsGroups are the keys PATCH /v1/settings accepts; any other
// top-level key is ignored (docs/agent.md, section "Settings, logs,
// diagnostics"), but for unavailableSettings.
var settingsGroups = []string{"logging", "intervals", "runtime"}

// unavailableSettings are settings of features this build does not have.
// A PATCH naming one is refused, so a client does not believe it switched
// something on; a stored document that still holds one (an older build
// wrote it) loses it quietly.
var unavailableSettings = map[string][]string{
	"":          {"features", "anomalyDetection"},
	"logging":   {"cloudEnabled"},
	"intervals": {"stateReportMs"},
}

func (s Settings) validate() error {
	var errs []error
	if _, err := parseLevel(s.Logging.Level); err != nil {
		errs = append(errs, adapters.Fieldf("logging.level", "must be one of debug, info, warn, error, got %q", s.Logging.Level))
	}
	if s.Intervals.StatePollMS < 1000 || s.Intervals.StatePollMS > 86400000 {
		errs = append(errs, adapters.Fieldf("intervals.statePollMs", "must be 1000..86400000, got %d", s.Intervals.StatePollMS))
	}
	if s.Runtime.MaxMemoryMB < 0 || s.Runtime.MaxMemoryMB > 1<<20 {
		errs = append(errs, adapters.Fieldf("runtime.maxMemoryMb", "must be 0 (off) or a size in MB, got %d", s.Runtime.MaxMemoryMB))
	}
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

// loadSettings reads the stored settings (defaults when none) and applies
// them.
func (a *Agent) loadSettings(ctx context.Context) error {
	body, err := a.st.Load().Settings(ctx)
	if err != nil {
		return err
	}
	s := defaultSettings()
	if body != nil {
		if s, _, err = mergeSettings(s, body, true); err != nil {
			// A document a newer or older build wrote must not keep the
			// agent from starting; its valid parts are lost, and said so.
			a.log.Error("stored settings are invalid; using defaults", "err", err)
			s = defaultSettings()
		}
	}
	a.applySettings(s)
	return nil
}

func (a *Agent) applySettings(s Settings) {
	if l, err := parseLevel(s.Logging.Level); err == nil {
		a.level.Set(l)
	}
	a.memory.SetMaxMemoryMb(s.Runtime.MaxMemoryMB)
	a.settings.Store(&s)
}
