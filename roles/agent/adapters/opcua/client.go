package opcua

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"
)

// clientAppURI is the application URI of the agent. A generated client
// certificate carries it as its URI SAN because servers compare the two.
const clientAppURI = "urn:edgeplat:agent:opcua"

// ErrUntrustedServer means the server's certificate is not in the trusted
// list of a trusted-list endpoint.
var ErrUntrustedServer = errors.New("server certificate is not trusted")

// dial opens a secure channel and an activated session as s describes.
// gopcua's auto-reconnect is off: the caller owns reconnection.
func dial(ctx context.Context, s security) (*opcua.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	endpoints, err := opcua.GetEndpoints(ctx, s.endpointURL, opcua.AutoReconnect(false),
		opcua.DialTimeout(s.timeout), opcua.RequestTimeout(s.timeout))
	if err != nil {
		return nil, classify(fmt.Errorf("get endpoints of %s: %w", s.endpointURL, err))
	}
	ep, err := selectEndpoint(endpoints, s)
	if err != nil {
		return nil, err
	}
	if s.mode != ua.MessageSecurityModeNone && s.trustMode == TrustList {
		if err := verifyServer(ep.ServerCertificate, s.trusted); err != nil {
			return nil, adapters.WithCode(adapters.CodeConnectionRefused, err)
		}
	}

	opts := []opcua.Option{
		opcua.AutoReconnect(false),
		opcua.DialTimeout(s.timeout),
		opcua.RequestTimeout(s.timeout),
		opcua.ApplicationName("edgeplat agent"),
		opcua.ApplicationURI(clientAppURI),
		opcua.ProductURI("urn:edgeplat"),
		opcua.SessionTimeout(time.Minute),
	}
	authType := ua.UserTokenTypeAnonymous
	if s.username != "" {
		authType = ua.UserTokenTypeUserName
		opts = append(opts, opcua.AuthUsername(s.username, s.password))
	} else {
		opts = append(opts, opcua.AuthAnonymous())
	}
	if s.mode != ua.MessageSecurityModeNone {
		certOpts, err := clientCertificate(s)
		if err != nil {
			return nil, err
		}
		opts = append(opts, certOpts...)
	}
	opts = append(opts, opcua.SecurityFromEndpoint(ep, authType))

	c, err := opcua.NewClient(s.endpointURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("opc-ua client for %s: %w", s.endpointURL, err)
	}
	if err := c.Connect(ctx); err != nil {
		// Connect leaves the channel open when it fails after dialling.
		closeClient(c, s.timeout)
		return nil, classify(fmt.Errorf("connect to %s: %w", s.endpointURL, err))
	}
	return c, nil
}

// selectEndpoint picks the server endpoint with the configured mode and
// policy. The server's advertised URL is ignored: it often names a host
// the agent cannot resolve, and the configured URL is the one that works.
func selectEndpoint(endpoints []*ua.EndpointDescription, s security) (*ua.EndpointDescription, error) {
	for _, ep := range endpoints {
		if ep.SecurityMode == s.mode && ep.SecurityPolicyURI == s.policyURI {
			return ep, nil
		}
	}
	var offered []string
	for _, ep := range endpoints {
		offered = append(offered, ep.SecurityMode.String()+"/"+strings.TrimPrefix(ep.SecurityPolicyURI, ua.SecurityPolicyURIPrefix))
	}
	return nil, adapters.WithCode(adapters.CodeConnectionRefused, fmt.Errorf(
		"server %s offers no endpoint with security %s/%s (offered: %s)", s.endpointURL,
		s.mode, strings.TrimPrefix(s.policyURI, ua.SecurityPolicyURIPrefix), strings.Join(offered, ", ")))
}

func closeClient(c *opcua.Client, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = c.Close(ctx)
}

// clientCertificate loads certFile/keyFile, or makes a self-signed
// certificate in memory: enough for servers that accept unknown clients
// and for a first trust step on those that do not.
func clientCertificate(s security) ([]opcua.Option, error) {
	if s.certFile != "" {
		pair, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s: %w", s.certFile, err)
		}
		key, ok := pair.PrivateKey.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("client key %s: OPC-UA needs an RSA key, got %T", s.keyFile, pair.PrivateKey)
		}
		return []opcua.Option{opcua.Certificate(pair.Certificate[0]), opcua.PrivateKey(key)}, nil
	}
	if s.generated == nil {
		s.generated = &generatedCert{}
	}
	if s.generated.der == nil {
		der, key, err := selfSigned()
		if err != nil {
			return nil, err
		}
		s.generated.der, s.generated.key = der, key
	}
	der, key := s.generated.der, s.generated.key
	return []opcua.Option{opcua.Certificate(der), opcua.PrivateKey(key)}, nil
}

// generatedCert keeps a generated client certificate for the life of an
// adapter, so a server that trusted it once keeps recognising the agent
// across reconnections.
type generatedCert struct {
	der []byte
	key *rsa.PrivateKey
}

func selfSigned() ([]byte, *rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("generate client key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("certificate serial: %w", err)
	}
	appURI, _ := url.Parse(clientAppURI)
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "edgeplat agent", Organization: []string{"edgeplat"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(2, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment |
			x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{appURI},
	}
	if host != "" {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("self-sign client certificate: %w", err)
	}
	return der, key, nil
}

// verifyServer accepts serverDER when it is one of the trusted
// certificates or chains to one of them. Host names are not checked:
// OPC-UA servers name themselves by application URI, not by DNS.
func verifyServer(serverDER []byte, trusted []string) error {
	if len(serverDER) == 0 {
		return fmt.Errorf("%w: the endpoint carries no certificate", ErrUntrustedServer)
	}
	cert, err := x509.ParseCertificate(serverDER)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUntrustedServer, err)
	}
	pool := x509.NewCertPool()
	for _, t := range trusted {
		pemBytes := []byte(t)
		if !strings.Contains(t, "-----BEGIN") {
			if pemBytes, err = os.ReadFile(t); err != nil {
				return fmt.Errorf("trusted certificate %s: %w", t, err)
			}
		}
		ders, err := parsePEMCertificates(pemBytes)
		if err != nil {
			return fmt.Errorf("trusted certificate %s: %w", shortName(t), err)
		}
		for _, der := range ders {
			if bytes.Equal(der, serverDER) {
				return nil
			}
			if c, err := x509.ParseCertificate(der); err == nil {
				pool.AddCert(c)
			}
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUntrustedServer, cert.Subject, err)
	}
	return nil
}

func shortName(t string) string {
	if strings.Contains(t, "-----BEGIN") {
		return "(inline PEM)"
	}
	return t
}
