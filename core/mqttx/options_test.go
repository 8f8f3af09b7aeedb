package mqttx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/prometheus/client_golang/prometheus"
)

func validOptions() Options {
	o := DefaultOptions()
	o.BrokerURL = "tcp://127.0.0.1:1883"
	o.ClientID = "test"
	return o
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Options)
		want string // substring of the error; "" for success
	}{
		{"defaults", func(*Options) {}, ""},
		{"mqtt scheme", func(o *Options) { o.BrokerURL = "mqtt://h" }, ""},
		{"tls with files", func(o *Options) {
			o.BrokerURL = "mqtts://h"
			o.CAFile, o.CertFile, o.KeyFile = "ca.pem", "c.pem", "k.pem"
		}, ""},
		{"wss", func(o *Options) { o.BrokerURL = "wss://h/mqtt" }, ""},
		{"empty url", func(o *Options) { o.BrokerURL = "" }, "broker url is empty"},
		{"bad scheme", func(o *Options) { o.BrokerURL = "http://h" }, `scheme must be tcp, mqtt, ssl, tls, mqtts, ws or wss, got "http"`},
		{"no host", func(o *Options) { o.BrokerURL = "tcp://:1883" }, "has no host"},
		{"tls files on plain url", func(o *Options) { o.CAFile = "ca.pem" }, "need a TLS broker URL"},
		{"cert without key", func(o *Options) { o.BrokerURL = "ssl://h"; o.CertFile = "c.pem" }, "go together"},
		{"persistent session needs client id", func(o *Options) { o.ClientID = "" }, "client id is required"},
		{"clean session may omit client id", func(o *Options) { o.ClientID = ""; o.CleanSession = true }, ""},
		{"password needs username", func(o *Options) { o.Password = "p" }, "password needs a username"},
		{"qos", func(o *Options) { o.QoS = 3 }, "qos must be 0..2, got 3"},
		{"shared group", func(o *Options) { o.SharedGroup = "a/b" }, "shared subscription group"},
		{"will topic", func(o *Options) { o.Will = &Will{Topic: "a/#"} }, "will: wildcards"},
		{"negative attempts", func(o *Options) { o.MaxReconnectAttempts = -1 }, "max reconnect attempts"},
		{"negative cooldown", func(o *Options) { o.FatalRecoveryCooldown = -time.Second }, "cooldown must be >= 0"},
		{"backoff max below base", func(o *Options) { o.BackoffBase, o.BackoffMax = 2*time.Second, time.Second }, "below backoff base"},
		{"short keepalive", func(o *Options) { o.KeepAlive = time.Millisecond }, "keepalive must be at least 1s"},
		{"negative queue", func(o *Options) { o.QueueCapacity = -1 }, "queue capacity must be >= 1"},
		{"negative unacked", func(o *Options) { o.ReconnectAfterUnacked = -1 }, "reconnect after unacked"},
		{"negative redeliver after", func(o *Options) { o.RedeliverAfter = -time.Second }, "redeliver after"},
		{"negative leave quiet", func(o *Options) { o.LeaveQuiet = -time.Second }, "leave quiet must be positive"},
		{"several problems at once", func(o *Options) { o.QoS = 7; o.ClientID = "" }, "client id is required for a persistent session\nmqtt: qos must be 0..2, got 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			tt.mod(&o)
			_, err := New(o)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewFillsDefaultsAndPorts(t *testing.T) {
	for scheme, port := range map[string]string{"tcp": "1883", "mqtt": "1883", "ssl": "8883", "tls": "8883", "mqtts": "8883", "ws": "80", "wss": "443"} {
		c, err := New(Options{BrokerURL: scheme + "://broker.example", ClientID: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if c.brokerURL.Port() != port {
			t.Errorf("%s: port %q, want %s", scheme, c.brokerURL.Port(), port)
		}
		if c.opts.QueueCapacity != DefaultQueueCapacity || c.opts.BackoffBase != time.Second || c.opts.BackoffMax != 8*time.Second || c.Name() != DefaultName {
			t.Errorf("defaults not filled: %+v", c.opts)
		}
		// Zero is literal where it means something.
		if c.opts.MaxReconnectAttempts != 0 || c.opts.FatalRecoveryCooldown != 0 || c.opts.ReconnectAfterUnacked != 0 || c.opts.RedeliverAfter != 0 || c.QoS() != 0 {
			t.Errorf("literal zero fields changed: %+v", c.opts)
		}
	}
}

func TestNewRejectsDuplicateMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := validOptions()
	o.Registerer = reg
	if _, err := New(o); err != nil {
		t.Fatal(err)
	}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), `register mqtt metrics for client "mqtt-client"`) {
		t.Fatalf("second client with the same name: %v", err)
	}
	o.Name = "agent-mqtt"
	if _, err := New(o); err != nil {
		t.Fatalf("second client with another name: %v", err)
	}
}

func TestOptionsFromConfig(t *testing.T) {
	cfg := config.MQTT{
		BrokerURL: "ssl://broker:8883", Username: "u", Password: "secret", QoS: 2,
		SharedSubscriptionGroup: "api", MaxReconnectAttempts: 20, FatalRecoveryCooldownMS: 60000,
		CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem",
	}
	o := OptionsFromConfig(cfg, "edgeplat-api-host")
	if o.BrokerURL != cfg.BrokerURL || o.Username != "u" || o.Password.Reveal() != "secret" || o.QoS != 2 ||
		o.SharedGroup != "api" || o.MaxReconnectAttempts != 20 || o.FatalRecoveryCooldown != time.Minute ||
		o.CAFile != "ca.pem" || o.CertFile != "c.pem" || o.KeyFile != "k.pem" {
		t.Errorf("OptionsFromConfig = %+v", o)
	}
	if o.ClientID != "edgeplat-api-host" || o.CleanSession {
		t.Errorf("client id %q clean %v, want the fallback id and a persistent session", o.ClientID, o.CleanSession)
	}
	if o.QueueCapacity != 1000 || o.BackoffBase != time.Second || o.BackoffMax != 8*time.Second {
		t.Errorf("spec defaults missing: %+v", o)
	}
	cfg.ClientID = "fixed"
	cfg.QoS = 9
	o = OptionsFromConfig(cfg, "fallback")
	if o.ClientID != "fixed" {
		t.Errorf("client id %q, want the configured one", o.ClientID)
	}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "qos must be 0..2") {
		t.Errorf("New with qos 9: %v", err)
	}
	if got := o.Password.String(); got == "secret" {
		t.Errorf("password prints in clear: %q", got)
	}
}

