package mqtt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/framing"
)

// Defaults and bounds of the connection settings.
const (
	DefaultQoS       = 1
	DefaultDelimiter = "\n"
	DefaultTimeout   = 10 * time.Second
	// MaxBufferCapacity bounds one topic's frame buffer.
	MaxBufferCapacity = 64 << 20
	maxDelimiter      = 16
	maxTimeoutMS      = 300_000
)

// config is the decoded "connection" object, defaults applied.
type config struct {
	BrokerURL          string   `json:"brokerUrl"`
	Username           string   `json:"username"`
	Password           string   `json:"password"`
	ClientID           string   `json:"clientId"`
	Topics             []string `json:"topics"`
	QoS                *int     `json:"qos"`
	Delimiter          *string  `json:"delimiter"`
	BufferCapacity     int      `json:"bufferCapacity"`
	CleanSession       *bool    `json:"cleanSession"`
	CAFile             string   `json:"caFile"`
	CertFile           string   `json:"certFile"`
	KeyFile            string   `json:"keyFile"`
	InsecureSkipVerify bool     `json:"insecureSkipVerify"`
	TimeoutMS          int      `json:"timeoutMs"`

	broker *url.URL // parsed BrokerURL, default port filled in
}

func (c *config) qos() byte         { return byte(*c.QoS) }
func (c *config) delimiter() []byte { return []byte(*c.Delimiter) }
func (c *config) timeout() time.Duration {
	return time.Duration(c.TimeoutMS) * time.Millisecond
}
func (c *config) tls() bool {
	return c.broker.Scheme == "ssl" || c.broker.Scheme == "tls" || c.broker.Scheme == "wss"
}

// connectionFields maps each JSON key of the connection object to the
// field it decodes into; a key not in it is an error.
func (c *config) connectionFields() map[string]any {
	return map[string]any{
		"brokerUrl": &c.BrokerURL, "username": &c.Username, "password": &c.Password,
		"clientId": &c.ClientID, "topics": &c.Topics, "qos": &c.QoS, "delimiter": &c.Delimiter,
		"bufferCapacity": &c.BufferCapacity, "cleanSession": &c.CleanSession,
		"caFile": &c.CAFile, "certFile": &c.CertFile, "keyFile": &c.KeyFile,
		"insecureSkipVerify": &c.InsecureSkipVerify, "timeoutMs": &c.TimeoutMS,
	}
}

