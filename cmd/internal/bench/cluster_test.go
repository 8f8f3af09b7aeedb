package bench

import (
	"strings"
	"testing"
	"time"
)

func TestSumMetricText(t *testing.T) {
	const text = `# HELP edgeplat_api_mqtt_messages_received_total Messages.
# TYPE edgeplat_api_mqtt_messages_received_total counter
edgeplat_api_mqtt_messages_received_total{kind="state"} 3
edgeplat_api_mqtt_messages_received_total{kind="telemetry"} 40
edgeplat_api_mqtt_messages_received_total_other 1000
edgeplat_api_telemetry_duplicates_total 2.5e+01
`
	for _, tc := range []struct {
		name, match string
		want        float64
	}{
		{"edgeplat_api_mqtt_messages_received_total", "", 43},
		{"edgeplat_api_mqtt_messages_received_total", `kind="state"`, 3},
		{"edgeplat_api_telemetry_duplicates_total", "", 25},
		{"edgeplat_missing_total", "", 0},
	} {
		got, err := sumMetricText(strings.NewReader(text), tc.name, tc.match)
		if err != nil || got != tc.want {
			t.Errorf("sumMetricText(%s, %q) = %v, %v; want %v", tc.name, tc.match, got, err, tc.want)
		}
	}
}

func TestClusterOptionsValidate(t *testing.T) {
	good := ClusterOptions{API: 2, Ingest: 2, Publishers: 4, Rate: 100, Duration: 10 * time.Second, Readings: 10, Format: "msgpack",
		KillAt: 0.5, ReclaimIdle: time.Second, Timeout: time.Minute, StallAfter: time.Second}
	if err := good.validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	if n := good.messagesPerPublisher(); n != 250 {
		t.Errorf("messages per publisher = %d, want 250", n)
	}
	for _, tc := range []struct {
		edit func(*ClusterOptions)
		want string
	}{
		{func(o *ClusterOptions) { o.API = 0 }, "--api"},
		{func(o *ClusterOptions) { o.Ingest = 17 }, "--ingest"},
		{func(o *ClusterOptions) { o.Rate = 0 }, "--rate"},
		{func(o *ClusterOptions) { o.KillAt = 1 }, "--kill-at"},
		{func(o *ClusterOptions) { o.KillSignal = "HUP" }, "--kill-signal must be KILL or TERM"},
		{func(o *ClusterOptions) { o.Format = "xml" }, "--format"},
		{func(o *ClusterOptions) { o.ReclaimIdle = 0 }, "--reclaim-idle"},
		{func(o *ClusterOptions) { o.Rate, o.Duration = 1, time.Second }, "fewer messages than --publishers"},
	} {
		o := good
		tc.edit(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validate = %v, want an error naming %s", err, tc.want)
		}
	}
}

func TestClusterKillSignal(t *testing.T) {
	for in, want := range map[string]string{"": "KILL", "KILL": "KILL", "kill": "KILL", "SIGKILL": "KILL",
		"TERM": "TERM", "sigterm": "TERM", "HUP": "", "SIGINT": ""} {
		if got := (ClusterOptions{KillSignal: in}).killSignal(); got != want {
			t.Errorf("killSignal(%q) = %q, want %q", in, got, want)
		}
	}
}
