package discovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Caps and defaults of an OPC-UA scan (docs/discovery.md, section OPC-UA).
const (
	OPCUAMaxTargets       = 64
	OPCUADefaultTimeoutMS = 3000
	opcuaMaxTimeoutMS     = 30000
	opcuaDefaultPort      = 4840
	opcuaWorkers          = 4
	opcuaProtocol         = "opcua"
)

// OPCUAScanner finds OPC-UA servers: FindServers on every target, then
// GetEndpoints on each server's discovery URLs, listing every endpoint
// URL with its security modes and policies.
type OPCUAScanner struct{}

// Protocol implements Scanner.
func (OPCUAScanner) Protocol() string { return opcuaProtocol }

// OPCUAOptions are the options of an OPC-UA scan.
type OPCUAOptions struct {
	Hosts        []string `json:"hosts"`
	Ports        []int    `json:"ports"`
	EndpointURLs []string `json:"endpointUrls"`
	TimeoutMS    int      `json:"timeoutMs"`
}

type opcuaPlan struct {
	targets []string
	timeout time.Duration
}

// Plan implements Scanner.
func (OPCUAScanner) Plan(raw json.RawMessage, known []json.RawMessage) (Plan, error) {
	var o OPCUAOptions
	if err := decodeOptions(raw, &o); err != nil {
		return nil, err
	}
	var errs []error
	fail := func(field, format string, args ...any) { errs = append(errs, adapters.Fieldf(field, format, args...)) }
	p := &opcuaPlan{timeout: time.Duration(cmp.Or(o.TimeoutMS, OPCUADefaultTimeoutMS)) * time.Millisecond}
	if ms := cmp.Or(o.TimeoutMS, OPCUADefaultTimeoutMS); ms < 100 || ms > opcuaMaxTimeoutMS {
		fail("timeoutMs", "must be 100..%d, got %d", opcuaMaxTimeoutMS, ms)
	}
	for i, u := range o.EndpointURLs {
		if _, err := opcuaURL(u); err != nil {
			fail(fmt.Sprintf("endpointUrls[%d]", i), "%v", err)
			continue
		}
		p.targets = append(p.targets, strings.TrimSpace(u))
	}
	ports := o.Ports
	if len(ports) == 0 {
		ports = []int{opcuaDefaultPort}
	}
	for i, port := range ports {
		if port < 1 || port > 65535 {
			fail(fmt.Sprintf("ports[%d]", i), "must be 1..65535, got %d", port)
		}
	}
	if len(o.Hosts) == 0 && o.Ports != nil {
		fail("hosts", "is required with ports")
	}
	for i, h := range o.Hosts {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/ ") {
			fail(fmt.Sprintf("hosts[%d]", i), "must be a host name or address, got %q", h)
			continue
		}
		for _, port := range ports {
			p.targets = append(p.targets, "opc.tcp://"+net.JoinHostPort(h, strconv.Itoa(port)))
		}
	}
	if len(o.Hosts) == 0 && len(o.EndpointURLs) == 0 {
		for _, c := range known {
			if u, ok := opcuaConnURL(c); ok {
				p.targets = append(p.targets, u)
			}
		}
		if len(p.targets) == 0 {
			fail("endpointUrls", "is required (or hosts): no OPC-UA endpoint is configured to scan")
		}
	}
	p.targets = uniq(p.targets)
	if len(p.targets) > OPCUAMaxTargets {
		fail("hosts", "%d servers to ask; at most %d", len(p.targets), OPCUAMaxTargets)
	}
	return p, errors.Join(errs...)
}

func opcuaURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Scheme != "opc.tcp" || u.Host == "" {
		return nil, fmt.Errorf("must be an opc.tcp://host:port URL, got %q", s)
	}
	return u, nil
}

// opcuaIdentity is an endpoint URL with case and a trailing slash that do
// not matter removed, and the default port made explicit.
func opcuaIdentity(s string) string {
	u, err := opcuaURL(s)
	if err != nil {
		return "opcua:" + s
	}
	host := strings.ToLower(u.Hostname())
	port := cmp.Or(u.Port(), strconv.Itoa(opcuaDefaultPort))
	return "opcua:opc.tcp://" + net.JoinHostPort(host, port) + strings.TrimSuffix(u.Path, "/")
}

func opcuaConnURL(raw json.RawMessage) (string, bool) {
	var c struct {
		EndpointURL string `json:"endpointUrl"`
	}
	if json.Unmarshal(raw, &c) != nil || c.EndpointURL == "" {
		return "", false
	}
	return c.EndpointURL, true
}

// Covers implements Scanner: the same endpoint URL.
func (OPCUAScanner) Covers(conn json.RawMessage, d Device) bool {
	u, ok := opcuaConnURL(conn)
	return ok && opcuaIdentity(u) == d.Identity
}

