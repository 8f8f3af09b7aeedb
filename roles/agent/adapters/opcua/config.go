package opcua

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/gopcua/opcua/ua"
)

// Defaults of the connection settings.
const (
	DefaultTimeoutMS            = 5000
	DefaultPublishingIntervalMS = 1000
	DefaultSecurityPolicy       = "Basic256Sha256"
)

// Certificate trust modes: how the client decides whether the server's
// certificate is acceptable on a secured channel.
const (
	// TrustAll accepts any server certificate, the usual choice on a plant
	// network where servers make their own self-signed certificates.
	TrustAll = "trust-all"
	// TrustList accepts only a server certificate that is one of
	// trustedCertificates or is signed by one of them.
	TrustList = "trusted-list"
)

// Connection is the endpoint's "connection" object for protocol opcua.
type Connection struct {
	EndpointURL          string   `json:"endpointUrl"`
	SecurityMode         string   `json:"securityMode,omitempty"`
	SecurityPolicy       string   `json:"securityPolicy,omitempty"`
	CertificateTrustMode string   `json:"certificateTrustMode,omitempty"`
	TrustedCertificates  []string `json:"trustedCertificates,omitempty"`
	CertFile             string   `json:"certFile,omitempty"`
	KeyFile              string   `json:"keyFile,omitempty"`
	Username             string   `json:"username,omitempty"`
	Password             string   `json:"password,omitempty"`
	TimeoutMS            int      `json:"timeoutMs,omitempty"`
	Subscribe            bool     `json:"subscribe,omitempty"`
	PublishingIntervalMS int      `json:"publishingIntervalMs,omitempty"`
	SamplingIntervalMS   int      `json:"samplingIntervalMs,omitempty"`
}

// security is the part of the settings both the adapter and Browse use to
// open a session.
type security struct {
	endpointURL string
	mode        ua.MessageSecurityMode
	policyURI   string
	trustMode   string
	trusted     []string
	certFile    string
	keyFile     string
	username    string
	password    string
	timeout     time.Duration
	generated   *generatedCert
}

var securityModes = map[string]ua.MessageSecurityMode{
	"None":           ua.MessageSecurityModeNone,
	"Sign":           ua.MessageSecurityModeSign,
	"SignAndEncrypt": ua.MessageSecurityModeSignAndEncrypt,
}

// securityPolicies names the policies the way OPC-UA tools and the API
// spell them; gopcua's own map drops the underscores.
var securityPolicies = map[string]string{
	"None":                  ua.SecurityPolicyURINone,
	"Basic128Rsa15":         ua.SecurityPolicyURIBasic128Rsa15,
	"Basic256":              ua.SecurityPolicyURIBasic256,
	"Basic256Sha256":        ua.SecurityPolicyURIBasic256Sha256,
	"Aes128_Sha256_RsaOaep": ua.SecurityPolicyURIAes128Sha256RsaOaep,
	"Aes256_Sha256_RsaPss":  ua.SecurityPolicyURIAes256Sha256RsaPss,
}

// valueTypes are the accepted data point "type" values. Blank or "auto"
// keeps the value as the server sends it.
var valueTypes = map[string]string{
	"": "", "auto": "",
	"bool": "bool", "boolean": "bool",
	"int": "int", "int16": "int", "int32": "int", "int64": "int",
	"uint16": "int", "uint32": "int", "uint64": "int",
	"float": "float", "float32": "float", "float64": "float", "double": "float",
	"string": "string",
}

// decodeConnection decodes raw strictly: an unknown field is a FieldError.
func decodeConnection(raw json.RawMessage) (Connection, error) {
	var c Connection
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return c, adapters.Fieldf("connection", "is required")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, connectionDecodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return c, adapters.Fieldf("connection", "trailing data after the object")
	}
	return c, nil
}

func connectionDecodeError(err error) error {
	const unknown = "json: unknown field "
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		name := strings.Trim(strings.TrimPrefix(msg, unknown), `"`)
		return adapters.Fieldf("connection."+name, "unknown field")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return adapters.Fieldf("connection."+te.Field, "must be a %s", te.Type)
	}
	return adapters.Fieldf("connection", "invalid: %v", err)
}

// withDefaults fills the documented defaults in.
func (c Connection) withDefaults() Connection {
	if c.TimeoutMS == 0 {
		c.TimeoutMS = DefaultTimeoutMS
	}
	if c.PublishingIntervalMS == 0 {
		c.PublishingIntervalMS = DefaultPublishingIntervalMS
	}
	return c
}

