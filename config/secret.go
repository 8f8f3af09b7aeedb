package config

import "log/slog"

// Secret is a string that never prints: fmt, slog and --print-config all see
// "<redacted>". Call Reveal where the value is actually needed.
type Secret string

const redacted = "<redacted>"

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether a value was configured.
func (s Secret) IsSet() bool { return s != "" }

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return `config.Secret("` + s.String() + `")` }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps JSON and YAML encoders from printing the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
