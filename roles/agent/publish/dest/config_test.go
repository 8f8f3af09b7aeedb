package dest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		typ    string
		config string
		fields []string // nil: valid
	}{
		{"platform empty", TypePlatform, ``, nil},
		{"platform null", TypePlatform, `null`, nil},
		{"platform {}", TypePlatform, `{}`, nil},
		{"platform with config", TypePlatform, `{"url":"tcp://h"}`, []string{"config_json"}},
		{"platform receipts off", TypePlatform, `{"receipts":false}`, nil},
		{"platform receipt wait", TypePlatform, `{"receipts":true,"receiptWaitMs":5000}`, nil},
		{"platform receipt wait too short", TypePlatform, `{"receiptWaitMs":10}`, []string{"config_json.receiptWaitMs"}},
		{"platform receipts not a bool", TypePlatform, `{"receipts":"yes"}`, []string{"config_json"}},
		{"mqtt receipts off", TypeMQTT, `{"url":"tcp://b","receipts":false}`, nil},
		{"mqtt receipts on", TypeMQTT, `{"url":"tcp://b","receipts":true}`, []string{"config_json.receipts"}},
		{"tsdb receipt wait", TypeTSDB, `{"url":"http://influx:8086","org":"o","bucket":"b","token":"t","receiptWaitMs":5000}`, []string{"config_json.receiptWaitMs"}},
		{"unknown type", "kafka", `{}`, []string{"type"}},

		{"mqtt minimal", TypeMQTT, `{"url":"tcp://broker:1883"}`, nil},
		{"mqtt every field", TypeMQTT, `{"url":"mqtts://b","username":"u","password":"p","clientId":"c","caFile":"/ca","certFile":"/c","keyFile":"/k","insecureSkipVerify":false,"qos":0}`, nil},
		{"mqtt missing config", TypeMQTT, ``, []string{"config_json"}},
		{"mqtt unknown field", TypeMQTT, `{"url":"tcp://b","colour":"red"}`, []string{"config_json"}},
		{"mqtt bad scheme", TypeMQTT, `{"url":"http://b"}`, []string{"config_json.url"}},
		{"mqtt credentials in url", TypeMQTT, `{"url":"tcp://u:p@b"}`, []string{"config_json.url"}},
		{"mqtt tls files on plain url", TypeMQTT, `{"url":"tcp://b","caFile":"/ca"}`, []string{"config_json.url"}},
		{"mqtt password without user", TypeMQTT, `{"url":"tcp://b","password":"p"}`, []string{"config_json.username"}},
		{"mqtt cert without key", TypeMQTT, `{"url":"ssl://b","certFile":"/c"}`, []string{"config_json.keyFile"}},
		{"mqtt insecure", TypeMQTT, `{"url":"ssl://b","insecureSkipVerify":true}`, []string{"config_json.insecureSkipVerify"}},
		{"mqtt qos 2", TypeMQTT, `{"url":"tcp://b","qos":2}`, []string{"config_json.qos"}},

		{"hub-a", TypeHubA, `{"endpoint":"abc-ats.iot.eu-west-1.amazonaws.com","thingName":"pump-1","certFile":"/c","keyFile":"/k"}`, nil},
		{"hub-a missing", TypeHubA, `{}`, []string{"config_json.certFile", "config_json.endpoint", "config_json.keyFile", "config_json.thingName"}},
		{"hub-a endpoint url", TypeHubA, `{"endpoint":"ssl://x:8883","thingName":"t","certFile":"/c","keyFile":"/k","port":70000}`, []string{"config_json.endpoint", "config_json.port"}},

		{"hub-b", TypeHubB, `{"hostName":"myhub.azure-devices.net","deviceId":"dev-1","sharedAccessKey":"MDEy"}`, nil},
		{"hub-b bad key", TypeHubB, `{"hostName":"h","deviceId":"d","sharedAccessKey":"not base64!"}`, []string{"config_json.sharedAccessKey"}},
		{"hub-b ttl", TypeHubB, `{"hostName":"h","deviceId":"d","sharedAccessKey":"MDEy","tokenTtlSeconds":5}`, []string{"config_json.tokenTtlSeconds"}},
		{"hub-b missing", TypeHubB, `{}`, []string{"config_json.deviceId", "config_json.hostName", "config_json.sharedAccessKey"}},

		{"hub-c region", TypeHubC, `{"productKey":"a1B2c3","deviceName":"pump-1","deviceSecret":"s","regionId":"cn-shanghai"}`, nil},
		{"hub-c host", TypeHubC, `{"productKey":"a1B2c3","deviceName":"pump-1","deviceSecret":"s","host":"127.0.0.1","port":1883}`, nil},
		{"hub-c no host or region", TypeHubC, `{"productKey":"p","deviceName":"d","deviceSecret":"s"}`, []string{"config_json.regionId"}},
		{"hub-c client id separator", TypeHubC, `{"productKey":"p","deviceName":"d","deviceSecret":"s","regionId":"r","clientId":"a|b"}`, []string{"config_json.clientId"}},

		{"tsdb", TypeTSDB, `{"url":"http://influx:8086","org":"o","bucket":"b","token":"t"}`, nil},
		{"tsdb missing", TypeTSDB, `{"url":"ftp://x"}`, []string{"config_json.bucket", "config_json.org", "config_json.token", "config_json.url"}},
		{"tsdb query in url", TypeTSDB, `{"url":"http://influx:8086?org=x","org":"o","bucket":"b","token":"t"}`, []string{"config_json.url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.typ, json.RawMessage(tt.config))
			got := adapters.FieldsOf(err)
			if !slices.Equal(got, tt.fields) {
				t.Fatalf("fields %q, want %q (err: %v)", got, tt.fields, err)
			}
			var fe *adapters.FieldError
			if err != nil && !errors.As(err, &fe) {
				t.Fatalf("error %v is not a field error", err)
			}
		})
	}
}

