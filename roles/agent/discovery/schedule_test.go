package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/discovery"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// noEndpoints is an agent without endpoints: the rule's own params name
// its target.
type noEndpoints struct{}

func (noEndpoints) Connections(context.Context) (map[string][]json.RawMessage, error) {
	return map[string][]json.RawMessage{}, nil
}
func (noEndpoints) Create(context.Context, json.RawMessage) (string, error) {
	return "", fmt.Errorf("no endpoint expected")
}
func (noEndpoints) CheckTemplate(json.RawMessage) error { return nil }

// TestSchedulerRunsEnabledRules: an enabled rule that never ran runs
// after its jitter (at most a tenth of 60 s), a disabled one never; the
// service's Run returns once its context ends, leaving no goroutine.
func TestSchedulerRunsEnabledRules(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rules := store.DiscoveryOf(st)
	enabled := true
	s, err := discovery.New(discovery.Options{Scanners: discovery.DefaultScanners(),
		Store: func() (discovery.Store, error) { return rules, nil }, Endpoints: noEndpoints{},
		Enabled: func() bool { return enabled }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	closed := coretest.FreePort(t)
	params := fmt.Sprintf(`"params_json":{"hosts":["127.0.0.1"],"ports":[%d]}`, closed)
	on, err := s.CreateRule(ctx, []byte(`{"name":"on","protocol":"modbus","interval_seconds":60,`+params+`}`))
	if err != nil {
		t.Fatal(err)
	}
	off, err := s.CreateRule(ctx, []byte(`{"name":"off","protocol":"modbus","enabled":false,"interval_seconds":60,`+params+`}`))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	coretest.Eventually(t, 20*time.Second, "the enabled rule's first run", func() bool {
		runs, err := rules.Runs(ctx, on.UUID, 5)
		return err == nil && len(runs) == 1 && runs[0].Status == discovery.RunSucceeded
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if runs, _ := rules.Runs(ctx, off.UUID, 5); len(runs) != 0 {
		t.Fatalf("the disabled rule ran: %+v", runs)
	}
	// The next run is an interval away: one run only.
	if runs, _ := rules.Runs(ctx, on.UUID, 5); len(runs) != 1 {
		t.Fatalf("runs of the enabled rule: %+v", runs)
	}
}
