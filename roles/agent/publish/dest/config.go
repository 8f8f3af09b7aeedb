package dest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Defaults of the config_json fields.
const (
	DefaultHubPort         = 8883
	DefaultTokenTTLSeconds = 3600
	// minTokenTTLSeconds keeps renewals (at 80 % of the lifetime) from
	// reconnecting more than about once a minute.
	minTokenTTLSeconds = 60
	maxTokenTTLSeconds = 365 * 24 * 3600
)

// platformConfig is the config of the platform destination: it connects
// with the device's provisioned credentials (Env.Platform), so only the
// receipt options are its own.
type platformConfig struct {
	receiptConfig
}

// receiptConfig holds the delivery-receipt options every type accepts
// (docs/agent-delivery.md, section Delivery receipts). Only the platform's
// cloud sends receipts, so only the platform may turn them on.
type receiptConfig struct {
	// Receipts keeps sent records until the cloud's receipt; default true
	// for platform, and only false is accepted for other types.
	Receipts *bool `json:"receipts,omitempty"`
	// ReceiptWaitMs is how long a sent record waits for its receipt
	// before it is sent again; default DefaultReceiptWaitMs.
	ReceiptWaitMs int `json:"receiptWaitMs,omitempty"`
}

// Bounds of receiptWaitMs: a wait shorter than a receipt's round trip
// (receipts are batched up to a second) would re-send everything.
const (
	DefaultReceiptWaitMs = 30000
	minReceiptWaitMs     = 2000
	maxReceiptWaitMs     = 3600000
)

func (c receiptConfig) validate(f *fields, platform bool) {
	if !platform {
		if c.Receipts != nil && *c.Receipts {
			f.add("receipts", "can be true only for platform: other destinations send no receipts")
		}
		if c.ReceiptWaitMs != 0 {
			f.add("receiptWaitMs", "applies only to platform, which has receipts")
		}
		return
	}
	if c.ReceiptWaitMs != 0 && (c.ReceiptWaitMs < minReceiptWaitMs || c.ReceiptWaitMs > maxReceiptWaitMs) {
		f.add("receiptWaitMs", "must be %d..%d, got %d", minReceiptWaitMs, maxReceiptWaitMs, c.ReceiptWaitMs)
	}
}

// ReceiptOptions is whether a destination keeps sent records until a
// receipt, and how long each waits for one.
type ReceiptOptions struct {
	On   bool
	Wait time.Duration
}

func (c receiptConfig) receipts() receiptConfig { return c }

func (c receiptConfig) options(platform bool) ReceiptOptions {
	o := ReceiptOptions{On: platform, Wait: DefaultReceiptWaitMs * time.Millisecond}
	if c.Receipts != nil {
		o.On = o.On && *c.Receipts
	}
	if c.ReceiptWaitMs != 0 {
		o.Wait = time.Duration(c.ReceiptWaitMs) * time.Millisecond
	}
	return o
}

// Receipts returns the receipt options of a destination of type typ with
// config; the error is Validate's.
func Receipts(typ string, config json.RawMessage) (ReceiptOptions, error) {
	cfg, err := parse(typ, config)
	if err != nil {
		return ReceiptOptions{}, err
	}
	rc, ok := cfg.(interface{ receipts() receiptConfig })
	if !ok {
		panic(fmt.Sprintf("BUG: dest: config %T has no receipt options", cfg))
	}
	return rc.receipts().options(typ == TypePlatform), nil
}