// TestSecretKeysCoverSecrets keeps SecretKeys in step with the configs:
// every credential field of every type is masked.
func TestSecretKeysCoverSecrets(t *testing.T) {
	for _, k := range []string{"password", "token", "sharedAccessKey", "deviceSecret"} {
		if !slices.Contains(SecretKeys, k) {
			t.Errorf("SecretKeys lacks %q", k)
		}
	}
}

var fixedNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestHubCredentials(t *testing.T) {
	// Expected values come from an independent implementation of the
	// vendors' published algorithms (Python's hmac, hashlib and
	// urllib.parse, as in Azure's own SAS sample).
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	b := hubBConfig{HostName: "myhub.azure-devices.net", DeviceID: "dev-1", SharedAccessKey: key}
	p := b.connection(1, fixedNow.Add(-time.Hour))
	wantSAS := "SharedAccessSignature sr=myhub.azure-devices.net%2Fdevices%2Fdev-1&sig=5W1NI8uZBesoNzje2alrpL2%2BNAjioq9OlNxh6Kixf58%3D&se=1767225600"
	if p.Password != wantSAS {
		t.Errorf("SAS token\n got %s\nwant %s", p.Password, wantSAS)
	}
	if p.Username != "myhub.azure-devices.net/dev-1/?api-version=2021-04-12" || p.ClientID != "dev-1" || p.URL != "ssl://myhub.azure-devices.net:8883" {
		t.Errorf("azure connection %+v", p)
	}
	if !p.Expires.Equal(fixedNow) {
		t.Errorf("expires %s, want %s", p.Expires, fixedNow)
	}

	c := hubCConfig{ProductKey: "a1B2c3", DeviceName: "pump-1", DeviceSecret: "s3cr3t", RegionID: "cn-shanghai"}
	q := c.connection(1, fixedNow)
	if q.Password != "563989ea26591410e36453243ab9de921b56f11fb758caece09ef1b9cc79f1bf" {
		t.Errorf("aliyun password %s", q.Password)
	}
	if q.ClientID != "pump-1|securemode=2,signmethod=hmacsha256,timestamp=1767225600000|" || q.Username != "pump-1&a1B2c3" ||
		q.URL != "ssl://a1B2c3.iot-as-mqtt.cn-shanghai.aliyuncs.com:8883" {
		t.Errorf("aliyun connection %+v", q)
	}

	a := hubAConfig{Endpoint: "abc-ats.iot.eu-west-1.amazonaws.com", ThingName: "pump-1", CertFile: "/c", KeyFile: "/k"}
	r := a.connection(1, fixedNow)
	if r.ClientID != "pump-1" || r.Username != "" || r.Password != "" || r.URL != "ssl://abc-ats.iot.eu-west-1.amazonaws.com:8883" {
		t.Errorf("aws connection %+v", r)
	}
}

