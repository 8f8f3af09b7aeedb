package mqttx

import "testing"

func TestMatchTopic(t *testing.T) {
	tests := []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/b", "a/b/c", false},
		{"a/b/c", "a/b", false},
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"a/+", "a/", true},
		{"+/+", "/x", true},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"a/#", "b/c", false},
		{"#", "a/b", true},
		{"#", "$SYS/x", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/x", true},
		{"i/+/a/+/endpoints/#", "i/T/a/A/endpoints/modbus/line/1", true},
		{"i/+/a/+/endpoints/#", "i/T/a/A/state", false},
		{"i/+/a/+/state", "i/T/a/A/state", true},
		{"i/+/a/+/state", "i/T/a/A/metrics", false},
		{"a/+/c", "a//c", true},
	}
	for _, tt := range tests {
		if got := matchTopic(tt.filter, tt.topic); got != tt.want {
			t.Errorf("matchTopic(%q, %q) = %v, want %v", tt.filter, tt.topic, got, tt.want)
		}
	}
}

func TestValidFilterAndTopic(t *testing.T) {
	for _, f := range []string{"a", "a/b", "+", "#", "a/+/c", "a/#", "/", "i/+/a/+/endpoints/#"} {
		if err := validFilter(f); err != nil {
			t.Errorf("validFilter(%q) = %v, want nil", f, err)
		}
	}
	for _, f := range []string{"", "a/#/b", "a#", "a/b+", "$share/g/a", "a\x00b"} {
		if err := validFilter(f); err == nil {
			t.Errorf("validFilter(%q) = nil, want an error", f)
		}
	}
	for _, tp := range []string{"a", "a/b", "/a", "$SYS/x"} {
		if err := validTopic(tp); err != nil {
			t.Errorf("validTopic(%q) = %v, want nil", tp, err)
		}
	}
	for _, tp := range []string{"", "a/+", "a/#", "a\x00"} {
		if err := validTopic(tp); err == nil {
			t.Errorf("validTopic(%q) = nil, want an error", tp)
		}
	}
}

func FuzzMatchTopic(f *testing.F) {
	f.Add("a/+/#", "a/b/c")
	f.Add("#", "$x")
	f.Fuzz(func(t *testing.T, filter, topic string) {
		if validFilter(filter) != nil || validTopic(topic) != nil {
			return
		}
		got := matchTopic(filter, topic)
		if filter == topic && !got {
			t.Fatalf("matchTopic(%q, %q) = false for identical strings", filter, topic)
		}
	})
}
