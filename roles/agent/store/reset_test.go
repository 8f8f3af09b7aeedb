package store

import (
	"context"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

func TestFactoryReset(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	uuid, err := s.MetaOrCreate(ctx, "uuid", func() string { return "u-1" })
	if err != nil {
		t.Fatal(err)
	}
	seq, err := s.NewSequence(ctx, "sequence.msgid", 10)
	if err != nil {
		t.Fatal(err)
	}
	last, err := seq.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SetMeta(ctx, "cloud.credentials", `{"apiKey":"dk2_x"}`))
	must(s.Endpoints().Create(ctx, adapters.Endpoint{UUID: "e1", Name: "plc", Protocol: "modbus"}))
	must(s.SaveSettings(ctx, []byte(`{}`)))
	_, err = s.Admins().CreateFirst(ctx, AdminUser{Username: "root", PasswordHash: "h"})
	must(err)
	d, err := s.Publishing().CreateDestination(ctx, Destination{Name: "cloud", Type: "platform", Enabled: true})
	must(err)
	_, err = s.Publishing().CreateSubscription(ctx, Subscription{DestinationID: d.ID, Topics: []string{}, PayloadFormat: "custom", Compression: "json", Enabled: true})
	must(err)
	q, err := s.OfflineQueue(DefaultQueueOptions())
	must(err)
	_, err = q.Enqueue(ctx, d.ID, Record{MsgID: "m1", Topic: "t", Payload: []byte("x")})
	must(err)

	must(s.FactoryReset(ctx))

	st, err := s.Stats(ctx)
	must(err)
	for _, tb := range st.Tables {
		switch tb.Name {
		case "agent_meta":
			if tb.Rows != 2 {
				t.Errorf("agent_meta keeps %d rows, want the uuid and the sequence", tb.Rows)
			}
		case "schema_migrations":
			if tb.Rows == 0 {
				t.Error("the schema history was deleted")
			}
		default:
			if tb.Rows != 0 {
				t.Errorf("%s keeps %d rows after a factory reset", tb.Name, tb.Rows)
			}
		}
	}
	if got, _ := s.Meta(ctx, "uuid"); got != uuid {
		t.Fatalf("uuid after reset = %q, want %q", got, uuid)
	}
	seq2, err := s.NewSequence(ctx, "sequence.msgid", 10)
	must(err)
	if next, _ := seq2.Next(ctx); next <= last {
		t.Fatalf("the message sequence restarted at %d after %d", next, last)
	}
}
