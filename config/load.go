package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/profiles"
	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// LoadOptions says where Load reads from besides defaults and environment.
type LoadOptions struct {
	// Role selects role defaults, role-scoped env names and the sections
	// that are validated.
	Role string
	// File is a YAML file (--config); empty reads none.
	File string
	// Flags holds the command's flags; FlagKeys maps a flag name to the key
	// it sets. A flag counts only when given on the command line.
	Flags    *pflag.FlagSet
	FlagKeys map[string]string
}

// Source says which layer a value came from, for --print-config.
type Source struct {
	Layer  string // default, profile, file, env or flag
	Detail string // the env var, flag or profile name
}

// Load builds the configuration for opts.Role and validates it. Every
// problem is reported in one joined error, each naming key, env var and
// the bad value: unknown keys in the file, values that do not parse and
// values out of range alike, so one run shows everything to fix.
func Load(opts LoadOptions) (*Config, error) {
	if _, ok := roleSections[opts.Role]; !ok {
		return nil, fmt.Errorf("unknown role %q", opts.Role)
	}
	v := viper.New()
	for _, k := range Keys {
		v.SetDefault(k.Name, k.defaultFor(opts.Role))
		if envs := k.envFor(opts.Role); len(envs) > 0 {
			if err := v.BindEnv(append([]string{k.Name}, envs...)...); err != nil {
				panic("BUG: bind env " + k.Name + ": " + err.Error())
			}
		}
	}

	var errs []error
	var fileKeys map[string]bool
	var fileWarnings []string
	if opts.File != "" {
		var unknown []error
		var err error
		if fileKeys, unknown, fileWarnings, err = readFile(v, opts.File); err != nil {
			return nil, err
		}
		errs = append(errs, unknown...)
	}

	flagOf := map[string]string{}
	if opts.Flags != nil {
		for flag, key := range opts.FlagKeys {
			f := opts.Flags.Lookup(flag)
			if f == nil {
				panic("BUG: flag --" + flag + " is not defined")
			}
			if _, ok := KeyByName(key); !ok {
				panic("BUG: flag --" + flag + " names unknown key " + key)
			}
			if err := v.BindPFlag(key, f); err != nil {
				panic("BUG: bind flag " + flag + ": " + err.Error())
			}
			if f.Changed {
				flagOf[key] = flag
			}
		}
	}

	// Viper takes an empty variable for an unset one; for EmptyEnv keys it
	// is the empty value, above file and default, below a flag.
	for _, k := range Keys {
		if _, ok := flagOf[k.Name]; !ok && k.EmptyEnv && emptyEnvSet(k, opts.Role) {
			v.Set(k.Name, "")
		}
	}

	// bad holds the keys whose value was refused; their validation
	// problems, found on the default put in their place, are left out.
	bad := map[string]bool{}

	// The profile is chosen by a value that may itself come from any layer,
	// so it is applied last, as defaults: everything set explicitly wins.
	var profileName string
	var profileKeys map[string]any
	if contains(roleSections[opts.Role], "ingest") {
		profileName = strings.TrimSpace(v.GetString("ingest.profile"))
		if profileName != "none" {
			vals, err := profiles.Get(profileName)
			if err != nil {
				k, _ := KeyByName("ingest.profile")
				errs = append(errs, fmt.Errorf("%s must be one of %s or none, got %q", k.Label(), strings.Join(profiles.Names(), ", "), profileName))
				bad[k.Name] = true
			}
			profileKeys = vals
			for key, val := range vals {
				v.SetDefault(key, val)
			}
		}
	}

	values := make(map[string]any, len(Keys))
	sources := make(map[string]Source, len(Keys))
	for _, k := range Keys {
		src := sourceOf(k, opts.Role, flagOf, fileKeys, profileKeys, profileName)
		sources[k.Name] = src
		val, err := parse(k, v.Get(k.Name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %w (from %s)", k.Label(), err, src))
			bad[k.Name] = true
			// The default stands in so the other keys are still
			// validated, and their problems reported in the same run.
			if val, err = parse(k, k.defaultFor(opts.Role)); err != nil {
				panic("BUG: default of " + k.Name + ": " + err.Error())
			}
		}
		values[k.Name] = val
	}

	applyRole(opts.Role, values, sources)
	cfg := &Config{Role: opts.Role, values: values, sources: sources, envWarnings: envWarnings(opts.Role, os.Environ()), fileWarnings: fileWarnings}
	if err := decode(nested(values), &cfg.Sections); err != nil {
		panic("BUG: config table and Config struct disagree: " + err.Error())
	}
	errs = append(errs, cfg.validate().errs(bad)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// readFile reads the YAML file into v and returns the keys it sets, one
// error per unknown key (a typo would otherwise silently leave a default
// in place) and one warning per key of a retired setting. The error
// return is for a file that cannot be read.
func readFile(v *viper.Viper, path string) (keys map[string]bool, unknown []error, warnings []string, err error) {
	fv := viper.New()
	fv.SetConfigFile(path)
	fv.SetConfigType("yaml")
	if err := fv.ReadInConfig(); err != nil {
		return nil, nil, nil, fmt.Errorf("read config file %s: %w", path, err)
	}
	keys = map[string]bool{}
	names := fv.AllKeys()
	sort.Strings(names)
	for _, name := range names {
		if _, ok := KeyByName(name); ok {
			keys[name] = true
			continue
		}
		if r, ok := retiredKey(name); ok {
			warnings = append(warnings, fmt.Sprintf("config file %s: %s", path, r.warning()))
			continue
		}
		msg := fmt.Sprintf("config file %s: unknown key %s", path, name)
		if near := nearest(name, keyNames()); near != "" {
			msg += " (did you mean " + near + "?)"
		}
		unknown = append(unknown, errors.New(msg+"; see docs/configuration.md"))
	}
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return nil, nil, nil, fmt.Errorf("read config file %s: %w", path, err)
	}
	return keys, unknown, warnings, nil
}

func sourceOf(k Key, role string, flagOf map[string]string, fileKeys map[string]bool, profileKeys map[string]any, profile string) Source {
	if f, ok := flagOf[k.Name]; ok {
		return Source{Layer: "flag", Detail: "--" + f}
	}
	for _, env := range k.envFor(role) {
		if val, ok := os.LookupEnv(env); ok && (val != "" || k.EmptyEnv) {
			return Source{Layer: "env", Detail: env}
		}
	}
	if fileKeys[k.Name] {
		return Source{Layer: "file"}
	}
	if _, ok := profileKeys[k.Name]; ok {
		return Source{Layer: "profile", Detail: profile}
	}
	return Source{Layer: "default"}
}

// emptyEnvSet reports whether the first of k's variables that is set is
// set to the empty string.
func emptyEnvSet(k Key, role string) bool {
	for _, env := range k.envFor(role) {
		if val, ok := os.LookupEnv(env); ok {
			return val == ""
		}
	}
	return false
}

func (s Source) String() string {
	if s.Detail == "" {
		return s.Layer
	}
	return s.Layer + " " + s.Detail
}

// parse converts a raw value from any layer into the key's kind.
func parse(k Key, raw any) (any, error) {
	switch k.Kind {
	case String:
		switch x := raw.(type) {
		case string:
			return strings.TrimSpace(x), nil
		case int, int64, float64, bool:
			return fmt.Sprint(x), nil
		case nil:
			return "", nil
		}
	case Int:
		switch x := raw.(type) {
		case int:
			return x, nil
		case int64:
			if x >= math.MinInt32 && x <= math.MaxInt32 {
				return int(x), nil
			}
		case float64:
			if x == math.Trunc(x) && math.Abs(x) <= math.MaxInt32 {
				return int(x), nil
			}
		case string:
			if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
				return n, nil
			}
		}
		return nil, fmt.Errorf("must be an integer, got %s", quote(raw))
	case Bool:
		switch x := raw.(type) {
		case bool:
			return x, nil
		case string:
			if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
				return b, nil
			}
		}
		return nil, fmt.Errorf("must be true or false, got %s", quote(raw))
	case Float:
		switch x := raw.(type) {
		case float64:
			return x, nil
		case int:
			return float64(x), nil
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return f, nil
			}
		}
		return nil, fmt.Errorf("must be a number, got %s", quote(raw))
	case Duration:
		if s, ok := raw.(string); ok {
			if d, err := ParseDuration(s); err == nil {
				return d, nil
			}
		}
		if d, ok := raw.(time.Duration); ok {
			return d, nil
		}
		return nil, fmt.Errorf("must be a duration such as 90s, 15m or 7d, got %s", quote(raw))
	}
	return nil, fmt.Errorf("must be a %s, got %s", k.Kind, quote(raw))
}

// ParseDuration accepts Go durations and whole days ("7d"), which Go's
// parser lacks but token lifetimes are written in.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 36500 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

func quote(raw any) string {
	if s, ok := raw.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%v", raw)
}

// nested turns {"db.port": 1} into {"db": {"port": 1}} for decoding.
func nested(flat map[string]any) map[string]any {
	out := map[string]any{}
	for key, val := range flat {
		parts := strings.Split(key, ".")
		m := out
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = val
	}
	return out
}

func decode(in map[string]any, out *Sections) error {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result: out,
		// Both directions are errors so the table and the structs can never
		// drift apart: a key without a field, or a field without a key.
		ErrorUnused: true,
		ErrorUnset:  true,
	})
	if err != nil {
		return err
	}
	return dec.Decode(in)
}