// Scan implements Plan.
func (p *opcuaPlan) Scan(ctx context.Context) ([]Device, error) {
	var mu sync.Mutex
	byURL := map[string]*Device{}
	var errs []error
	sem := make(chan struct{}, opcuaWorkers)
	var wg sync.WaitGroup
	for _, target := range p.targets {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			devs, err := p.server(ctx, target)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			for _, d := range devs {
				if _, ok := byURL[d.Identity]; !ok {
					byURL[d.Identity] = &d
				}
			}
		}()
	}
	wg.Wait()
	out := make([]Device, 0, len(byURL))
	for _, d := range byURL {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b Device) int { return cmp.Compare(a.Identity, b.Identity) })
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	// A target with no server is the normal case of a scan; only a scan
	// that reached nothing at all reports why.
	if len(out) == 0 && len(errs) > 0 {
		return out, fmt.Errorf("no OPC-UA server answered: %w", errs[0])
	}
	return out, nil
}

// server lists the endpoints of target, then asks it which servers it
// knows (those of a discovery server) and lists theirs. A server it
// reports under its own application URI is the target itself (servers
// advertise their host name): not a second device.
func (p *opcuaPlan) server(ctx context.Context, target string) ([]Device, error) {
	opts := []opcua.Option{opcua.DialTimeout(p.timeout), opcua.RequestTimeout(p.timeout)}
	self, err := p.endpoints(ctx, target, opts)
	if err != nil {
		return nil, err
	}
	out := []Device{self}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	apps, err := opcua.FindServers(cctx, target, opts...)
	cancel()
	if err != nil {
		// Not every server implements FindServers; the target answered.
		return out, nil
	}
	seen := map[string]bool{self.Identity: true}
	for _, a := range apps {
		if a == nil || a.ApplicationType == ua.ApplicationTypeClient || a.ApplicationURI == self.Details["applicationUri"] {
			continue
		}
		for _, u := range a.DiscoveryURLs {
			if _, err := opcuaURL(u); err != nil || seen[opcuaIdentity(u)] {
				continue
			}
			seen[opcuaIdentity(u)] = true
			if d, err := p.endpoints(ctx, u, opts); err == nil {
				out = append(out, d)
				break
			}
		}
	}
	return out, nil
}

// endpoints is one device: the server at u, its endpoints' security
// modes and policies. The device's endpointUrl is u, the address that
// answered: servers often advertise a host name the agent cannot
// resolve.
func (p *opcuaPlan) endpoints(ctx context.Context, u string, opts []opcua.Option) (Device, error) {
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	eps, err := opcua.GetEndpoints(cctx, u, opts...)
	if err != nil {
		return Device{}, fmt.Errorf("get endpoints of %s: %w", u, err)
	}
	if len(eps) == 0 {
		return Device{}, fmt.Errorf("get endpoints of %s: the server lists none", u)
	}
	var modes, policies, advertised []string
	name, appURI := "", ""
	for _, ep := range eps {
		modes = append(modes, securityMode(ep.SecurityMode))
		policies = append(policies, securityPolicy(ep.SecurityPolicyURI))
		advertised = append(advertised, ep.EndpointURL)
		if ep.Server != nil && appURI == "" {
			appURI = ep.Server.ApplicationURI
			if ep.Server.ApplicationName != nil {
				name = ep.Server.ApplicationName.Text
			}
		}
	}
	modes, policies, advertised = sortUniq(modes), sortUniq(policies), sortUniq(advertised)
	conn, _ := json.Marshal(map[string]any{"endpointUrl": u})
	details := map[string]any{"securityModes": modes, "securityPolicies": policies, "endpointUrls": advertised}
	if name != "" {
		details["applicationName"] = name
	}
	if appURI != "" {
		details["applicationUri"] = appURI
	}
	pu, _ := opcuaURL(u)
	return Device{Protocol: opcuaProtocol, Name: "opcua-" + strings.ReplaceAll(pu.Host+pu.Path, "/", "-"),
		Connection: conn, Identity: opcuaIdentity(u), Details: details}, nil
}

func sortUniq(xs []string) []string {
	xs = uniq(xs)
	slices.Sort(xs)
	return xs
}

// securityMode names a mode as endpoint connections do.
func securityMode(m ua.MessageSecurityMode) string {
	switch m {
	case ua.MessageSecurityModeNone:
		return "None"
	case ua.MessageSecurityModeSign:
		return "Sign"
	case ua.MessageSecurityModeSignAndEncrypt:
		return "SignAndEncrypt"
	}
	return "Invalid"
}

// securityPolicy is the policy's short name (the URI's fragment).
func securityPolicy(uri string) string {
	if _, frag, ok := strings.Cut(uri, "#"); ok {
		return frag
	}
	return uri
}

// Validate implements Plan: GetEndpoints once more.
func (p *opcuaPlan) Validate(ctx context.Context, devs []Device) {
	opts := []opcua.Option{opcua.DialTimeout(p.timeout), opcua.RequestTimeout(p.timeout)}
	for i := range devs {
		if u, ok := opcuaConnURL(devs[i].Connection); ok {
			_, err := p.endpoints(ctx, u, opts)
			devs[i].Validated = err == nil
		}
	}
}

var (
	_ Scanner = OPCUAScanner{}
	_ Plan    = (*opcuaPlan)(nil)
)