// parseConfig decodes and checks an endpoint's connection and data points
// without I/O. Every problem is a *adapters.FieldError; several are
// joined.
func parseConfig(ep adapters.Endpoint) (*config, error) {
	c := &config{}
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, adapters.Fieldf(field, format, args...))
	}

	raw := bytes.TrimSpace(ep.Connection)
	var obj map[string]json.RawMessage
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		fail("connection", "is required")
		return nil, errors.Join(errs...)
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		fail("connection", "must be an object: %v", err)
		return nil, errors.Join(errs...)
	}
	fields := c.connectionFields()
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys) // stable error order
	for _, k := range keys {
		dst, ok := fields[k]
		if !ok {
			fail("connection."+k, "unknown field")
			continue
		}
		if err := json.Unmarshal(obj[k], dst); err != nil {
			fail("connection."+k, "%s", typeMsg(err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	if u, err := parseBroker(c.BrokerURL); err != nil {
		fail("connection.brokerUrl", "%v", err)
	} else {
		c.broker = u
	}
	if len(c.Topics) == 0 {
		fail("connection.topics", "at least one topic filter is required")
	}
	seen := map[string]bool{}
	for i, t := range c.Topics {
		if err := ValidateFilter(t); err != nil {
			fail(fmt.Sprintf("connection.topics[%d]", i), "%v", err)
		} else if seen[t] {
			fail(fmt.Sprintf("connection.topics[%d]", i), "duplicate topic filter %q", t)
		}
		seen[t] = true
	}
	if c.QoS == nil {
		q := DefaultQoS
		c.QoS = &q
	} else if *c.QoS < 0 || *c.QoS > 2 {
		fail("connection.qos", "must be 0, 1 or 2")
	}
	if c.Delimiter == nil {
		d := DefaultDelimiter
		c.Delimiter = &d
	} else if *c.Delimiter == "" || len(*c.Delimiter) > maxDelimiter {
		fail("connection.delimiter", "must be 1 to %d bytes", maxDelimiter)
	}
	switch {
	case c.BufferCapacity < 0 || c.BufferCapacity > MaxBufferCapacity:
		fail("connection.bufferCapacity", "must be 1 to %d bytes (0 for the default)", MaxBufferCapacity)
	case c.BufferCapacity == 0 && ep.BufferCapacity > 0:
		c.BufferCapacity = min(ep.BufferCapacity, MaxBufferCapacity)
	case c.BufferCapacity == 0:
		c.BufferCapacity = framing.DefaultCapacity
	}
	if c.CleanSession == nil {
		t := true
		c.CleanSession = &t
	}
	switch {
	case c.TimeoutMS < 0 || c.TimeoutMS > maxTimeoutMS:
		fail("connection.timeoutMs", "must be 1 to %d (0 for the default)", maxTimeoutMS)
	case c.TimeoutMS == 0:
		c.TimeoutMS = int(DefaultTimeout / time.Millisecond)
	}
	if c.ClientID == "" {
		c.ClientID = defaultClientID(ep)
	} else if len(c.ClientID) > 65535 || !utf8.ValidString(c.ClientID) {
		fail("connection.clientId", "must be valid UTF-8 of at most 65535 bytes")
	}
	if c.Password != "" && c.Username == "" {
		fail("connection.password", "needs a username")
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		fail("connection.certFile", "certFile and keyFile go together")
	}
	if c.broker != nil && !c.tls() {
		for name, set := range map[string]bool{"caFile": c.CAFile != "", "certFile": c.CertFile != "",
			"keyFile": c.KeyFile != "", "insecureSkipVerify": c.InsecureSkipVerify} {
			if set {
				fail("connection."+name, "applies to ssl://, tls:// and wss:// brokers only")
			}
		}
	}
	errs = append(errs, validateDataPoints(ep.DataPoints)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

func typeMsg(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "must be " + jsonKind(te.Type.String())
	}
	return err.Error()
}

func jsonKind(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "string":
		return "a string"
	case "int":
		return "an integer"
	case "bool":
		return "a boolean"
	case "[]string":
		return "an array of strings"
	}
	return "of type " + goType
}

// parseBroker checks a broker URL and fills in the scheme's usual port.
func parseBroker(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	defaultPort := map[string]string{"tcp": "1883", "ssl": "8883", "tls": "8883", "ws": "80", "wss": "443"}[u.Scheme]
	if defaultPort == "" {
		return nil, fmt.Errorf("scheme must be tcp, ssl, tls, ws or wss, not %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errors.New("has no host")
	}
	if u.User != nil {
		return nil, errors.New("must not carry credentials: use username and password")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q out of range", p)
		}
	} else {
		u.Host = net.JoinHostPort(u.Hostname(), defaultPort)
	}
	if (u.Scheme == "tcp" || u.Scheme == "ssl" || u.Scheme == "tls") && strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("a %s:// URL has no path", u.Scheme)
	}
	return u, nil
}

// ValidateFilter checks an MQTT topic filter (MQTT 3.1.1 section 4.7): non-empty
// UTF-8 without NUL, at most 65535 bytes, '+' only as a whole level, '#'
// only as the whole last level. A shared subscription
// "$share/<group>/<filter>" needs a group without wildcards.
func ValidateFilter(f string) error {
	switch {
	case f == "":
		return errors.New("empty topic filter")
	case len(f) > 65535:
		return errors.New("topic filter longer than 65535 bytes")
	case !utf8.ValidString(f):
		return errors.New("topic filter is not valid UTF-8")
	case strings.ContainsRune(f, 0):
		return errors.New("topic filter contains NUL")
	}
	if rest, ok := strings.CutPrefix(f, "$share/"); ok {
		group, filter, found := strings.Cut(rest, "/")
		if !found || group == "" || filter == "" || strings.ContainsAny(group, "+#") {
			return fmt.Errorf("shared subscription %q must be $share/<group>/<filter>", f)
		}
		f = filter
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return fmt.Errorf("'#' must be the last level of %q", f)
		case l != "#" && strings.Contains(l, "#"):
			return fmt.Errorf("'#' must be a whole level in %q", f)
		case l != "+" && strings.Contains(l, "+"):
			return fmt.Errorf("'+' must be a whole level in %q", f)
		}
	}
	return nil
}

// Data point types: a value of another JSON kind is BAD_DATA.
var (
	numberTypes = []string{"number", "float", "float32", "float64", "double", "real",
		"int", "integer", "int16", "int32", "int64", "uint16", "uint32", "uint64"}
	boolTypes   = []string{"bool", "boolean"}
	stringTypes = []string{"string"}
)

func kindOf(typ string) string {
	t := strings.ToLower(typ)
	switch {
	case t == "" || t == "auto":
		return ""
	case contains(numberTypes, t):
		return "number"
	case contains(boolTypes, t):
		return "bool"
	case contains(stringTypes, t):
		return "string"
	}
	return "?"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func validateDataPoints(dps []adapters.DataPoint) []error {
	var errs []error
	names := map[string]bool{}
	for i, dp := range dps {
		at := fmt.Sprintf("data_points[%d]", i)
		if strings.TrimSpace(dp.Name) == "" {
			errs = append(errs, adapters.Fieldf(at+".name", "is required"))
		} else if names[dp.Name] {
			errs = append(errs, adapters.Fieldf(at+".name", "duplicate data point name %q", dp.Name))
		}
		names[dp.Name] = true
		if dp.Register == "" {
			errs = append(errs, adapters.Fieldf(at+".register", "is required: the field path in the JSON frame, e.g. sensors.temp"))
		} else if strings.HasPrefix(dp.Register, ".") || strings.HasSuffix(dp.Register, ".") || strings.Contains(dp.Register, "..") {
			errs = append(errs, adapters.Fieldf(at+".register", "%q has an empty path segment", dp.Register))
		}
		if kindOf(dp.Type) == "?" {
			errs = append(errs, adapters.Fieldf(at+".type", "unknown type %q: use a number type (%s), bool or string, or leave it empty",
				dp.Type, strings.Join(numberTypes, ", ")))
		}
		if dp.Scale != nil && (*dp.Scale != *dp.Scale || *dp.Scale > 1e300 || *dp.Scale < -1e300) {
			errs = append(errs, adapters.Fieldf(at+".scale", "must be a finite number"))
		}
	}
	return errs
}

// defaultClientID is stable across restarts, so a persistent session
// (cleanSession false) finds its queue again, and fits the 23 bytes every
// MQTT 3.1.1 broker must accept.
func defaultClientID(ep adapters.Endpoint) string {
	hexUUID := strings.ReplaceAll(strings.ToLower(ep.UUID), "-", "")
	if len(hexUUID) >= 14 {
		if _, err := hex.DecodeString(hexUUID[:14]); err == nil {
			return "edgeplat-" + hexUUID[:14]
		}
	}
	seed := ep.UUID
	if seed == "" {
		seed = ep.Name
	}
	sum := sha256.Sum256([]byte(seed))
	return "edgeplat-" + hex.EncodeToString(sum[:7])
}

// redactedBroker is the broker URL for diagnostics and logs.
func (c *config) redactedBroker() string { return c.broker.Redacted() }
