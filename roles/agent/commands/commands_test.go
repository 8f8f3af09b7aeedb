package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
)

func TestDispatcher(t *testing.T) {
	tenant := codec.NewUUID()
	own, other := control.Prefix(tenant, codec.NewUUID()), control.Prefix(tenant, codec.NewUUID())
	prefix := ""
	reg := prometheus.NewRegistry()
	d := New(slog.New(slog.DiscardHandler), reg, func() string { return prefix })
	var got []string
	d.Handle(control.CmdTargetState, func(_ context.Context, payload []byte) { got = append(got, string(payload)) })

	// Not provisioned: no prefix is the agent's own.
	d.Deliver(t.Context(), control.CommandTopic(own, control.CmdTargetState), []byte("0"))
	prefix = own
	d.Deliver(t.Context(), control.CommandTopic(own, control.CmdTargetState), []byte("1"))
	d.Deliver(t.Context(), control.CommandTopic(other, control.CmdTargetState), []byte("foreign"))
	d.Deliver(t.Context(), own+"/state", []byte("not a command"))
	d.Deliver(t.Context(), control.CommandTopic(own, "jobs/42"), []byte("unknown"))
	d.Deliver(t.Context(), control.CommandTopic(own, control.CmdTargetState), []byte(strings.Repeat("x", control.MaxCommandBytes+1)))
	d.Deliver(t.Context(), control.CommandTopic(own, control.CmdTargetState), []byte("2"))

	if strings.Join(got, ",") != "1,2" {
		t.Fatalf("handler got %q, want [1 2]", got)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"edgeplat_agent_commands_received_total", map[string]string{"command": control.CmdTargetState}, 2},
		{"edgeplat_agent_commands_received_total", map[string]string{"command": "unknown"}, 1},
		{"edgeplat_agent_commands_refused_total", map[string]string{"reason": reasonForeign}, 2},
		{"edgeplat_agent_commands_refused_total", map[string]string{"reason": reasonTopic}, 1},
		{"edgeplat_agent_commands_refused_total", map[string]string{"reason": reasonSize}, 1},
	} {
		if v := coretest.MetricValue(t, reg, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
}

func TestHandleTwiceIsABug(t *testing.T) {
	d := New(slog.New(slog.DiscardHandler), nil, func() string { return "" })
	d.Handle("x", func(context.Context, []byte) {})
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "BUG:") {
			t.Fatalf("recovered %v, want a BUG panic", r)
		}
	}()
	d.Handle("x", func(context.Context, []byte) {})
}

// FuzzDeliver feeds arbitrary topics and payloads to a dispatcher with
// the target-state handler's decoder: nothing panics, only the agent's
// own command topics reach a handler, and an accepted notice survives a
// round trip.
func FuzzDeliver(f *testing.F) {
	own := control.Prefix(codec.NewUUID(), codec.NewUUID())
	f.Add(control.CommandTopic(own, control.CmdTargetState), []byte(`{"version":7,"updatedAt":"2026-11-29T10:00:00Z"}`))
	f.Add(control.CommandTopic(own, control.CmdTargetState), []byte(`{"version":-1}`))
	f.Add(control.CommandTopic(own, "jobs/1"), []byte(`{}`))
	f.Add("i/+/a/#/cmd/x", []byte(`{"cleared":true}`))
	d := New(slog.New(slog.DiscardHandler), nil, func() string { return own })
	var topic string
	d.Handle(control.CmdTargetState, func(_ context.Context, payload []byte) {
		if topic != control.CommandTopic(own, control.CmdTargetState) {
			panic("handler called for " + topic)
		}
		n, err := control.DecodeTargetStateNotice(payload)
		if err != nil {
			return
		}
		b, _ := json.Marshal(n)
		again, err := control.DecodeTargetStateNotice(b)
		if err != nil || again.Version != n.Version || again.Cleared != n.Cleared || !again.UpdatedAt.Equal(n.UpdatedAt) {
			panic(fmt.Sprintf("notice %+v did not survive a round trip: %+v, %v", n, again, err))
		}
	})
	f.Fuzz(func(t *testing.T, tp string, payload []byte) {
		topic = tp
		d.Deliver(t.Context(), tp, payload)
	})
}