func TestDefaultClientID(t *testing.T) {
	id := DefaultClientID("edgeplat-api")
	if !strings.HasPrefix(id, "edgeplat-api-") || strings.ContainsAny(id, " /+#") || id != DefaultClientID("edgeplat-api") {
		t.Errorf("DefaultClientID = %q", id)
	}
}

func TestStartRejectsBadTLSFiles(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Options){
		"missing ca":   func(o *Options) { o.CAFile = filepath.Join(dir, "absent.pem") },
		"ca not pem":   func(o *Options) { o.CAFile = notPEM },
		"missing cert": func(o *Options) { o.CertFile, o.KeyFile = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem") },
	} {
		o := validOptions()
		o.BrokerURL = "tls://127.0.0.1:8883"
		mod(&o)
		c, err := New(o)
		if err != nil {
			t.Fatalf("%s: New: %v", name, err)
		}
		if err := c.Start(t.Context()); err == nil {
			t.Errorf("%s: Start succeeded", name)
		}
	}
}

func TestBrokerAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"tcp://broker", "broker:1883"},
		{"mqtt://127.0.0.1", "127.0.0.1:1883"},
		{"ssl://hub.example.com", "hub.example.com:8883"},
		{"wss://h/mqtt", "h:443"},
		{"tcp://broker:2883", "broker:2883"},
		{"ftp://broker", ""},
	} {
		got, err := BrokerAddr(tc.in)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("BrokerAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
