package mqtt

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/framing"
)

func endpoint(conn string, dps ...adapters.DataPoint) adapters.Endpoint {
	return adapters.Endpoint{
		UUID: "0b7c6f52-8d3e-4f0a-9c1b-2e5d7a9f1c3e", Name: "line-1", Protocol: Protocol,
		Connection: json.RawMessage(conn), Enabled: true, DataPoints: dps,
	}
}

func TestValidate(t *testing.T) {
	const ok = `"brokerUrl":"tcp://broker:1883","topics":["plant/+/data"]`
	scale := 0.1
	tests := []struct {
		name string
		conn string
		dps  []adapters.DataPoint
		want []string // fields in error, sorted
	}{
		{name: "minimal", conn: `{` + ok + `}`},
		{name: "everything", conn: `{"brokerUrl":"ssl://broker","username":"u","password":"p","clientId":"c1",
			"topics":["a/#","$share/g/b/+"],"qos":2,"delimiter":"\r\n","bufferCapacity":4096,"cleanSession":false,
			"caFile":"/ca.pem","certFile":"/c.pem","keyFile":"/k.pem","insecureSkipVerify":true,"timeoutMs":5000}`,
			dps: []adapters.DataPoint{{Name: "t", Register: "sensors.temp", Type: "float32", Scale: &scale}, {Name: "on", Register: "on", Type: "bool"}}},
		{name: "websocket", conn: `{"brokerUrl":"wss://broker/mqtt","topics":["a"]}`},
		{name: "no connection", conn: ``, want: []string{"connection"}},
		{name: "null connection", conn: `null`, want: []string{"connection"}},
		{name: "not an object", conn: `[1]`, want: []string{"connection"}},
		{name: "unknown field", conn: `{` + ok + `,"host":"x","port":1}`, want: []string{"connection.host", "connection.port"}},
		{name: "wrong types", conn: `{"brokerUrl":1,"topics":"a","qos":"1"}`, want: []string{"connection.brokerUrl", "connection.qos", "connection.topics"}},
		{name: "no broker", conn: `{"topics":["a"]}`, want: []string{"connection.brokerUrl"}},
		{name: "http broker", conn: `{"brokerUrl":"http://x","topics":["a"]}`, want: []string{"connection.brokerUrl"}},
		{name: "broker without host", conn: `{"brokerUrl":"tcp://:1883","topics":["a"]}`, want: []string{"connection.brokerUrl"}},
		{name: "broker port out of range", conn: `{"brokerUrl":"tcp://x:70000","topics":["a"]}`, want: []string{"connection.brokerUrl"}},
		{name: "credentials in URL", conn: `{"brokerUrl":"tcp://u:p@x","topics":["a"]}`, want: []string{"connection.brokerUrl"}},
		{name: "no topics", conn: `{"brokerUrl":"tcp://x"}`, want: []string{"connection.topics"}},
		{name: "empty topics", conn: `{"brokerUrl":"tcp://x","topics":[]}`, want: []string{"connection.topics"}},
		{name: "bad filters", conn: `{"brokerUrl":"tcp://x","topics":["a/#/b","a+","","ok","ok","$share//x"]}`,
			want: []string{"connection.topics[0]", "connection.topics[1]", "connection.topics[2]", "connection.topics[4]", "connection.topics[5]"}},
		{name: "qos 3", conn: `{` + ok + `,"qos":3}`, want: []string{"connection.qos"}},
		{name: "empty delimiter", conn: `{` + ok + `,"delimiter":""}`, want: []string{"connection.delimiter"}},
		{name: "negative capacity", conn: `{` + ok + `,"bufferCapacity":-1}`, want: []string{"connection.bufferCapacity"}},
		{name: "negative timeout", conn: `{` + ok + `,"timeoutMs":-5}`, want: []string{"connection.timeoutMs"}},
		{name: "password alone", conn: `{` + ok + `,"password":"p"}`, want: []string{"connection.password"}},
		{name: "cert without key", conn: `{"brokerUrl":"tls://x","topics":["a"],"certFile":"/c.pem"}`, want: []string{"connection.certFile"}},
		{name: "tls files on tcp", conn: `{` + ok + `,"caFile":"/ca.pem","insecureSkipVerify":true}`, want: []string{"connection.caFile", "connection.insecureSkipVerify"}},
		{name: "data point errors", conn: `{` + ok + `}`, dps: []adapters.DataPoint{
			{Name: "", Register: "a"}, {Name: "x", Register: ""}, {Name: "x", Register: "a..b"}, {Name: "y", Register: "b", Type: "int128"},
		}, want: []string{"data_points[0].name", "data_points[1].register", "data_points[2].name", "data_points[2].register", "data_points[3].type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Driver{}.Validate(endpoint(tt.conn, tt.dps...))
			if got := adapters.FieldsOf(err); !slices.Equal(got, tt.want) {
				t.Fatalf("error fields %q, want %q (%v)", got, tt.want, err)
			}
			_, nerr := Driver{}.New(endpoint(tt.conn, tt.dps...), adapters.Env{})
			if (nerr == nil) != (len(tt.want) == 0) {
				t.Fatalf("New: %v", nerr)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	ep := endpoint(`{"brokerUrl":"tcp://broker","topics":["a"]}`)
	c, err := parseConfig(ep)
	if err != nil {
		t.Fatal(err)
	}
	if c.qos() != 1 || string(c.delimiter()) != "\n" || c.BufferCapacity != framing.DefaultCapacity ||
		c.TimeoutMS != 10000 || !*c.CleanSession || c.broker.Host != "broker:1883" {
		t.Fatalf("defaults: qos %d delimiter %q capacity %d timeout %d clean %v host %s",
			c.qos(), c.delimiter(), c.BufferCapacity, c.TimeoutMS, *c.CleanSession, c.broker.Host)
	}
	if c.ClientID != "edgeplat-0b7c6f528d3e4f" {
		t.Fatalf("client id %q", c.ClientID)
	}
	// The endpoint-level buffer capacity applies when the connection has none.
	ep.BufferCapacity = 2048
	if c, _ := parseConfig(ep); c.BufferCapacity != 2048 {
		t.Fatalf("capacity %d, want the endpoint's 2048", c.BufferCapacity)
	}
	// Without a UUID the id is still stable and short enough for any broker.
	ep.UUID = ""
	a, _ := parseConfig(ep)
	b, _ := parseConfig(ep)
	if a.ClientID != b.ClientID || len(a.ClientID) > 23 || !strings.HasPrefix(a.ClientID, "edgeplat-") {
		t.Fatalf("client ids %q, %q", a.ClientID, b.ClientID)
	}
	ssl, _ := parseConfig(endpoint(`{"brokerUrl":"SSL://broker","topics":["a"]}`))
	if ssl.broker.String() != "ssl://broker:8883" || !ssl.tls() {
		t.Fatalf("ssl broker %s", ssl.broker)
	}
	red, _ := parseConfig(endpoint(`{"brokerUrl":"tcp://broker","topics":["a"],"username":"u","password":"secret"}`))
	if d := (&Adapter{cfg: red}).Diagnostics().(Diagnostics); strings.Contains(d.Broker, "secret") {
		t.Fatalf("diagnostics show the password: %+v", d)
	}
}

func TestValidateFilter(t *testing.T) {
	good := []string{"a", "a/b", "+", "#", "a/+/b", "a/#", "+/+/#", "/", "a//b", "$SYS/#", "$share/g/a/+"}
	bad := []string{"", "a#", "a/#/b", "a+/b", "a/b+", "#/a", "a\x00b", "$share/g", "$share/+/a", "\xff"}
	for _, f := range good {
		if err := ValidateFilter(f); err != nil {
			t.Errorf("%q: %v", f, err)
		}
	}
	for _, f := range bad {
		if ValidateFilter(f) == nil {
			t.Errorf("%q accepted", f)
		}
	}
}

// TestSampleConfig checks sample-config.json validates and that the README's
// example frame gives the readings the README says.
func TestSampleConfig(t *testing.T) {
	raw, err := os.ReadFile("sample-config.json")
	if err != nil {
		t.Fatal(err)
	}
	var ep adapters.Endpoint
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ep); err != nil {
		t.Fatal(err)
	}
	if err := (Driver{}).Validate(ep); err != nil {
		t.Fatalf("sample config: %v", err)
	}
	d := &frameDecoder{device: ep.Name, dataPoints: ep.DataPoints}
	frame := `{"deviceName":"filler-3","timestamp":"2026-03-01T12:00:00Z","sensors":{"temp":215,"pressure":2.4},"state":{"running":true},"recipe":"R-17"}`
	got := d.decode([]byte(frame), time.Now())
	if s := values(got.messages[0]); s != `filler-3/temperature=21.5 GOOD;filler-3/pressure=2.4 GOOD;filler-3/running=true GOOD;filler-3/recipe="R-17" GOOD;` {
		t.Fatalf("README example: %s", s)
	}
	if at := got.messages[0][0].Timestamp; !at.Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("README example time %v", at)
	}
}
