package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
)

// DefaultRefreshEvery is how often a replica reads the stored settings to
// pick up what a PUT on another replica changed.
const DefaultRefreshEvery = 10 * time.Second

// ErrInvalid is a PUT body that names an unknown key or a value out of
// its key's rules; the message names the key.
var ErrInvalid = errors.New("invalid system config")

// SystemConfig holds the effective settings: the configured ones with the
// stored overrides on top, handed to apply whenever they change. It is
// a lifecycle service: Start applies what is stored before the HTTP
// server takes requests (the server comes after it in the role's list),
// Run reads the table every refresh interval.
type SystemConfig struct {
	base  Settings
	st    *store
	apply func(Settings)
	log   *slog.Logger
	every time.Duration

	// mu orders refreshes, so settings are applied in the order they
	// were read.
	mu      sync.Mutex
	cur     Settings
	rows    map[string]row
	applied bool
	// failing keeps a failing table to one warning until it reads again.
	failing bool
}

// SystemConfigOptions configures NewSystemConfig.
type SystemConfigOptions struct {
	// Base are the configured values (FromConfig).
	Base Settings
	DB   *db.DB
	// Apply puts settings into effect; called with the whole set each
	// time one of them changes, never concurrently.
	Apply func(Settings)
	Log   *slog.Logger
	// RefreshEvery is the polling interval; DefaultRefreshEvery when 0.
	RefreshEvery time.Duration
}

// NewSystemConfig builds the service without I/O.
func NewSystemConfig(o SystemConfigOptions) *SystemConfig {
	if o.DB == nil || o.Apply == nil {
		panic("BUG: admin.NewSystemConfig needs a database and an apply function")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.RefreshEvery <= 0 {
		o.RefreshEvery = DefaultRefreshEvery
	}
	return &SystemConfig{base: o.Base, st: &store{db: o.DB}, apply: o.Apply, log: o.Log, every: o.RefreshEvery,
		cur: o.Base, rows: map[string]row{}}
}

// Name implements lifecycle.Service.
func (s *SystemConfig) Name() string { return "api-system-config" }

// Start applies the stored settings. A table that cannot be read leaves
// the configured values in effect, with a warning, until Run reads it:
// a database that is slow to come back must not keep the API down.
func (s *SystemConfig) Start(ctx context.Context) error {
	if err := s.Refresh(ctx); err != nil {
		s.log.Warn("system config not read at start; configured values in effect", "err", err)
	}
	return nil
}

// Run reads the table every refresh interval until ctx is done.
func (s *SystemConfig) Run(ctx context.Context) error {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			err := s.Refresh(ctx)
			s.mu.Lock()
			switch {
			case err != nil && !s.failing && ctx.Err() == nil:
				s.failing = true
				s.log.Warn("system config not read; last values stay in effect", "err", err)
			case err == nil && s.failing:
				s.failing = false
				s.log.Info("system config read again")
			}
			s.mu.Unlock()
		}
	}
}

// Stop implements lifecycle.Service.
func (s *SystemConfig) Stop(context.Context) error { return nil }

// Refresh reads the table and applies the settings when they changed (or
// were never applied). A stored value its key no longer accepts (written
// by another version) is skipped with a warning: the configured value
// stays.
func (s *SystemConfig) Refresh(ctx context.Context) error {
	rows, err := s.st.all(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	eff := s.base
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		def, ok := settingByKey(k)
		if !ok {
			s.log.Warn("stored system config key unknown; ignored", "key", k)
			delete(rows, k)
			continue
		}
		v, err := def.decode(rows[k].Value)
		if err != nil {
			s.log.Warn("stored system config value refused; configured value in effect", "key", k, "err", err)
			delete(rows, k)
			continue
		}
		def.set(&eff, v)
	}
	if !s.applied || eff != s.cur {
		var changed []string
		for _, def := range settings {
			if !s.applied || def.get(&eff) != def.get(&s.cur) {
				changed = append(changed, def.key)
			}
		}
		s.apply(eff)
		if s.applied || len(rows) > 0 {
			s.log.Info("system config applied", "keys", strings.Join(changed, ","))
		}
		s.cur, s.applied = eff, true
	}
	s.rows = rows
	return nil
}

