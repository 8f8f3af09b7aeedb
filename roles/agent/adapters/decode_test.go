package adapters

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestDecodeObject(t *testing.T) {
	tests := []struct {
		raw        string
		wantFields []string
		wantObject bool
		wantHost   string
		wantPort   int
	}{
		{``, nil, true, "default", 502},
		{`{}`, nil, true, "default", 502},
		{`{"host":"plc","port":1502}`, nil, true, "plc", 1502},
		{`{"host":null}`, nil, true, "default", 502},
		{`{"hots":"plc","port":"x"}`, []string{"connection.hots", "connection.port"}, true, "default", 502},
		{`[1]`, []string{"connection"}, false, "default", 502},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			host, port := "default", 502
			errs, object := DecodeObject(json.RawMessage(tt.raw), "connection", map[string]any{"host": &host, "port": &port})
			var got []string
			for _, e := range errs {
				got = append(got, FieldsOf(e)...)
			}
			if !slices.Equal(got, tt.wantFields) || object != tt.wantObject || host != tt.wantHost || port != tt.wantPort {
				t.Fatalf("fields %v object %v host %q port %d, want %v %v %q %d", got, object, host, port, tt.wantFields, tt.wantObject, tt.wantHost, tt.wantPort)
			}
		})
	}
}