// mqttConfig is a generic MQTT broker. The field names are the ones the
// agent's API accepted before this package existed.
type mqttConfig struct {
	receiptConfig
	URL      string `json:"url"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	ClientID string `json:"clientId,omitempty"`
	CAFile   string `json:"caFile,omitempty"`
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// InsecureSkipVerify is accepted only as false: certificate checks are
	// not switched off; caFile trusts a private CA instead.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	QoS                *int `json:"qos,omitempty"`
}

// hubAConfig is a thing of AWS IoT Core: mutual TLS with the thing's
// X.509 certificate, the thing name as client id, no password.
type hubAConfig struct {
	receiptConfig
	Endpoint  string `json:"endpoint"`
	Port      int    `json:"port,omitempty"`
	ThingName string `json:"thingName"`
	CertFile  string `json:"certFile"`
	KeyFile   string `json:"keyFile"`
	CAFile    string `json:"caFile,omitempty"`
	QoS       *int   `json:"qos,omitempty"`
}

// hubBConfig is a device of Azure IoT Hub with a symmetric key, from
// which SAS tokens are made.
type hubBConfig struct {
	receiptConfig
	HostName        string `json:"hostName"`
	DeviceID        string `json:"deviceId"`
	SharedAccessKey string `json:"sharedAccessKey"`
	TokenTTLSeconds int    `json:"tokenTtlSeconds,omitempty"`
	Port            int    `json:"port,omitempty"`
	CAFile          string `json:"caFile,omitempty"`
	QoS             *int   `json:"qos,omitempty"`
}

// hubCConfig is a device of Alibaba Cloud IoT Platform with its device
// secret (the "one device, one secret" authentication).
type hubCConfig struct {
	receiptConfig
	ProductKey   string `json:"productKey"`
	DeviceName   string `json:"deviceName"`
	DeviceSecret string `json:"deviceSecret"`
	Host         string `json:"host,omitempty"`
	RegionID     string `json:"regionId,omitempty"`
	Port         int    `json:"port,omitempty"`
	ClientID     string `json:"clientId,omitempty"`
	CAFile       string `json:"caFile,omitempty"`
	QoS          *int   `json:"qos,omitempty"`
}

// tsdbConfig is an InfluxDB v2 write API (or a database that speaks it,
// such as VictoriaMetrics).
type tsdbConfig struct {
	receiptConfig
	URL    string `json:"url"`
	Org    string `json:"org"`
	Bucket string `json:"bucket"`
	Token  string `json:"token"`
}

// parse decodes and checks config for typ, returning one of the config
// types above.
func parse(typ string, raw json.RawMessage) (any, error) {
	empty := len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
	switch typ {
	case TypePlatform:
		var c platformConfig
		if empty {
			return c, nil
		}
		// Anything but the receipt options is refused: the connection
		// uses the device's provisioned credentials.
		if err := decode(raw, false, &c); err != nil {
			return nil, err
		}
		var f fields
		c.validate(&f, true)
		return c, f.err()
	case TypeMQTT:
		var c mqttConfig
		if err := decode(raw, empty, &c); err != nil {
			return nil, err
		}
		return c, c.validate()
	case TypeHubA:
		var c hubAConfig
		if err := decode(raw, empty, &c); err != nil {
			return nil, err
		}
		return c, c.validate()
	case TypeHubB:
		var c hubBConfig
		if err := decode(raw, empty, &c); err != nil {
			return nil, err
		}
		return c, c.validate()
	case TypeHubC:
		var c hubCConfig
		if err := decode(raw, empty, &c); err != nil {
			return nil, err
		}
		return c, c.validate()
	case TypeTSDB:
		var c tsdbConfig
		if err := decode(raw, empty, &c); err != nil {
			return nil, err
		}
		return c, c.validate()
	}
	return nil, adapters.Fieldf("type", "must be one of %s, got %q", strings.Join(Types(), ", "), typ)
}

func decode(raw json.RawMessage, empty bool, dst any) error {
	if empty {
		return adapters.Fieldf("config_json", "is required for this type")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return adapters.Fieldf("config_json", "%v", err)
	}
	if dec.More() {
		return adapters.Fieldf("config_json", "must be one JSON object")
	}
	return nil
}

// fields collects the problems of one config.
type fields []error

func (f *fields) add(field, format string, args ...any) {
	*f = append(*f, adapters.Fieldf("config_json."+field, format, args...))
}

func (f *fields) required(field, v string) bool {
	if strings.TrimSpace(v) == "" {
		f.add(field, "is required")
		return false
	}
	return true
}

func (f *fields) err() error { return errors.Join(*f...) }

func (f *fields) qos(q *int) {
	if q != nil && *q != 0 && *q != 1 {
		f.add("qos", "must be 0 or 1, got %d", *q)
	}
}

func (f *fields) port(p int) {
	if p < 0 || p > 65535 {
		f.add("port", "must be 1..65535, got %d", p)
	}
}

// host checks a bare host name or IP address: the hubs take the port in
// a field of its own.
func (f *fields) host(field, h string) {
	if !f.required(field, h) {
		return
	}
	if net.ParseIP(h) != nil {
		return
	}
	if strings.ContainsAny(h, "/:@ \t?#") {
		f.add(field, "must be a host name without scheme, port or path, got %q", h)
	}
}

func (f *fields) tlsFiles(ca, cert, key string, certRequired bool) {
	switch {
	case certRequired && cert == "":
		f.add("certFile", "is required")
	case cert == "" && key != "":
		f.add("certFile", "is required with keyFile")
	}
	switch {
	case certRequired && key == "":
		f.add("keyFile", "is required")
	case key == "" && cert != "":
		f.add("keyFile", "is required with certFile")
	}
	_ = ca // optional: the system roots are used without it
}

func qosOf(q *int) byte {
	if q == nil {
		return 1
	}
	return byte(*q)
}

func portOr(p, def int) int {
	if p == 0 {
		return def
	}
	return p
}

func (c mqttConfig) validate() error {
	var f fields
	c.receiptConfig.validate(&f, false)
	if f.required("url", c.URL) {
		if u, err := url.Parse(c.URL); err != nil {
			f.add("url", "is not a URL: %v", err)
		} else {
			schemes := []string{"tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss"}
			switch {
			case !slices.Contains(schemes, strings.ToLower(u.Scheme)):
				f.add("url", "scheme must be one of %s, got %q", strings.Join(schemes, ", "), u.Scheme)
			case u.Hostname() == "":
				f.add("url", "must name a host")
			case u.User != nil:
				f.add("url", "must not carry credentials; use username and password")
			}
			tlsScheme := slices.Contains([]string{"ssl", "tls", "mqtts", "wss"}, strings.ToLower(u.Scheme))
			if !tlsScheme && (c.CAFile != "" || c.CertFile != "" || c.KeyFile != "") {
				f.add("url", "must be a TLS URL (ssl, tls, mqtts, wss) when caFile, certFile or keyFile is set")
			}
		}
	}
	if c.Password != "" && c.Username == "" {
		f.add("username", "is required with a password (MQTT 3.1.1)")
	}
	if len(c.ClientID) > 65535 {
		f.add("clientId", "must be at most 65535 bytes")
	}
	f.tlsFiles(c.CAFile, c.CertFile, c.KeyFile, false)
	if c.InsecureSkipVerify {
		f.add("insecureSkipVerify", "is not supported: give the broker's CA certificate in caFile instead")
	}
	f.qos(c.QoS)
	return f.err()
}

func (c hubAConfig) validate() error {
	var f fields
	c.receiptConfig.validate(&f, false)
	f.host("endpoint", c.Endpoint)
	f.port(c.Port)
	f.required("thingName", c.ThingName)
	f.tlsFiles(c.CAFile, c.CertFile, c.KeyFile, true)
	f.qos(c.QoS)
	return f.err()
}

func (c hubBConfig) validate() error {
	var f fields
	c.receiptConfig.validate(&f, false)
	f.host("hostName", c.HostName)
	f.port(c.Port)
	f.required("deviceId", c.DeviceID)
	if f.required("sharedAccessKey", c.SharedAccessKey) {
		if _, err := base64.StdEncoding.DecodeString(c.SharedAccessKey); err != nil {
			f.add("sharedAccessKey", "must be the base64 device key: %v", err)
		}
	}
	if c.TokenTTLSeconds != 0 && (c.TokenTTLSeconds < minTokenTTLSeconds || c.TokenTTLSeconds > maxTokenTTLSeconds) {
		f.add("tokenTtlSeconds", "must be %d..%d, got %d", minTokenTTLSeconds, maxTokenTTLSeconds, c.TokenTTLSeconds)
	}
	f.qos(c.QoS)
	return f.err()
}

func (c hubCConfig) validate() error {
	var f fields
	c.receiptConfig.validate(&f, false)
	f.required("productKey", c.ProductKey)
	f.required("deviceName", c.DeviceName)
	f.required("deviceSecret", c.DeviceSecret)
	if c.Host != "" {
		f.host("host", c.Host)
	} else if strings.TrimSpace(c.RegionID) == "" {
		f.add("regionId", "is required when host is not given (the host is {productKey}.iot-as-mqtt.{regionId}.aliyuncs.com)")
	} else if strings.ContainsAny(c.RegionID, "./:@ ") {
		f.add("regionId", "must be a region id such as cn-shanghai, got %q", c.RegionID)
	}
	if strings.ContainsAny(c.ProductKey, "./:@ ") {
		f.add("productKey", "must not contain '.', '/', ':', '@' or spaces, got %q", c.ProductKey)
	}
	// The client id travels between the '|' separators of the wire client id.
	if strings.ContainsAny(c.ClientID, "|,") {
		f.add("clientId", "must not contain '|' or ',', got %q", c.ClientID)
	}
	f.port(c.Port)
	f.qos(c.QoS)
	return f.err()
}

func (c tsdbConfig) validate() error {
	var f fields
	c.receiptConfig.validate(&f, false)
	if f.required("url", c.URL) {
		if u, err := url.Parse(c.URL); err != nil {
			f.add("url", "is not a URL: %v", err)
		} else {
			switch {
			case u.Scheme != "http" && u.Scheme != "https":
				f.add("url", "scheme must be http or https, got %q", u.Scheme)
			case u.Hostname() == "":
				f.add("url", "must name a host")
			case u.User != nil:
				f.add("url", "must not carry credentials; use token")
			case u.RawQuery != "" || u.Fragment != "":
				f.add("url", "must not carry a query or fragment; org and bucket have fields of their own")
			}
		}
	}
	f.required("org", c.Org)
	f.required("bucket", c.Bucket)
	f.required("token", c.Token)
	return f.err()
}

// hostPort joins a configured host and port into a broker URL.
func hostPort(scheme, host string, port int) string {
	return fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(host, fmt.Sprint(port)))
}
