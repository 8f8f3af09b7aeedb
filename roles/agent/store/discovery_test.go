package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/discovery"
)

// TestDiscoveryRules: a rule round-trips, its runs are pruned to keep,
// newest first, and deleting it deletes its runs but no other rule's.
func TestDiscoveryRules(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	d := DiscoveryOf(s)
	at := time.UnixMilli(1_700_000_000_000).UTC()
	r := discovery.Rule{UUID: "r1", Name: "line", Protocol: "modbus", IntervalSeconds: 600, Enabled: true, AutoEnable: true,
		Params: json.RawMessage(`{"network":"10.0.0.0/24"}`), CreatedAt: at, UpdatedAt: at}
	if err := d.CreateRule(ctx, r); err != nil {
		t.Fatal(err)
	}
	other := r
	other.UUID, other.Params = "r2", nil
	if err := d.CreateRule(ctx, other); err != nil {
		t.Fatal(err)
	}
	got, ok, err := d.Rule(ctx, "r1")
	if err != nil || !ok || got.Name != "line" || string(got.Params) != `{"network":"10.0.0.0/24"}` || got.Target != nil || !got.CreatedAt.Equal(at) {
		t.Fatalf("rule = %+v %v %v", got, ok, err)
	}
	r.Name = "line 2"
	if ok, err := d.UpdateRule(ctx, r); err != nil || !ok {
		t.Fatalf("update: %v %v", ok, err)
	}
	if _, ok, _ := d.Rule(ctx, "nope"); ok {
		t.Fatal("unknown rule found")
	}
	for i := range 55 {
		fin := at.Add(time.Duration(i) * time.Second)
		run := discovery.Run{UUID: fmt.Sprint("run", i), RuleUUID: "r1", StartedAt: fin, FinishedAt: &fin, Status: discovery.RunSucceeded,
			DevicesFound: 1, Devices: []discovery.Device{{Protocol: "modbus", Name: "d", Connection: json.RawMessage(`{"host":"h"}`)}}}
		if err := d.SaveRun(ctx, run, 50); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SaveRun(ctx, discovery.Run{UUID: "other", RuleUUID: "r2", StartedAt: at, Status: discovery.RunRunning}, 50); err != nil {
		t.Fatal(err)
	}
	runs, err := d.Runs(ctx, "r1", 100)
	if err != nil || len(runs) != 50 || runs[0].UUID != "run54" || runs[49].UUID != "run5" || len(runs[0].Devices) != 1 {
		t.Fatalf("runs = %d %v", len(runs), err)
	}
	if all, err := d.Runs(ctx, "", 3); err != nil || len(all) != 3 || all[0].UUID != "other" || all[0].FinishedAt != nil {
		t.Fatalf("all runs = %+v %v", all, err)
	}
	if ok, err := d.DeleteRule(ctx, "r1"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if runs, _ := d.Runs(ctx, "", 100); len(runs) != 1 || runs[0].UUID != "other" {
		t.Fatalf("runs after delete = %+v", runs)
	}
	if ok, err := d.DeleteRule(ctx, "r1"); err != nil || ok {
		t.Fatalf("second delete: %v %v", ok, err)
	}
}
