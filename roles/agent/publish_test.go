package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
)

func TestPublishingConfiguration(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	code, body := r.do("POST", "/v1/publish/destinations", `{"name":"plant-broker","type":"mqtt",
		"config_json":{"url":"tcp://10.0.0.5:1883","username":"u","password":"s3cret"}}`, nil)
	if code != 201 || strings.Contains(body, "s3cret") {
		t.Fatalf("create mqtt destination: %d %s", code, body)
	}
	mqttID := decode(t, body)["id"].(float64)
	code, body = r.do("POST", "/v1/publish/destinations", `{"name":"cloud","type":"platform"}`, nil)
	if code != 201 {
		t.Fatalf("create platform destination: %d %s", code, body)
	}
	platformID := decode(t, body)["id"].(float64)

	for _, bad := range []struct{ body, field string }{
		{`{"name":"x","type":"kafka"}`, "type"},
		{`{"name":"x","type":"tsdb","config_json":{"url":"http://influx:8086","org":"o","bucket":"b"}}`, "config_json.token"},
		{`{"name":"x","type":"tsdb","config_json":{"url":"ftp://influx","org":"o","bucket":"b","token":"t"}}`, "config_json.url"},
		{`{"name":"x","type":"mqtt","config_json":{"url":"tcp://h:1883","colour":"red"}}`, "config_json"},
		{`{"name":"x","type":"iot-hub-a","config_json":{"url":"tcp://hub:1883"}}`, "config_json"},
		{`{"name":"x","type":"iot-hub-a","config_json":{"endpoint":"hub.example.com"}}`, "config_json.thingName"},
		{`{"name":"x","type":"platform","config_json":{"url":"tcp://h"}}`, "config_json"},
		{`{"name":"plant-broker","type":"mqtt","config_json":{"url":"tcp://h:1883"}}`, "name"},
		{`{"name":"second-cloud","type":"platform"}`, "type"},
		{`{"type":"platform"}`, "name"},
	} {
		if code, body := r.do("POST", "/v1/publish/destinations", bad.body, nil); code != 400 || !strings.Contains(errorOf(t, body), bad.field) {
			t.Errorf("POST %s = %d %s, want 400 naming %s", bad.body, code, body, bad.field)
		}
	}
	// The masked password sent back keeps the stored one.
	code, body = r.do("PATCH", fmt.Sprintf("/v1/publish/destinations/%.0f", mqttID),
		`{"enabled":false,"config_json":{"url":"tcp://10.0.0.6:1883","username":"u","password":"********"}}`, nil)
	if code != 200 || !strings.Contains(body, `"enabled":false`) || !strings.Contains(body, "10.0.0.6") {
		t.Fatalf("patch destination: %d %s", code, body)
	}
	st, _ := r.agent.p.st.Open()
	d, err := st.Publishing().Destination(t.Context(), int64(mqttID))
	if err != nil || !strings.Contains(string(d.Config), `"password":"s3cret"`) {
		t.Fatalf("stored config after a masked patch: %s %v", d.Config, err)
	}
	if _, body := r.do("GET", "/v1/publish/destinations?includeDisabled=false", "", nil); strings.Contains(body, "plant-broker") {
		t.Fatalf("a disabled destination listed without includeDisabled: %s", body)
	}

	// Subscriptions.
	for _, bad := range []struct{ body, field string }{
		{`{"topics":["#"]}`, "publish_destination_id"},
		{`{"publish_destination_id":999,"route_json":{"topic":"x"}}`, "publish_destination_id"},
		{fmt.Sprintf(`{"publish_destination_id":%.0f,"topics":["a/#/b"],"route_json":{"topic":"x"}}`, mqttID), "topics[0]"},
		{fmt.Sprintf(`{"publish_destination_id":%.0f}`, mqttID), "route_json.topic"},
		{fmt.Sprintf(`{"publish_destination_id":%.0f,"payload_format":"csv"}`, platformID), "payload_format"},
		{fmt.Sprintf(`{"publish_destination_id":%.0f,"compression":"zstd"}`, platformID), "compression"},
	} {
		if code, body := r.do("POST", "/v1/publish/subscriptions", bad.body, nil); code != 400 || !strings.Contains(errorOf(t, body), bad.field) {
			t.Errorf("POST subscription %s = %d %s, want 400 naming %s", bad.body, code, body, bad.field)
		}
	}
	code, body = r.do("POST", "/v1/publish/subscriptions", fmt.Sprintf(
		`{"publish_destination_id":%.0f,"topics":["modbus/#"],"payload_format":"tags","compression":"msgpack+deflate","route_json":{"topic":"plant/a"}}`, mqttID), nil)
	if code != 201 {
		t.Fatalf("create subscription: %d %s", code, body)
	}
	subID := decode(t, body)["id"].(float64)
	if code, body := r.do("POST", "/v1/publish/subscriptions", fmt.Sprintf(`{"publish_destination_id":%.0f}`, platformID), nil); code != 201 ||
		!strings.Contains(body, `"payload_format":"custom"`) || !strings.Contains(body, `"compression":"json"`) {
		t.Fatalf("platform subscription with defaults: %d %s", code, body)
	}
	if code, body := r.do("PATCH", fmt.Sprintf("/v1/publish/subscriptions/%.0f", subID), `{"enabled":false,"payload_format":"ml"}`, nil); code != 200 ||
		!strings.Contains(body, `"payload_format":"ml"`) {
		t.Fatalf("patch subscription: %d %s", code, body)
	}
	// Deleting a destination removes its subscriptions.
	if code, _ := r.do("DELETE", fmt.Sprintf("/v1/publish/destinations/%.0f", mqttID), "", nil); code != 200 {
		t.Fatal("delete destination", code)
	}
	_, body = r.do("GET", "/v1/publish/subscriptions", "", nil)
	if strings.Contains(body, "plant/a") || !strings.Contains(body, fmt.Sprintf(`"publish_destination_id":%.0f`, platformID)) {
		t.Fatalf("subscriptions after the destination went: %s", body)
	}
	if code, _ := r.do("DELETE", fmt.Sprintf("/v1/publish/subscriptions/%.0f", subID), "", nil); code != 404 {
		t.Fatalf("deleting a cascaded subscription = %d, want 404", code)
	}

	// Protocol outputs.
	if code, body := r.do("GET", "/v1/protocol-outputs", "", nil); code != 200 || !strings.Contains(body, `"outputs":[`) {
		t.Fatalf("outputs: %s", body)
	}
}

func TestDestinationTestRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a Mosquitto broker")
	}
	broker := coretest.PrivateMosquitto(t)
	r := startAgent(t, t.TempDir(), true, nil)
	closed := coretest.FreePort(t)
	tests := []struct {
		name, body string
		ok         bool
		want       string
	}{
		{"a live broker", fmt.Sprintf(`{"type":"mqtt","config_json":{"url":"%s"}}`, broker.URL()), true, "connected"},
		{"a closed port", fmt.Sprintf(`{"type":"mqtt","config_json":{"url":"tcp://127.0.0.1:%d"}}`, closed), false, "CONNECTION_REFUSED"},
		{"an unreachable tsdb", fmt.Sprintf(`{"type":"tsdb","config_json":{"url":"http://127.0.0.1:%d","org":"o","bucket":"b","token":"t"}}`, closed), false, "CONNECTION_REFUSED"},
		{"an invalid config", `{"type":"tsdb","config_json":{"url":"http://x"}}`, false, "config_json.org"},
		{"an untestable type", `{"type":"platform"}`, false, "cannot be tested"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := r.do("POST", "/v1/publish/destinations/test", tt.body, nil)
			m := decode(t, body)
			if code != 200 || m["ok"] != tt.ok || !strings.Contains(body, tt.want) {
				t.Fatalf("test %s = %d %s", tt.body, code, body)
			}
		})
	}
	if _, body := r.do("GET", "/v1/publish/destinations", "", nil); body != `{"publishers":[]}` {
		t.Fatalf("testing saved something: %s", body)
	}
}
