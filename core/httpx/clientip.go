package httpx

import (
	"net"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// ClientIP returns the address of the client behind r, for rate limits and
// audit records.
//
// The TCP peer is the answer unless it is one of the trusted proxies (as
// config.ParseCIDRList reads auth.trusted_proxies). Then X-Forwarded-For is
// walked from the right, skipping trusted hops, and the first untrusted
// address is the client. Only the right end can be believed: each trusted
// proxy appends the peer it saw, while everything to the left of the
// nearest untrusted hop was written by that hop, which may be the client
// itself choosing any address it likes. gin's c.ClientIP trusts every proxy
// unless told otherwise, which is why limits key on this instead.
//
// When every hop is trusted (a request from the proxy's own network) the
// furthest trusted address is returned, and an unparsable entry stops the
// walk at the hop that forwarded it: a trusted proxy never writes one, so
// a real address that is known is better than a guess.
func ClientIP(r *http.Request, trusted []*net.IPNet) string {
	peer := hostOnly(r.RemoteAddr)
	ip := parseIP(peer)
	if ip == nil {
		// Not a TCP peer (a unix socket, a test): nothing to walk from.
		return peer
	}
	if !containsIP(trusted, ip) {
		return ip.String()
	}
	hops := forwardedFor(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		hop := parseIP(hostOnly(hops[i]))
		if hop == nil {
			break
		}
		ip = hop
		if !containsIP(trusted, hop) {
			break
		}
	}
	return ip.String()
}

// ClientIPKey returns a RateLimit key function that keys on the client
// address from ClientIP, with IPv6 clients grouped by their /64.
func ClientIPKey(trusted []*net.IPNet) func(*gin.Context) string {
	return func(c *gin.Context) string {
		ip := ClientIP(c.Request, trusted)
		if ip == "" {
			return ""
		}
		return "ip:" + IPRateKey(ip)
	}
}

// IPRateKey is the rate limiting key for a client address: an IPv4 address
// as it is, an IPv6 address as its /64 network. A single IPv6 subscriber
// is normally routed a whole /64, so keying on full addresses would hand
// one client 2^64 budgets and let it fill a limiter's key table alone.
// Anything that is not an address is returned unchanged.
func IPRateKey(ip string) string {
	p := parseIP(ip)
	if p == nil {
		return ip
	}
	if p.To4() != nil {
		return p.String()
	}
	return (&net.IPNet{IP: p.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// forwardedFor returns the X-Forwarded-For entries of every such header in
// order: proxies may append a header line instead of extending the last.
func forwardedFor(h http.Header) []string {
	var hops []string
	for _, line := range h.Values("X-Forwarded-For") {
		for _, f := range strings.Split(line, ",") {
			if f = strings.TrimSpace(f); f != "" {
				hops = append(hops, f)
			}
		}
	}
	return hops
}

// hostOnly strips a port from host:port or [v6]:port; other text is
// returned as it is (X-Forwarded-For entries usually carry no port).
func hostOnly(s string) string {
	s = strings.TrimSpace(s)
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
}

// parseIP parses an address, dropping an IPv6 zone (fe80::1%eth0), which
// net.ParseIP refuses and which says nothing about the client.
func parseIP(s string) net.IP {
	if i := strings.IndexByte(s, '%'); i >= 0 {
		s = s[:i]
	}
	ip := net.ParseIP(s)
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}

func containsIP(nets []*net.IPNet, ip net.IP) bool {
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
