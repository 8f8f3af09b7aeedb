package dest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// testPKI is a throwaway CA with the files of a server and its clients.
type testPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CAFile string
	serial int64
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), serial: 1}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edgeplat test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.CAFile = filepath.Join(p.dir, "ca.pem")
	writePEM(t, p.CAFile, "CERTIFICATE", der)
	return p
}

// issue writes a certificate for cn signed by the CA, with the server
// SANs when server is set, and returns the cert and key file paths.
func (p *testPKI) issue(t *testing.T, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, cn+".pem"), filepath.Join(p.dir, cn+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

// clientTLS is the TLS configuration of a test subscriber.
func (p *testPKI) clientTLS(t *testing.T, certFile, keyFile string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsMosquitto is a private Mosquitto with one TLS listener that refuses
// anonymous clients: with clientCerts, clients authenticate with a
// certificate of the test CA (its common name is the user, as AWS IoT
// identifies a thing by its certificate); otherwise with the users of the
// password file.
type tlsMosquitto struct {
	port int
	proc *coretest.Process
}

func startTLSMosquitto(t *testing.T, pki *testPKI, clientCerts bool, users map[string]string) *tlsMosquitto {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Mosquitto, skipped in -short mode")
	}
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/mosquitto"); serr != nil {
			coretest.Unavailable(t, "mosquitto binary", "PATH or /usr/sbin", err)
		}
		bin = "/usr/sbin/mosquitto"
	}
	dir := t.TempDir()
	cert, key := pki.issue(t, "broker", true)
	m := &tlsMosquitto{port: coretest.FreePort(t)}
	var conf strings.Builder
	fmt.Fprintf(&conf, "listener %d 127.0.0.1\ncafile %s\ncertfile %s\nkeyfile %s\ntls_version tlsv1.2\n", m.port, pki.CAFile, cert, key)
	conf.WriteString("allow_anonymous false\npersistence false\nlog_dest stderr\nlog_type all\n")
	if clientCerts {
		conf.WriteString("require_certificate true\nuse_identity_as_username true\n")
	} else {
		pw := filepath.Join(dir, "passwd")
		if err := os.WriteFile(pw, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for u, p := range users {
			if out, err := exec.Command("mosquitto_passwd", "-b", pw, u, p).CombinedOutput(); err != nil {
				t.Fatalf("mosquitto_passwd: %v: %s", err, out)
			}
		}
		fmt.Fprintf(&conf, "password_file %s\n", pw)
	}
	// Run as root, mosquitto switches to the mosquitto user, which cannot
	// read the root-owned key files.
	if os.Geteuid() == 0 {
		conf.WriteString("user root\n")
	}
	cf := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(cf, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	m.proc = coretest.NewProcess(t, bin, "-c", cf)
	addr := fmt.Sprintf("127.0.0.1:%d", m.port)
	m.proc.Ready = func() error { return coretest.Dialable(addr) }
	m.proc.Start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mosquitto output:\n%s", m.proc.Output())
		}
	})
	return m
}
