package anomaly

import (
	"encoding/json"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
)

// FuzzMergeConfig feeds PATCH /v1/anomaly/config bodies: whatever the
// input, MergeConfig never panics, an error leaves the current config as
// it was, and a config it accepts is valid and survives its own JSON.
func FuzzMergeConfig(f *testing.F) {
	f.Add([]byte(`{"enabled":false}`))
	f.Add([]byte(`{"metrics":[{"name":"temp","threshold":6,"sensitivity":"high","windowSize":60}]}`))
	f.Add([]byte(`{"metrics":[{"name":"a"},{"name":"a"}]}`))
	f.Add([]byte(`{"metrics":null,"enabled":null}`))
	f.Add([]byte(`{"metrics":[{"name":"x","threshold":1e400}]}`))
	f.Add([]byte(`[]`))
	cur := Config{Enabled: true, Metrics: []detect.MetricConfig{{Name: "temp", Threshold: 5}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := MergeConfig(cur, body)
		if err != nil {
			if !got.Equal(cur) {
				t.Fatalf("an error changed the config: %+v", got)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("accepted an invalid config %+v: %v", got, err)
		}
		raw, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		again, err := MergeConfig(Config{}, raw)
		if err != nil || !again.Equal(got) {
			t.Fatalf("%s does not merge back: %+v, %v", raw, again, err)
		}
	})
}
