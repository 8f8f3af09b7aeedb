package mqttx

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// pki is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, written as PEM files.
type pki struct {
	caFile, certFile, keyFile string // client side
	server                    tls.Certificate
	pool                      *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edgeplat test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	srvDER, srvKey := issue(2, "broker", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	cliDER, cliKey := issue(3, "agent", x509.ExtKeyUsageClientAuth, nil)
	p := &pki{
		caFile:   write("ca.pem", "CERTIFICATE", caDER),
		certFile: write("client.pem", "CERTIFICATE", cliDER),
		keyFile:  write("client-key.pem", "PRIVATE KEY", keyDER(cliKey)),
		pool:     x509.NewCertPool(),
	}
	p.pool.AddCert(ca)
	p.server, err = tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER(srvKey)}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startTLSBroker runs a mochi broker with a mutual-TLS listener, a
// WebSocket listener and a WebSocket-over-TLS listener, and returns their
// URLs by scheme.
func startTLSBroker(t *testing.T, p *pki) map[string]string {
	t.Helper()
	serverTLS := &tls.Config{
		Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
	s := mochi.New(&mochi.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", coretest.FreePort(t)) }
	tlsAddr, wsAddr, wssAddr := addr(), addr(), addr()
	for _, l := range []listeners.Listener{
		listeners.NewTCP(listeners.Config{ID: "mtls", Address: tlsAddr, TLSConfig: serverTLS}),
		listeners.NewWebsocket(listeners.Config{ID: "ws", Address: wsAddr}),
		// A config of its own: http.Server adds its protocols to the
		// config it serves with, while the TCP listener's handshakes read
		// theirs (a data race when they share one).
		listeners.NewWebsocket(listeners.Config{ID: "wss", Address: wssAddr, TLSConfig: serverTLS.Clone()}),
	} {
		if err := s.AddListener(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// The WebSocket listeners bind in the background; the clients' own
	// retries cover that.
	return map[string]string{"mqtts": "mqtts://" + tlsAddr, "ssl": "ssl://" + tlsAddr, "tls": "tls://" + tlsAddr,
		"ws": "ws://" + wsAddr, "wss": "wss://" + wssAddr}
}

// TestSchemes connects over mutual TLS (mqtts, ssl, tls), WebSocket and
// WebSocket over TLS, configured through OptionsFromConfig, and makes a
// round trip on each.
func TestSchemes(t *testing.T) {
	p := newPKI(t)
	urls := startTLSBroker(t, p)
	for _, scheme := range []string{"mqtts", "ssl", "tls", "ws", "wss"} {
		t.Run(scheme, func(t *testing.T) {
			cfg := config.MQTT{BrokerURL: urls[scheme], QoS: 1, MaxReconnectAttempts: 20, FatalRecoveryCooldownMS: 60000}
			if scheme != "ws" {
				cfg.CAFile, cfg.CertFile, cfg.KeyFile = p.caFile, p.certFile, p.keyFile
			}
			o := OptionsFromConfig(cfg, uniqueID("scheme"))
			test := testOptions(t, "")
			o.Logger, o.Registerer, o.BackoffBase, o.BackoffMax = test.Logger, test.Registerer, test.BackoffBase, test.BackoffMax
			c := newClient(t, o)
			in := newInbox()
			topic := uniqueID("schemes")
			if err := c.Subscribe(topic, c.QoS(), in.handler(nil)); err != nil {
				t.Fatal(err)
			}
			start(t, c)
			waitState(t, c, StateConnected)
			publishOK(t, c, topic, "over "+scheme)
			if got := in.waitCount(t, 1); got[0] != "over "+scheme {
				t.Errorf("got %q", got)
			}
		})
	}
}

// TestTLSWithoutClientCertificateFails: the broker requires a client
// certificate; without one the client keeps retrying and reports why.
func TestTLSWithoutClientCertificateFails(t *testing.T) {
	p := newPKI(t)
	urls := startTLSBroker(t, p)
	o := testOptions(t, urls["mqtts"])
	o.CAFile = p.caFile
	c := newClient(t, o)
	start(t, c)
	coretest.Eventually(t, waitFor, "a failed reconnect", func() bool { return c.Stats().ConsecutiveFailures >= 1 })
	if s := c.Stats(); s.State == StateConnected || s.LastError == "" {
		t.Errorf("Stats = %+v, want a TLS failure", s)
	}
}