// validate checks c without I/O, naming fields under prefix.
func (c Connection) validate(prefix string) []error {
	errs := checkSecurity(prefix, c.EndpointURL, c.SecurityMode, c.SecurityPolicy, c.CertificateTrustMode, c.TrustedCertificates)
	if (c.CertFile == "") != (c.KeyFile == "") {
		field := "certFile"
		if c.KeyFile == "" {
			field = "keyFile"
		}
		errs = append(errs, adapters.Fieldf(prefix+field, "certFile and keyFile go together"))
	}
	if c.Password != "" && c.Username == "" {
		errs = append(errs, adapters.Fieldf(prefix+"username", "is required with a password"))
	}
	if c.TimeoutMS < 0 || c.TimeoutMS > 600000 {
		errs = append(errs, adapters.Fieldf(prefix+"timeoutMs", "must be 1 to 600000"))
	}
	if c.PublishingIntervalMS < 0 || c.PublishingIntervalMS > 3600000 {
		errs = append(errs, adapters.Fieldf(prefix+"publishingIntervalMs", "must be 1 to 3600000"))
	}
	if c.SamplingIntervalMS < 0 || c.SamplingIntervalMS > 3600000 {
		errs = append(errs, adapters.Fieldf(prefix+"samplingIntervalMs", "must be 0 to 3600000"))
	}
	return errs
}

// checkSecurity validates the settings the adapter and Browse share.
func checkSecurity(prefix, endpointURL, mode, policy, trust string, trusted []string) []error {
	var errs []error
	if err := checkEndpointURL(endpointURL); err != nil {
		errs = append(errs, adapters.Fieldf(prefix+"endpointUrl", "%s", err))
	}
	m, modeOK := securityModes[orDefault(mode, "None")]
	if !modeOK {
		errs = append(errs, adapters.Fieldf(prefix+"securityMode", "must be None, Sign or SignAndEncrypt"))
	}
	if _, ok := securityPolicies[orDefault(policy, "None")]; !ok {
		errs = append(errs, adapters.Fieldf(prefix+"securityPolicy",
			"must be None, Basic128Rsa15, Basic256, Basic256Sha256, Aes128_Sha256_RsaOaep or Aes256_Sha256_RsaPss"))
	} else if modeOK {
		switch {
		case m == ua.MessageSecurityModeNone && policy != "" && policy != "None":
			errs = append(errs, adapters.Fieldf(prefix+"securityPolicy", "%s needs securityMode Sign or SignAndEncrypt", policy))
		case m != ua.MessageSecurityModeNone && policy == "None":
			errs = append(errs, adapters.Fieldf(prefix+"securityPolicy", "must not be None with securityMode %s", mode))
		}
	}
	switch orDefault(trust, TrustAll) {
	case TrustAll:
	case TrustList:
		if len(trusted) == 0 {
			errs = append(errs, adapters.Fieldf(prefix+"trustedCertificates", "is required with certificateTrustMode %s", TrustList))
		}
	default:
		errs = append(errs, adapters.Fieldf(prefix+"certificateTrustMode", "must be %s or %s", TrustAll, TrustList))
	}
	for i, tc := range trusted {
		field := fmt.Sprintf("%strustedCertificates[%d]", prefix, i)
		switch {
		case strings.TrimSpace(tc) == "":
			errs = append(errs, adapters.Fieldf(field, "must be a PEM certificate or a file path"))
		case strings.Contains(tc, "-----BEGIN"):
			if _, err := parsePEMCertificates([]byte(tc)); err != nil {
				errs = append(errs, adapters.Fieldf(field, "%s", err))
			}
		}
	}
	return errs
}

func checkEndpointURL(s string) error {
	if s == "" {
		return errors.New("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("is not a URL: %w", err)
	}
	if u.Scheme != "opc.tcp" {
		return errors.New("must be an opc.tcp:// URL")
	}
	if u.Hostname() == "" {
		return errors.New("must name a host")
	}
	if u.User != nil {
		// A URL is logged, shown and echoed in errors; credentials go in
		// username and password, which are masked.
		return errors.New("must not carry credentials; use username and password")
	}
	return nil
}

// security turns validated settings into what dial needs.
func (c Connection) security() security {
	return newSecurity(c.EndpointURL, c.SecurityMode, c.SecurityPolicy, c.CertificateTrustMode,
		c.TrustedCertificates, c.CertFile, c.KeyFile, c.Username, c.Password, time.Duration(c.TimeoutMS)*time.Millisecond)
}

func newSecurity(endpointURL, mode, policy, trust string, trusted []string, certFile, keyFile, user, pass string, timeout time.Duration) security {
	s := security{
		endpointURL: endpointURL,
		mode:        securityModes[orDefault(mode, "None")],
		trustMode:   orDefault(trust, TrustAll),
		trusted:     trusted,
		certFile:    certFile,
		keyFile:     keyFile,
		username:    user,
		password:    pass,
		timeout:     timeout,
	}
	if s.mode == ua.MessageSecurityModeNone {
		s.policyURI = ua.SecurityPolicyURINone
	} else {
		s.policyURI = securityPolicies[orDefault(policy, DefaultSecurityPolicy)]
	}
	return s
}

func parsePEMCertificates(b []byte) ([][]byte, error) {
	var ders [][]byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			ders = append(ders, blk.Bytes)
		}
	}
	if len(ders) == 0 {
		return nil, errors.New("holds no PEM CERTIFICATE block")
	}
	return ders, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
