package api

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// TestBrokerRefusalWithNULIsAuditedIntegration records refusals whose
// topic and client id hold NUL or bytes that are not UTF-8. PostgreSQL
// refused the insert, so the refusal never reached the audit log.
func TestBrokerRefusalWithNULIsAuditedIntegration(t *testing.T) {
	const tenant = "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	for name, cfg := range reportDBs(t) {
		t.Run(name, func(t *testing.T) {
			d := openMigrated(t, cfg)
			var logs bytes.Buffer
			store := accounts.NewStore(d)
			b := &BrokerAuth{store: store, log: slog.New(slog.NewTextHandler(&logs, nil))}
			events := []struct {
				topic, client     string
				wantTopic, wantID string
			}{
				{"i/t/a/x\x00y/endpoints", "dev\x00ice", "i/t/a/x\uFFFDy/endpoints", "dev\uFFFDice"},
				{"i/t/a/\xff\xfe/endpoints", "c\xe2\x82", "i/t/a/\uFFFD/endpoints", "c\uFFFD"},
				{"i/t/a/plain", "plain", "i/t/a/plain", "plain"},
			}
			for _, e := range events {
				b.record(context.Background(), brokerauth.DenyEvent{
					Check: brokerauth.CheckPublish, Reason: "acl", TenantUUID: tenant, ClientID: e.client, Topic: e.topic,
				})
			}
			if logs.Len() > 0 {
				t.Errorf("recording logged:\n%s", logs.String())
			}
			got, _, err := store.Events(context.Background(), tenant, accounts.EventFilter{Kind: AuditBrokerDenied, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(events) {
				t.Fatalf("%d audit events, want %d: %+v", len(got), len(events), got)
			}
			// Newest first.
			for i, e := range events {
				ev := got[len(got)-1-i]
				if ev.Target != e.wantTopic || ev.Detail["clientId"] != e.wantID {
					t.Errorf("event %d: target %q client %q, want %q %q", i, ev.Target, ev.Detail["clientId"], e.wantTopic, e.wantID)
				}
			}
		})
	}
}
