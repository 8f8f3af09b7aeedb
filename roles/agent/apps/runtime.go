// Package apps runs the agent's applications: groups of containers it
// keeps in their target state through the container runtime's Docker
// Engine API (Docker, or podman's compatible socket). A Manager holds the
// target, connects to the runtime, and reconciles the two in the
// background: on a target change, on the runtime's events and every
// resync period. A runtime that cannot be reached is a state of the
// Manager, not an error of the agent (docs/apps.md).
//
// The Manager knows nothing of where its target comes from (the local
// store or the cloud's target state): roles/agent hands it over.
package apps

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/moby/moby/client"
)

// Runtime configuration types (RuntimeConfig.Type).
const (
	RuntimeSocket = "socket"
	RuntimeTCP    = "tcp"
	RuntimeTLS    = "tcp+tls"
)

// DefaultSocket is the runtime socket used when nothing else is set.
const DefaultSocket = "/var/run/docker.sock"

// RuntimeConfig is how the agent reaches the container runtime; its
// fields and JSON names are those of the agent API's /v1/docker/config.
type RuntimeConfig struct {
	Type       string `json:"type"`
	SocketPath string `json:"socketPath,omitempty"`
	Host       string `json:"host,omitempty"`
	Port       int    `json:"port,omitempty"`
	CA         string `json:"ca,omitempty"`
	Cert       string `json:"cert,omitempty"`
	Key        string `json:"key,omitempty"`
}

// ParseDockerHost turns a DOCKER_HOST-style address (unix:///path,
// tcp://host:port) into a RuntimeConfig.
func ParseDockerHost(s string) (RuntimeConfig, error) {
	u, err := client.ParseHostURL(s)
	if err != nil {
		return RuntimeConfig{}, fmt.Errorf("docker host %q: %w", s, err)
	}
	switch u.Scheme {
	case "unix":
		p := u.Path
		if p == "" {
			p = u.Host // the client keeps a socket path there
		}
		return RuntimeConfig{Type: RuntimeSocket, SocketPath: p}, nil
	case "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil {
			return RuntimeConfig{}, fmt.Errorf("docker host %q: %w", s, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return RuntimeConfig{}, fmt.Errorf("docker host %q: port: %w", s, err)
		}
		return RuntimeConfig{Type: RuntimeTCP, Host: host, Port: p}, nil
	}
	return RuntimeConfig{}, fmt.Errorf("docker host %q: scheme must be unix or tcp", s)
}

// Normalize fills in defaults (type socket, the default socket, port
// 2375 or 2376) and validates; errors name the field.
func (c RuntimeConfig) Normalize() (RuntimeConfig, error) {
	var errs []error
	if c.Type == "" {
		c.Type = RuntimeSocket
	}
	switch c.Type {
	case RuntimeSocket:
		if c.SocketPath == "" {
			c.SocketPath = DefaultSocket
		}
		if !path.IsAbs(c.SocketPath) || path.Clean(c.SocketPath) != c.SocketPath {
			errs = append(errs, fmt.Errorf("socketPath: %q must be a clean absolute path", c.SocketPath))
		}
		c.Host, c.Port, c.CA, c.Cert, c.Key = "", 0, "", "", ""
	case RuntimeTCP, RuntimeTLS:
		if c.Host == "" {
			errs = append(errs, errors.New("host: is required for type "+c.Type))
		}
		if c.Port == 0 {
			c.Port = 2375
			if c.Type == RuntimeTLS {
				c.Port = 2376
			}
		}
		if c.Port < 1 || c.Port > 65535 {
			errs = append(errs, fmt.Errorf("port: must be 1..65535, got %d", c.Port))
		}
		c.SocketPath = ""
		if c.Type == RuntimeTCP {
			c.CA, c.Cert, c.Key = "", "", ""
		} else if _, err := c.tlsConfig(); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("type: must be %s, %s or %s, got %q", RuntimeSocket, RuntimeTCP, RuntimeTLS, c.Type))
	}
	return c, errors.Join(errs...)
}

// Address is the runtime's address for logs and errors.
func (c RuntimeConfig) Address() string {
	if c.Type == RuntimeSocket || c.Type == "" {
		return "unix://" + c.SocketPath
	}
	return "tcp://" + net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// tlsConfig builds the client TLS configuration from the PEM strings: CA
// verifies the runtime (the system roots when empty), Cert and Key are
// the client certificate (both or neither).
func (c RuntimeConfig) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CA != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(c.CA)) {
			return nil, errors.New("ca: no PEM certificate in it")
		}
		tc.RootCAs = pool
	}
	switch {
	case c.Cert != "" && c.Key != "":
		pair, err := tls.X509KeyPair([]byte(c.Cert), []byte(c.Key))
		if err != nil {
			return nil, fmt.Errorf("cert: with key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	case c.Cert != "" || c.Key != "":
		return nil, errors.New("cert: cert and key go together")
	}
	return tc, nil
}

// connectTimeout bounds the first request to a runtime (the ping).
const connectTimeout = 5 * time.Second

// newClient builds an API client for c. No I/O.
func newClient(c RuntimeConfig) (*client.Client, error) {
	c, err := c.Normalize()
	if err != nil {
		return nil, err
	}
	// The client negotiates the API version on its first request
	// (podman caps it at 1.41).
	var opts []client.Opt
	if c.Type == RuntimeTLS {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		// The client switches to https when its transport has a TLS
		// configuration; WithHost then sets the dialer on that transport.
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: tc}}))
	}
	opts = append(opts, client.WithHost(c.Address()))
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("runtime client for %s: %w", c.Address(), err)
	}
	return cli, nil
}

// Probe connects with c and reports the engine's version and how many
// containers it has; nothing is kept.
func Probe(ctx context.Context, c RuntimeConfig) (version string, containers int, err error) {
	cli, err := newClient(c)
	if err != nil {
		return "", 0, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", 0, fmt.Errorf("runtime at %s: %w", c.Address(), err)
	}
	return info.Info.ServerVersion, info.Info.Containers, nil
}
