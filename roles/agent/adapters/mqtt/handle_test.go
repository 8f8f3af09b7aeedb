package mqtt

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// TestHandle feeds MQTT messages to the adapter without a broker: frames
// split over messages meet again per topic, an oversized frame is
// counted and skipped, and idle topics hold no buffer.
func TestHandle(t *testing.T) {
	a, err := NewAdapter(endpoint(`{"brokerUrl":"tcp://x","topics":["#"],"delimiter":"\r\n","bufferCapacity":32}`), adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	a.topics = newTopicBuffers(a.cfg.delimiter(), a.cfg.BufferCapacity)
	var got []string
	emit := func(rs []adapters.Reading) { got = append(got, values(rs)) }
	msg := func(topic, payload string) {
		a.handle(inbound{topic: topic, payload: []byte(payload), received: time.Now()}, emit)
	}
	msg("a", `{"v":1}`+"\r")
	msg("b", `{"w":`)
	if s := a.Stats(); s.PendingTopics != 2 {
		t.Fatalf("pending topics %d, want 2", s.PendingTopics)
	}
	msg("a", "\n"+`{"v":2}`+"\r\n")
	msg("b", `7}`+"\r\n")
	msg("a", strings.Repeat("x", 40)+"\r\n"+`{"v":3}`+"\r\n")
	msg("a", "\r\n\r\n")
	want := []string{"line-1/v=1 GOOD;", "line-1/v=2 GOOD;", "line-1/w=7 GOOD;", "line-1/v=3 GOOD;"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("readings %q, want %q", got, want)
	}
	s := a.Stats()
	if s.Messages != 6 || s.Frames != 4 || s.Overflows != 1 || s.InvalidFrames != 0 || s.PendingTopics != 0 || s.Connected {
		t.Fatalf("stats %+v", s)
	}
	if len(a.topics.m) != 0 {
		t.Fatalf("%d topic buffers kept for idle topics", len(a.topics.m))
	}
}

func TestTopicBuffersBound(t *testing.T) {
	tb := newTopicBuffers([]byte("\n"), 16)
	for i := range maxPendingTopics {
		if n := tb.write(string(rune('a'+i%26))+strings.Repeat("/x", i/26)+"/"+string(rune(i)), []byte("part"), func([]byte) {}); n != 0 {
			t.Fatalf("discarded %d below the bound", n)
		}
	}
	if n := tb.write("one/more", []byte("part"), func([]byte) {}); n != 1 || tb.pending() != maxPendingTopics {
		t.Fatalf("beyond the bound: discarded %d, pending %d", n, tb.pending())
	}
	// A message with whole frames still works for a new topic.
	var frames int
	if n := tb.write("one/more", []byte("{}\n"), func([]byte) { frames++ }); n != 0 || frames != 1 {
		t.Fatalf("whole frame beyond the bound: discarded %d, frames %d", n, frames)
	}
}
