package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// TestTelemetryTopicIsDocumentedAsItIs: the codec's --help and the README
// diagram used to show endpoints/{protocol}, while agents publish under
// the endpoint's mqtt_topic (or name). They now show endpoints/{endpoint}
// and the filter serve-api subscribes with; that filter and serve-api's
// parser take an endpoint topic with slashes, which a protocol never has.
func TestTelemetryTopicIsDocumentedAsItIs(t *testing.T) {
	const (
		pattern = "i/{tenant}/a/{agent}/endpoints/{endpoint}"
		filter  = "i/+/a/+/endpoints/#"
	)
	_, help, _ := run(t, "codec", "decode", "--help")
	_, codecHelp, _ := run(t, "codec", "--help")
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"codec decode --help": help + codecHelp, "README.md": string(readme)}
	for name, text := range texts {
		flat := strings.Join(strings.Fields(text), " ")
		for _, want := range []string{pattern, filter} {
			if !strings.Contains(strings.ReplaceAll(flat, "`", ""), want) {
				t.Errorf("%s does not show %s", name, want)
			}
		}
		if strings.Contains(text, "{protocol}") {
			t.Errorf("%s still shows the topic as endpoints/{protocol}", name)
		}
	}

	tenant := codec.EncodeID(codec.UUID{1, 2, 3})
	agent := codec.EncodeID(codec.UUID{4, 5, 6})
	topic := "i/" + tenant + "/a/" + agent + "/endpoints/boiler-room/line-1"
	if !mqttx.MatchTopic(filter, topic) {
		t.Errorf("%s does not match %s", filter, topic)
	}
	got, err := envelope.ParseTopic(topic)
	if err != nil || got.Kind != envelope.Telemetry || got.Endpoint != "boiler-room/line-1" {
		t.Errorf("ParseTopic(%s) = %+v, %v; want telemetry of endpoint boiler-room/line-1", topic, got, err)
	}
}
