package brokerauth

import (
	"strings"
	"testing"
)

func TestPublishRules(t *testing.T) {
	service := Identity{Username: serviceUser, Superuser: true}
	tests := []struct {
		name  string
		id    Identity
		topic string
		want  string // "" = allowed, else the deny reason
	}{
		{"own telemetry", device(), "i/{T}/a/{A}/endpoints/modbus", ""},
		{"own state", device(), "i/{T}/a/{A}/state", ""},
		{"own metrics", device(), "i/{T}/a/{A}/metrics", ""},
		{"deep own topic", device(), "i/{T}/a/{A}/events/alarm/high", ""},
		{"level named like cmd is not cmd", device(), "i/{T}/a/{A}/cmds", ""},
		{"other agent", device(), "i/{T}/a/{A2}/endpoints/modbus", ReasonForeignTopic},
		{"other tenant", device(), "i/{T2}/a/{A}/endpoints/modbus", ReasonForeignTopic},
		{"agent prefix only", device(), "i/{T}/a/{A}", ReasonForeignTopic},
		{"agent prefix with slash", device(), "i/{T}/a/{A}/", ReasonForeignTopic},
		{"command subtree", device(), "i/{T}/a/{A}/cmd/desired", ReasonCommandTopic},
		{"command level", device(), "i/{T}/a/{A}/cmd", ReasonCommandTopic},
		{"wildcard #", device(), "i/{T}/a/{A}/#", ReasonInvalidTopic},
		{"wildcard +", device(), "i/{T}/a/{A}/+/x", ReasonInvalidTopic},
		{"plus inside a level", device(), "i/{T}/a/{A}/a+b", ReasonInvalidTopic},
		{"sys", device(), "$SYS/broker/uptime", ReasonForeignTopic},
		{"share", device(), "$share/g/i/{T}/a/{A}/state", ReasonForeignTopic},
		{"NUL", device(), "i/{T}/a/{A}/state\x00x", ReasonInvalidTopic},
		{"newline", device(), "i/{T}/a/{A}/state\nx", ReasonInvalidTopic},
		{"C1 control", device(), "i/{T}/a/{A}/state\u0085", ReasonInvalidTopic},
		{"invalid UTF-8", device(), "i/{T}/a/{A}/\xff", ReasonInvalidTopic},
		{"empty level", device(), "i/{T}/a/{A}//x", ReasonInvalidTopic},
		{"trailing slash", device(), "i/{T}/a/{A}/state/", ReasonInvalidTopic},
		{"empty topic", device(), "", ReasonInvalidTopic},
		{"levels compare case-sensitively", device(), "I/{T}/A/{A}/state", ReasonForeignTopic},
		{"no tenant in identity", Identity{Username: "x", AgentUUID: agentUUID}, "i/{T}/a/{A}/state", ReasonForeignTopic},
		{"service user anywhere", service, "i/{T}/a/{A}/cmd/desired", ""},
		{"service user sys", service, "$SYS/x", ""},
	}
	a := &Authorizer{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := topicOf(t, tt.topic)
			if got := publishReason(tt.id, topic); got != tt.want {
				t.Errorf("publishReason(%q) = %q, want %q", topic, got, tt.want)
			}
			if got := a.CanPublish(tt.id, topic); got != (tt.want == "") {
				t.Errorf("CanPublish(%q) = %v", topic, got)
			}
		})
	}
}

