package opcua

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

func endpoint(conn string, dps ...adapters.DataPoint) adapters.Endpoint {
	if dps == nil {
		dps = []adapters.DataPoint{{Name: "t", Register: "ns=1;s=Temperature"}}
	}
	return adapters.Endpoint{UUID: "u-1", Name: "press", Protocol: "opcua", Connection: json.RawMessage(conn), DataPoints: dps}
}

func TestValidate(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	const ok = `{"endpointUrl":"opc.tcp://plc:4840"}`
	tests := []struct {
		name   string
		ep     adapters.Endpoint
		fields []string
	}{
		{"minimal", endpoint(ok), nil},
		{"full secure", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","securityMode":"SignAndEncrypt","securityPolicy":"Basic256Sha256",
			"certificateTrustMode":"trust-all","certFile":"c.pem","keyFile":"k.pem","username":"u","password":"p","timeoutMs":2000,
			"subscribe":true,"publishingIntervalMs":500,"samplingIntervalMs":100}`), nil},
		{"secure mode alone takes the default policy", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","securityMode":"Sign"}`), nil},
		{"missing connection", endpoint(``), []string{"connection"}},
		{"unknown field", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","host":"x"}`), []string{"connection.host"}},
		{"wrong type", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","timeoutMs":"5"}`), []string{"connection.timeoutMs"}},
		{"no url", endpoint(`{}`), []string{"connection.endpointUrl"}},
		{"http url", endpoint(`{"endpointUrl":"http://plc:4840"}`), []string{"connection.endpointUrl"}},
		{"credentials in the url", endpoint(`{"endpointUrl":"opc.tcp://user:secret@plc:4840"}`), []string{"connection.endpointUrl"}},
		{"bad mode", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","securityMode":"Encrypt"}`), []string{"connection.securityMode"}},
		{"bad policy", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","securityMode":"Sign","securityPolicy":"Basic512"}`), []string{"connection.securityPolicy"}},
		{"policy without mode", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","securityPolicy":"Basic256Sha256"}`), []string{"connection.securityPolicy"}},
		{"secure mode with None policy", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","securityMode":"Sign","securityPolicy":"None"}`), []string{"connection.securityPolicy"}},
		{"bad trust mode", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","certificateTrustMode":"yolo"}`), []string{"connection.certificateTrustMode"}},
		{"trusted list without certificates", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","certificateTrustMode":"trusted-list"}`), []string{"connection.trustedCertificates"}},
		{"broken inline PEM", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","certificateTrustMode":"trusted-list","trustedCertificates":["-----BEGIN CERTIFICATE-----\nxx"]}`), []string{"connection.trustedCertificates[0]"}},
		{"cert without key", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","certFile":"c.pem"}`), []string{"connection.keyFile"}},
		{"password without user", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","password":"p"}`), []string{"connection.username"}},
		{"negative timeout", endpoint(`{"endpointUrl":"opc.tcp://plc:4840","timeoutMs":-1}`), []string{"connection.timeoutMs"}},
		{"bad node id", endpoint(ok, adapters.DataPoint{Name: "a", Register: "ns=2;s=A"}, adapters.DataPoint{Name: "b", Register: "ns=x;q=1"}), []string{"data_points[1].register"}},
		{"namespace uri", endpoint(ok, adapters.DataPoint{Name: "a", Register: "nsu=urn:plant:line;s=Temperature"}), nil},
		{"namespace uri without id", endpoint(ok, adapters.DataPoint{Name: "a", Register: "nsu=urn:plant:line"}), []string{"data_points[0].register"}},
		{"namespace uri and index", endpoint(ok, adapters.DataPoint{Name: "a", Register: "nsu=urn:x;ns=2;s=T"}), []string{"data_points[0].register"}},
		{"empty namespace uri", endpoint(ok, adapters.DataPoint{Name: "a", Register: "nsu=;i=5"}), []string{"data_points[0].register"}},
		{"missing register", endpoint(ok, adapters.DataPoint{Name: "a"}), []string{"data_points[0].register"}},
		{"duplicate names", endpoint(ok, adapters.DataPoint{Name: "a", Register: "i=2258"}, adapters.DataPoint{Name: "a", Register: "i=2259"}), []string{"data_points[1].name"}},
		{"missing name", endpoint(ok, adapters.DataPoint{Register: "i=2258"}), []string{"data_points[0].name"}},
		{"bad type", endpoint(ok, adapters.DataPoint{Name: "a", Register: "i=2258", Type: "complex"}), []string{"data_points[0].type"}},
		{"zero scale", endpoint(ok, adapters.DataPoint{Name: "a", Register: "i=2258", Scale: f(0)}), []string{"data_points[0].scale"}},
		{"several at once", endpoint(`{"endpointUrl":"","securityMode":"x"}`, adapters.DataPoint{Name: "a"}), []string{"connection.endpointUrl", "connection.securityMode", "data_points[0].register"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Driver{}.Validate(tc.ep)
			got := adapters.FieldsOf(err)
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Fatalf("fields = %v, want %v (err: %v)", got, tc.fields, err)
			}
			if err != nil && len(got) == 0 {
				t.Fatalf("error without FieldError: %v", err)
			}
		})
	}
}

func TestNewAppliesDefaults(t *testing.T) {
	a, err := Driver{}.New(endpoint(`{"endpointUrl":"opc.tcp://plc:4840"}`), adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	ad := a.(*Adapter)
	if ad.conn.TimeoutMS != DefaultTimeoutMS || ad.conn.PublishingIntervalMS != DefaultPublishingIntervalMS {
		t.Fatalf("defaults not applied: %+v", ad.conn)
	}
	if _, err := (Driver{}).New(endpoint(`{}`), adapters.Env{}); err == nil {
		t.Fatal("New accepted an invalid endpoint")
	}
	if got := (Driver{}).Protocol(); got != "opcua" {
		t.Fatalf("Protocol() = %q", got)
	}
}

func TestSecurityDefaults(t *testing.T) {
	s := newSecurity("opc.tcp://h:1", "SignAndEncrypt", "", "", nil, "", "", "", "", 0)
	if s.policyURI != securityPolicies[DefaultSecurityPolicy] || s.trustMode != TrustAll {
		t.Fatalf("got policy %q trust %q", s.policyURI, s.trustMode)
	}
	s = newSecurity("opc.tcp://h:1", "", "", "", nil, "", "", "", "", 0)
	if s.policyURI != securityPolicies["None"] {
		t.Fatalf("None mode got policy %q", s.policyURI)
	}
}

func TestBrowseRequestValidate(t *testing.T) {
	tests := []struct {
		name   string
		req    BrowseRequest
		fields []string
	}{
		{"minimal", BrowseRequest{EndpointURL: "opc.tcp://h:4840"}, nil},
		{"depth 20", BrowseRequest{EndpointURL: "opc.tcp://h:4840", MaxDepth: 20}, nil},
		{"secure", BrowseRequest{EndpointURL: "opc.tcp://h:4840", SecurityMode: "SignAndEncrypt", SecurityPolicy: "Aes256_Sha256_RsaPss"}, nil},
		{"missing url", BrowseRequest{}, []string{"endpointUrl"}},
		{"not opc.tcp", BrowseRequest{EndpointURL: "tcp://h:4840"}, []string{"endpointUrl"}},
		{"no host", BrowseRequest{EndpointURL: "opc.tcp://:4840"}, []string{"endpointUrl"}},
		{"depth 21", BrowseRequest{EndpointURL: "opc.tcp://h:4840", MaxDepth: 21}, []string{"maxDepth"}},
		{"negative depth", BrowseRequest{EndpointURL: "opc.tcp://h:4840", MaxDepth: -1}, []string{"maxDepth"}},
		{"bad mode", BrowseRequest{EndpointURL: "opc.tcp://h:4840", SecurityMode: "Full"}, []string{"securityMode"}},
		{"trusted list empty", BrowseRequest{EndpointURL: "opc.tcp://h:4840", CertificateTrustMode: "trusted-list"}, []string{"trustedCertificates"}},
		{"password alone", BrowseRequest{EndpointURL: "opc.tcp://h:4840", Password: "x"}, []string{"username"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := adapters.FieldsOf(tc.req.Validate())
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Fatalf("fields = %v, want %v", got, tc.fields)
			}
		})
	}
	var req BrowseRequest
	if err := json.Unmarshal([]byte(`{"endpointUrl":"opc.tcp://h:1","maxDepth":3,"securityMode":"None","securityPolicy":"None","certificateTrustMode":"trust-all","username":"u","password":"p"}`), &req); err != nil {
		t.Fatal(err)
	}
	if req.MaxDepth != 3 || req.Username != "u" || req.CertificateTrustMode != TrustAll {
		t.Fatalf("JSON tags: %+v", req)
	}
}

func TestSampleConfig(t *testing.T) {
	b, err := os.ReadFile("sample-config.json")
	if err != nil {
		t.Fatal(err)
	}
	var ep adapters.Endpoint
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ep); err != nil {
		t.Fatalf("sample-config.json is not an endpoint: %v", err)
	}
	if err := (Driver{}).Validate(ep); err != nil {
		t.Fatalf("sample-config.json does not validate: %v", err)
	}
}

func TestResolveNamespaceURI(t *testing.T) {
	ep := endpoint(`{"endpointUrl":"opc.tcp://plc:4840"}`,
		adapters.DataPoint{Name: "a", Register: "ns=2;s=A"},
		adapters.DataPoint{Name: "b", Register: "nsu=urn:plant;s=B"},
		adapters.DataPoint{Name: "c", Register: "nsu=urn:other;i=7"})
	ad, err := Driver{}.New(ep, adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	a := ad.(*Adapter)
	a.resolve([]string{"http://opcfoundation.org/UA/", "urn:server", "urn:plant"})
	if a.nodes[0].String() != "ns=2;s=A" || a.nodes[1].String() != "ns=2;s=B" || a.nodes[2] != nil {
		t.Fatalf("nodes = %v", a.nodes)
	}
	bad := a.unresolved(time.Now())
	if len(bad) != 1 || bad[0].Metric != "c" || bad[0].QualityCode != adapters.CodeReadError || bad[0].Protocol != "opcua" {
		t.Fatalf("unresolved = %+v", bad)
	}
}
