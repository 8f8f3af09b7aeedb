package opcua

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// FuzzValidate feeds arbitrary connection JSON and node ids to Validate:
// it must never panic and must explain every refusal as a FieldError.
func FuzzValidate(f *testing.F) {
	f.Add(`{"endpointUrl":"opc.tcp://plc:4840"}`, "ns=2;s=Temperature")
	f.Add(`{"endpointUrl":"opc.tcp://plc:4840","securityMode":"Sign","host":1}`, "i=2258")
	f.Add(`{"trustedCertificates":["-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----"],"certificateTrustMode":"trusted-list"}`, "ns=1;g=5ce9dbce-5d79-434c-9ac3-1cfba9a6e92c")
	f.Add(`{"endpointUrl":"opc.tcp://[::1]:4840","timeoutMs":1e99}`, "ns=65536;i=1")
	f.Add(`[]`, "nsu=urn:x;s=a")
	f.Fuzz(func(t *testing.T, conn, register string) {
		ep := adapters.Endpoint{Name: "f", Protocol: "opcua", Connection: json.RawMessage(conn),
			DataPoints: []adapters.DataPoint{{Name: "a", Register: register}}}
		err := Driver{}.Validate(ep)
		if err == nil {
			if _, err := (Driver{}).New(ep, adapters.Env{}); err != nil {
				t.Fatalf("New refused what Validate accepted: %v", err)
			}
			return
		}
		var leaves []error
		var walk func(error)
		walk = func(e error) {
			if j, ok := e.(interface{ Unwrap() []error }); ok {
				for _, x := range j.Unwrap() {
					walk(x)
				}
				return
			}
			leaves = append(leaves, e)
		}
		walk(err)
		for _, e := range leaves {
			var fe *adapters.FieldError
			if !errors.As(e, &fe) || fe.Field == "" {
				t.Fatalf("refusal without a field: %v", e)
			}
		}
	})
}