func TestSubscribeRules(t *testing.T) {
	service := Identity{Username: serviceUser, Superuser: true}
	tests := []struct {
		name   string
		id     Identity
		filter string
		want   string
	}{
		{"own command subtree", device(), "i/{T}/a/{A}/cmd/#", ""},
		{"own command level", device(), "i/{T}/a/{A}/cmd", ""},
		{"own desired state", device(), "i/{T}/a/{A}/cmd/desired", ""},
		{"own jobs with +", device(), "i/{T}/a/{A}/cmd/jobs/+", ""},
		{"plus then hash", device(), "i/{T}/a/{A}/cmd/+/#", ""},
		{"everything", device(), "#", ReasonForeignTopic},
		{"all tenants", device(), "i/#", ReasonForeignTopic},
		{"any tenant any agent", device(), "i/+/a/+/cmd/#", ReasonForeignTopic},
		{"any agent of own tenant", device(), "i/{T}/a/+/cmd/#", ReasonForeignTopic},
		{"leading plus", device(), "+/{T}/a/{A}/cmd/#", ReasonForeignTopic},
		{"other agent's commands", device(), "i/{T}/a/{A2}/cmd/#", ReasonForeignTopic},
		{"other tenant's commands", device(), "i/{T2}/a/{A}/cmd/#", ReasonForeignTopic},
		{"own prefix wildcard", device(), "i/{T}/a/{A}/#", ReasonNotCommand},
		{"own level plus", device(), "i/{T}/a/{A}/+/desired", ReasonNotCommand},
		{"own telemetry", device(), "i/{T}/a/{A}/endpoints/#", ReasonNotCommand},
		{"sys", device(), "$SYS/#", ReasonForeignTopic},
		{"share of own commands", device(), "$share/g/i/{T}/a/{A}/cmd/#", ReasonForeignTopic},
		{"hash not last", device(), "i/{T}/a/{A}/cmd/#/x", ReasonInvalidTopic},
		{"hash inside a level", device(), "i/{T}/a/{A}/cmd/a#", ReasonInvalidTopic},
		{"plus inside a level", device(), "i/{T}/a/{A}/cmd/a+", ReasonInvalidTopic},
		{"empty level", device(), "i/{T}/a/{A}/cmd//x", ReasonInvalidTopic},
		{"trailing slash", device(), "i/{T}/a/{A}/cmd/", ReasonInvalidTopic},
		{"NUL", device(), "i/{T}/a/{A}/cmd/\x00", ReasonInvalidTopic},
		{"tab", device(), "i/{T}/a/{A}/cmd/\t", ReasonInvalidTopic},
		{"empty filter", device(), "", ReasonInvalidTopic},
		{"service user everything", service, "#", ""},
		{"service user sys", service, "$SYS/#", ""},
		{"service user share", service, "$share/ingest/i/+/a/+/endpoints/+", ""},
	}
	a := &Authorizer{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			filter := topicOf(t, tt.filter)
			if got := subscribeReason(tt.id, filter); got != tt.want {
				t.Errorf("subscribeReason(%q) = %q, want %q", filter, got, tt.want)
			}
			if got := a.CanSubscribe(tt.id, filter); got != (tt.want == "") {
				t.Errorf("CanSubscribe(%q) = %v", filter, got)
			}
		})
	}
}

// matchFilter is MQTT's filter matching (without the $-topic rule, which
// only makes matching stricter).
func matchFilter(filter, topic string) bool {
	fl := strings.Split(filter, "/")
	tl := strings.Split(topic, "/")
	for i, f := range fl {
		if f == "#" {
			return i == len(fl)-1
		}
		if i >= len(tl) {
			return false
		}
		if f != "+" && f != tl[i] {
			return false
		}
	}
	return len(fl) == len(tl)
}

func TestMatchFilter(t *testing.T) {
	tests := []struct {
		filter, topic string
		want          bool
	}{
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"#", "x/y", true},
		{"+/b", "a/b", true},
	}
	for _, tt := range tests {
		if got := matchFilter(tt.filter, tt.topic); got != tt.want {
			t.Errorf("matchFilter(%q, %q) = %v, want %v", tt.filter, tt.topic, got, tt.want)
		}
	}
}

// FuzzTopicRules checks the two properties the ACL exists for, on any
// input: no panic; a filter a device may subscribe to matches only topics
// inside its own command subtree; a topic it may publish to lies under its
// own prefix and outside that subtree.
func FuzzTopicRules(f *testing.F) {
	own := topicOf(f, "i/{T}/a/{A}/")
	for _, s := range []string{
		"#", "+", "i/#", "i/+/a/+/cmd/#", "$SYS/#", "$share/g/#", "",
		"{own}cmd/#", "{own}cmd", "{own}cmd/+", "{own}cmd/+/x/#", "{own}state", "{own}cmd//",
		"{own}endpoints/modbus", "{own}cmd\x00", "{own}+/cmd",
	} {
		f.Add(strings.ReplaceAll(s, "{own}", own), "x", strings.ReplaceAll(s, "{own}", own))
	}
	id := device()
	cmdPrefix := own + CommandLevel
	f.Fuzz(func(t *testing.T, filter, fill, topic string) {
		if subscribeReason(id, filter) == "" {
			// A topic built from the filter by filling its wildcards, and
			// the fuzzer's own topic: whichever the filter matches must lie
			// in the command subtree.
			built := strings.ReplaceAll(filter, "+", fill)
			built = strings.TrimSuffix(strings.TrimSuffix(built, "#"), "/")
			for _, tp := range []string{built, topic} {
				if !matchFilter(filter, tp) {
					continue
				}
				if tp != cmdPrefix && !strings.HasPrefix(tp, cmdPrefix+"/") {
					t.Fatalf("filter %q was allowed and matches %q, outside %s", filter, tp, cmdPrefix)
				}
			}
		}
		if publishReason(id, topic) == "" {
			if !strings.HasPrefix(topic, own) || strings.ContainsAny(topic, "+#\x00") {
				t.Fatalf("publish to %q was allowed", topic)
			}
			if topic == cmdPrefix || strings.HasPrefix(topic, cmdPrefix+"/") {
				t.Fatalf("publish into the command subtree %q was allowed", topic)
			}
		}
	})
}
