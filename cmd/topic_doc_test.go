package cmd

import (
	"os"
	"path/filepath"
	"regexp"
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

// TestDocsShowQualityAsStored: the agent writes quality GOOD and BAD, and
// matchers compare exactly, so docs and examples that showed "good" and
// quality="good" led to queries that match nothing.
func TestDocsShowQualityAsStored(t *testing.T) {
	lower := regexp.MustCompile(`quality\\?"?\s*(:|=|!=|=~|!~)\s*\\?"(good|bad|uncertain)`)
	var files []string
	for _, pattern := range []string{"*.md", filepath.Join("docs", "*.md"), filepath.Join("examples", "*", "*")} {
		m, err := filepath.Glob(filepath.Join("..", pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lower.FindAllString(string(doc), -1) {
			t.Errorf("%s shows %s; quality is stored as GOOD or BAD", f, m)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "query-language.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), "compares exactly, case included, and the agent writes `GOOD` and `BAD`") {
		t.Error("docs/query-language.md does not say that quality matching is case-sensitive")
	}
}