func TestTopic(t *testing.T) {
	env := Env{Platform: PlatformCredentials{BrokerURL: "tcp://cloud:1883", TopicPrefix: "i/TTTT/a/AAAA"}}
	tests := []struct {
		typ, config          string
		route, ep, wantTopic string
	}{
		{TypePlatform, ``, "ignored", "line/1", "i/TTTT/a/AAAA/endpoints/line/1"},
		{TypeMQTT, `{"url":"tcp://b"}`, "", "line/1", ""},
		{TypeMQTT, `{"url":"tcp://b"}`, "plant/{mqttTopic}/data", "line/1", "plant/line/1/data"},
		{TypeTSDB, `{"url":"http://b","org":"o","bucket":"b","token":"t"}`, "", "x", ""},
		{TypeHubA, `{"endpoint":"e","thingName":"pump-1","certFile":"/c","keyFile":"/k"}`, "", "x", "dt/edgeplat/pump-1/telemetry"},
		{TypeHubA, `{"endpoint":"e","thingName":"pump-1","certFile":"/c","keyFile":"/k"}`, "things/{thingName}/{mqttTopic}/{unknown}", "x/y", "things/pump-1/x/y/{unknown}"},
		{TypeHubB, `{"hostName":"h","deviceId":"dev-1","sharedAccessKey":"MDEy"}`, "", "x", "devices/dev-1/messages/events/"},
		{TypeHubB, `{"hostName":"h","deviceId":"dev-1","sharedAccessKey":"MDEy"}`, "devices/{deviceId}/messages/events/ep={mqttTopic}", "x", "devices/dev-1/messages/events/ep=x"},
		{TypeHubC, `{"productKey":"pk","deviceName":"dn","deviceSecret":"s","regionId":"r"}`, "", "x", "/pk/dn/user/update"},
		{TypeHubC, `{"productKey":"pk","deviceName":"dn","deviceSecret":"s","regionId":"r"}`, "/{productKey}/{deviceName}/user/{mqttTopic}", "x", "/pk/dn/user/x"},
	}
	for _, tt := range tests {
		t.Run(tt.typ+" "+tt.route, func(t *testing.T) {
			tr, err := New(store.Destination{ID: 7, Type: tt.typ, Config: json.RawMessage(tt.config)}, env)
			if err != nil {
				t.Fatal(err)
			}
			if got := tr.Topic(tt.route, tt.ep); got != tt.wantTopic {
				t.Errorf("Topic(%q, %q) = %q, want %q", tt.route, tt.ep, got, tt.wantTopic)
			}
		})
	}
}

// TestPlatformNotProvisioned: without credentials the platform transport
// starts, stays not connected and fails sends as transient.
func TestPlatformNotProvisioned(t *testing.T) {
	tr, err := New(store.Destination{ID: 1, Type: TypePlatform}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Stop(context.Background()) }()
	errs := tr.Send(t.Context(), []Message{{Topic: "x", Payload: []byte("p")}})
	if !errors.Is(errs[0], ErrNotConnected) {
		t.Fatalf("send: %v, want ErrNotConnected", errs[0])
	}
	s := tr.Status()
	if tr.Connected() || s.State != "not-provisioned" || !strings.Contains(s.LastError, "not provisioned") {
		t.Fatalf("status %+v", s)
	}
	if tr.Topic("", "x") != "" {
		t.Fatalf("topic of an unprovisioned platform: %q", tr.Topic("", "x"))
	}
}