// Current returns the effective settings.
func (s *SystemConfig) Current() Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Entry is one setting as GET /admin/system-config answers it.
type Entry struct {
	Key string `json:"key"`
	// Value is the effective value; Configured the value from the file,
	// the environment or the default, in effect when nothing is stored.
	Value       any        `json:"value"`
	Configured  any        `json:"configured"`
	Source      string     `json:"source"` // "stored" or "config"
	UpdatedAt   *time.Time `json:"updatedAt,omitempty"`
	UpdatedBy   string     `json:"updatedBy,omitempty"`
	Description string     `json:"description"`
}

// View is the system config answer.
type View struct {
	Settings []Entry `json:"settings"`
	// RefreshSeconds is how often other replicas read the table.
	RefreshSeconds float64 `json:"refreshSeconds"`
}

// View returns the settings as last read.
func (s *SystemConfig) View() View {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := View{Settings: make([]Entry, 0, len(settings)), RefreshSeconds: s.every.Seconds()}
	for _, def := range settings {
		e := Entry{Key: def.key, Value: def.get(&s.cur), Configured: def.get(&s.base), Source: "config", Description: def.doc}
		if r, ok := s.rows[def.key]; ok {
			at := r.UpdatedAt
			e.Source, e.UpdatedAt, e.UpdatedBy = "stored", &at, r.UpdatedBy
		}
		v.Settings = append(v.Settings, e)
	}
	return v
}

// Update is the outcome of a PUT: what each named key was and is now.
type Update struct {
	Key      string
	Old, New any
}

// Put validates changes, stores them in one transaction and applies the
// result on this replica at once. by names the admin for updated_by.
func (s *SystemConfig) Put(ctx context.Context, changes []change, by string, now time.Time) ([]Update, error) {
	before := s.Current()
	after := before
	for i, c := range changes {
		def, _ := settingByKey(c.Key) // DecodeChanges checked the keys
		if c.Value == nil {
			def.set(&after, def.get(&s.base))
			continue
		}
		v, err := def.decode(c.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %v", ErrInvalid, c.Key, err)
		}
		// Stored canonical ("WARNING" is stored as "warn").
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", c.Key, err)
		}
		changes[i].Value = raw
		def.set(&after, v)
	}
	if err := s.st.write(ctx, changes, by, now); err != nil {
		return nil, err
	}
	if err := s.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("stored; apply: %w", err)
	}
	out := make([]Update, 0, len(changes))
	for _, c := range changes {
		def, _ := settingByKey(c.Key)
		out = append(out, Update{Key: c.Key, Old: def.get(&before), New: def.get(&after)})
	}
	return out, nil
}

// DecodeChanges reads a PUT body: a JSON object of keys to values, null
// resetting a key to its configured value. It refuses an empty object
// and an unknown key, naming the key; the values are checked by Put.
// Changes come back sorted by key.
func DecodeChanges(body []byte) ([]change, error) {
	var m map[string]json.RawMessage
	if err := httpx.DecodeStrict(body, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: body must be a JSON object of settings, such as {\"log.level\": \"debug\"}", ErrInvalid)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%w: body names no setting; settings are %s", ErrInvalid, strings.Join(Keys(), ", "))
	}
	out := make([]change, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if _, ok := settingByKey(k); !ok {
			return nil, fmt.Errorf("%w: %q is not a setting that can change at run time; settings are %s", ErrInvalid, k, strings.Join(Keys(), ", "))
		}
		c := change{Key: k}
		if !isNull(m[k]) {
			c.Value = m[k]
		}
		out = append(out, c)
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool {
	return strings.TrimSpace(string(raw)) == "null"
}

var _ lifecycle.Service = (*SystemConfig)(nil)
