package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/logging"
)

// Settings are the effective values of the settings that may change at
// run time: the configured ones with the stored overrides on top.
type Settings struct {
	RateLimitGlobal int
	RateLimitAuth   int
	RateLimitDevice int
	RateLimitAdmin  int
	// LogLevel is one of debug, info, warn, error.
	LogLevel string
	DedupTTL time.Duration
	// EventsRetention is the event log's retention; 0 keeps everything.
	EventsRetention time.Duration
	// ReadingsRetention is raw readings' retention, RollupHourlyRetention
	// and RollupDailyRetention the rollups'; 0 keeps everything.
	ReadingsRetention     time.Duration
	RollupHourlyRetention time.Duration
	RollupDailyRetention  time.Duration
}

// FromConfig returns the configured values: file, environment, defaults.
func FromConfig(cfg *config.Config) Settings {
	return Settings{
		RateLimitGlobal: cfg.Auth.RateLimitGlobal,
		RateLimitAuth:   cfg.Auth.RateLimitAuth,
		RateLimitDevice: cfg.Auth.RateLimitDevice,
		RateLimitAdmin:  cfg.Auth.RateLimitAdmin,
		LogLevel:        levelName(cfg.Log.Level),
		DedupTTL:        cfg.API.DedupTTL,
		EventsRetention: cfg.API.EventsRetention,

		ReadingsRetention:     cfg.API.ReadingsRetention,
		RollupHourlyRetention: cfg.API.RollupHourlyRetention,
		RollupDailyRetention:  cfg.API.RollupDailyRetention,
	}
}

// SlogLevel is LogLevel as a slog.Level (info for a name it does not know,
// which validation never lets in).
func (s Settings) SlogLevel() slog.Level {
	l, _ := logging.ParseLevel(s.LogLevel)
	return l
}

// levelName canonicalises a level name ("warning" and "WARN" are warn).
func levelName(s string) string {
	l, err := logging.ParseLevel(s)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(s))
	}
	return strings.ToLower(l.String())
}

// maxRateLimit is config's bound for the auth.rate_limit_* keys.
const maxRateLimit = 1 << 30

// Bounds of api.dedup_ttl, as config validates it.
const (
	minDedupTTL = time.Second
	maxDedupTTL = 30 * 24 * time.Hour
)

// setting is one key of the system config: its name is the config key it
// overrides, so the file, the environment and the API speak of it alike.
type setting struct {
	key string
	doc string
	// decode validates a JSON value and returns it canonical, as stored
	// and answered.
	decode func(raw json.RawMessage) (any, error)
	get    func(*Settings) any
	set    func(*Settings, any)
}

func rateLimit(key, doc string, field func(*Settings) *int) setting {
	return setting{key: key, doc: doc,
		decode: func(raw json.RawMessage) (any, error) {
			var n int
			if err := strictJSON(raw, &n); err != nil {
				return nil, fmt.Errorf("must be a whole number of requests per minute")
			}
			if n < 0 || n > maxRateLimit {
				return nil, fmt.Errorf("must be between 0 (off) and %d, got %d", maxRateLimit, n)
			}
			return n, nil
		},
		get: func(s *Settings) any { return *field(s) },
		set: func(s *Settings, v any) { *field(s) = v.(int) },
	}
}

// durationSetting is a setting holding a duration, answered and stored
// as text ("90s", "7d"); ok bounds it and explains the bound.
func durationSetting(key, doc, bounds string, ok func(time.Duration) bool, field func(*Settings) *time.Duration) setting {
	return setting{key: key, doc: doc,
		decode: func(raw json.RawMessage) (any, error) {
			var s string
			if err := strictJSON(raw, &s); err != nil {
				return nil, errors.New(`must be a duration as a string, such as "24h" or "7d"`)
			}
			d, err := config.ParseDuration(s)
			if err != nil {
				return nil, fmt.Errorf(`must be a duration such as "24h" or "7d", got %q`, s)
			}
			if !ok(d) {
				return nil, fmt.Errorf("must be %s, got %s", bounds, d)
			}
			return formatDuration(d), nil
		},
		get: func(s *Settings) any { return formatDuration(*field(s)) },
		set: func(s *Settings, v any) { *field(s), _ = config.ParseDuration(v.(string)) },
	}
}