// TestSendBeforeStart: a transport that never started reports every
// message as not connected.
func TestSendBeforeStart(t *testing.T) {
	for _, d := range []store.Destination{
		{ID: 1, Type: TypeMQTT, Config: json.RawMessage(`{"url":"tcp://127.0.0.1:1"}`)},
		{ID: 2, Type: TypeTSDB, Config: json.RawMessage(`{"url":"http://127.0.0.1:1","org":"o","bucket":"b","token":"t"}`)},
	} {
		tr, err := New(d, Env{})
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range tr.Send(t.Context(), []Message{{Topic: "a"}, {Topic: "b"}}) {
			if !errors.Is(err, ErrNotConnected) {
				t.Errorf("%s: %v, want ErrNotConnected", d.Type, err)
			}
		}
	}
}

func TestNewRejectsInvalid(t *testing.T) {
	_, err := New(store.Destination{ID: 3, Type: TypeTSDB, Config: json.RawMessage(`{}`)}, Env{})
	if err == nil || !slices.Contains(adapters.FieldsOf(err), "config_json.url") {
		t.Fatalf("New: %v", err)
	}
}

// TestReceiptOptions: receipts are on by default for platform only, and
// the wait defaults to 30 s.
func TestReceiptOptions(t *testing.T) {
	tests := []struct {
		typ, config string
		want        ReceiptOptions
	}{
		{TypePlatform, ``, ReceiptOptions{On: true, Wait: 30 * time.Second}},
		{TypePlatform, `{"receiptWaitMs":5000}`, ReceiptOptions{On: true, Wait: 5 * time.Second}},
		{TypePlatform, `{"receipts":false}`, ReceiptOptions{On: false, Wait: 30 * time.Second}},
		{TypeMQTT, `{"url":"tcp://b"}`, ReceiptOptions{On: false, Wait: 30 * time.Second}},
		{TypeHubB, `{"hostName":"h","deviceId":"d","sharedAccessKey":"MDEy"}`, ReceiptOptions{On: false, Wait: 30 * time.Second}},
		{TypeTSDB, `{"url":"http://influx:8086","org":"o","bucket":"b","token":"t"}`, ReceiptOptions{On: false, Wait: 30 * time.Second}},
	}
	for _, tt := range tests {
		got, err := Receipts(tt.typ, json.RawMessage(tt.config))
		if err != nil || got != tt.want {
			t.Errorf("Receipts(%s, %s) = %+v, %v; want %+v", tt.typ, tt.config, got, err, tt.want)
		}
	}
}

// FuzzReceiptOptions: whatever config_json a client sends, Receipts
// agrees with Validate, never turns receipts on for a type other than
// platform, and gives a wait within its bounds.
func FuzzReceiptOptions(f *testing.F) {
	for _, c := range []string{``, `{}`, `{"receipts":false}`, `{"receipts":true,"receiptWaitMs":5000}`,
		`{"receiptWaitMs":1}`, `{"url":"tcp://b","receipts":true}`, `{"receipts":null}`, `[]`} {
		for _, typ := range []string{TypePlatform, TypeMQTT, TypeTSDB, TypeHubB} {
			f.Add(typ, c)
		}
	}
	f.Fuzz(func(t *testing.T, typ, config string) {
		o, err := Receipts(typ, json.RawMessage(config))
		if verr := Validate(typ, json.RawMessage(config)); (err == nil) != (verr == nil) {
			t.Fatalf("Receipts error %v, Validate error %v", err, verr)
		}
		if err != nil {
			return
		}
		if o.On && typ != TypePlatform {
			t.Fatalf("receipts on for %s with %s", typ, config)
		}
		if o.Wait < minReceiptWaitMs*time.Millisecond || o.Wait > maxReceiptWaitMs*time.Millisecond {
			t.Fatalf("wait %s out of bounds for %s", o.Wait, config)
		}
	})
}
