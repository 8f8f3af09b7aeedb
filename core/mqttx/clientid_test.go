package mqttx

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestResolveClientIDAtStart(t *testing.T) {
	tests := []struct {
		name     string
		explicit string
		resolve  func(context.Context) (string, error)
		want     string // the client id after Start; "" when Start fails
		wantErr  string
	}{
		{"resolved", "", func(context.Context) (string, error) { return "edgeplat-api-abc-host", nil }, "edgeplat-api-abc-host", ""},
		{"explicit wins", "mine", func(context.Context) (string, error) { return "other", nil }, "mine", ""},
		{"resolver fails", "", func(context.Context) (string, error) { return "", errors.New("db down") }, "", "db down"},
		{"resolves empty", "", func(context.Context) (string, error) { return "", nil }, "", "0 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			o.ClientID, o.CleanSession, o.ResolveClientID = tc.explicit, false, tc.resolve
			c, err := New(o)
			if err != nil {
				t.Fatalf("New without a client id but with a resolver: %v", err)
			}
			defer c.Stop(t.Context())
			err = c.Start(t.Context())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Start = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || c.opts.ClientID != tc.want {
				t.Fatalf("Start = %v, client id %q; want %q", err, c.opts.ClientID, tc.want)
			}
		})
	}
	o := validOptions()
	o.ClientID, o.CleanSession = "", false
	if _, err := New(o); err == nil {
		t.Error("New accepted a persistent session with neither a client id nor a resolver")
	}
}