// atLeastADay is config's bound for the readings' and rollups' retentions.
func atLeastADay(d time.Duration) bool { return d == 0 || d >= 24*time.Hour }

// settings lists the keys (sorted by init).
var settings = []setting{
	rateLimit("auth.rate_limit_admin", "Requests per minute per admin to the admin-only routes; 0 disables.",
		func(s *Settings) *int { return &s.RateLimitAdmin }),
	rateLimit("auth.rate_limit_auth", "Requests per minute per client address to the auth endpoints, and failed logins per account and per address; 0 disables.",
		func(s *Settings) *int { return &s.RateLimitAuth }),
	rateLimit("auth.rate_limit_device", "Requests per minute per device API key; 0 disables.",
		func(s *Settings) *int { return &s.RateLimitDevice }),
	rateLimit("auth.rate_limit_global", "Requests per minute per credential or client address, all routes; 0 disables.",
		func(s *Settings) *int { return &s.RateLimitGlobal }),
	durationSetting("api.dedup_ttl", "How long a telemetry msgId is remembered to drop repeats, as a duration (\"90s\", \"12h\", \"7d\"); applies to the marks set from then on.",
		"between 1s and 30d", func(d time.Duration) bool { return d >= minDedupTTL && d <= maxDedupTTL },
		func(s *Settings) *time.Duration { return &s.DedupTTL }),
	durationSetting("api.events_retention", "How long the event log keeps state snapshots and audit records (docs/events.md), as a duration (\"2160h\", \"30d\"); \"0s\" keeps them. Applies from the next hourly round.",
		"0s (keep) or at least 1h", func(d time.Duration) bool { return d == 0 || d >= time.Hour },
		func(s *Settings) *time.Duration { return &s.EventsRetention }),
	durationSetting("api.readings_retention", "How long raw readings are kept (docs/database.md), as a duration (\"720h\", \"30d\"); \"0s\" keeps them. Applies from the next maintenance round: whole days older than it are dropped then.",
		"0s (keep) or at least 24h", atLeastADay, func(s *Settings) *time.Duration { return &s.ReadingsRetention }),
	durationSetting("api.rollup_hourly_retention", "How long hourly rollups are kept (docs/readings-api.md), as a duration; \"0s\" keeps them. Applies from the next rollup round.",
		"0s (keep) or at least 24h", atLeastADay, func(s *Settings) *time.Duration { return &s.RollupHourlyRetention }),
	durationSetting("api.rollup_daily_retention", "How long daily rollups are kept (docs/readings-api.md), as a duration; \"0s\" keeps them. Applies from the next rollup round.",
		"0s (keep) or at least 24h", atLeastADay, func(s *Settings) *time.Duration { return &s.RollupDailyRetention }),
	{key: "log.level", doc: "Log level of the whole process: debug, info, warn or error.",
		decode: func(raw json.RawMessage) (any, error) {
			var s string
			if err := strictJSON(raw, &s); err != nil {
				return nil, errors.New("must be one of debug, info, warn, error")
			}
			if _, err := logging.ParseLevel(s); err != nil || strings.TrimSpace(s) == "" {
				return nil, fmt.Errorf("must be one of debug, info, warn, error, got %q", s)
			}
			return levelName(s), nil
		},
		get: func(s *Settings) any { return s.LogLevel },
		set: func(s *Settings, v any) { s.LogLevel = v.(string) },
	},
}

func init() {
	// Sorted, for the answers' order and for settingByKey.
	slices.SortFunc(settings, func(a, b setting) int { return strings.Compare(a.key, b.key) })
}

func settingByKey(key string) (setting, bool) {
	i, ok := slices.BinarySearchFunc(settings, key, func(s setting, k string) int { return strings.Compare(s.key, k) })
	if !ok {
		return setting{}, false
	}
	return settings[i], true
}

// Keys lists the keys of the system config, sorted.
func Keys() []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.key
	}
	return out
}

// formatDuration writes whole days as "7d", as the configuration does,
// and anything else as Go does.
func formatDuration(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// strictJSON decodes raw into v, refusing null and trailing data.
func strictJSON(raw json.RawMessage, v any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("null")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}
