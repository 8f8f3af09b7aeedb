package httpx

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/edgeplat/edgeplat/config"
	"github.com/gin-gonic/gin"
)

func TestClientIP(t *testing.T) {
	trusted, err := config.ParseCIDRList("10.0.0.0/8, 192.0.2.7, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		remote  string
		xff     []string
		trusted bool // pass the trusted list (false: none)
		want    string
	}{
		{name: "direct client", remote: "203.0.113.5:4711", trusted: true, want: "203.0.113.5"},
		{name: "untrusted peer's header is ignored", remote: "203.0.113.5:4711", xff: []string{"1.2.3.4"}, trusted: true, want: "203.0.113.5"},
		{name: "no trusted proxies configured", remote: "10.1.2.3:80", xff: []string{"1.2.3.4"}, want: "10.1.2.3"},
		{name: "one trusted proxy", remote: "10.1.2.3:80", xff: []string{"198.51.100.9"}, trusted: true, want: "198.51.100.9"},
		{name: "spoofed left part is skipped", remote: "10.1.2.3:80", xff: []string{"1.1.1.1, 6.6.6.6, 198.51.100.9"}, trusted: true, want: "198.51.100.9"},
		{name: "chain of trusted proxies", remote: "10.1.2.3:80", xff: []string{"6.6.6.6, 198.51.100.9, 192.0.2.7, 10.9.9.9"}, trusted: true, want: "198.51.100.9"},
		{name: "several header lines", remote: "10.1.2.3:80", xff: []string{"6.6.6.6", "198.51.100.9, 10.9.9.9"}, trusted: true, want: "198.51.100.9"},
		{name: "all hops trusted", remote: "10.1.2.3:80", xff: []string{"10.5.5.5, 10.9.9.9"}, trusted: true, want: "10.5.5.5"},
		{name: "garbage stops at the hop that sent it", remote: "10.1.2.3:80", xff: []string{"198.51.100.9, not-an-ip, 10.9.9.9"}, trusted: true, want: "10.9.9.9"},
		{name: "trusted peer without header", remote: "10.1.2.3:80", trusted: true, want: "10.1.2.3"},
		{name: "entry with port", remote: "10.1.2.3:80", xff: []string{"198.51.100.9:5555"}, trusted: true, want: "198.51.100.9"},
		{name: "IPv6 peer and hops", remote: "[fd00::1]:443", xff: []string{"[2001:db8::7]:1234, fd00::2"}, trusted: true, want: "2001:db8::7"},
		{name: "IPv6 zone dropped", remote: "[fe80::1%eth0]:443", trusted: true, want: "fe80::1"},
		{name: "IPv4-mapped peer", remote: "[::ffff:10.1.2.3]:80", xff: []string{"198.51.100.9"}, trusted: true, want: "198.51.100.9"},
		{name: "not an address", remote: "@", trusted: true, want: "@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			var tr = trusted
			if !tt.trusted {
				tr = nil
			}
			if got := ClientIP(r, tr); got != tt.want {
				t.Errorf("ClientIP = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIPRateKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"198.51.100.9", "198.51.100.9"},
		{"::ffff:198.51.100.9", "198.51.100.9"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"unix", "unix"},
	}
	for _, tt := range tests {
		if got := IPRateKey(tt.in); got != tt.want {
			t.Errorf("IPRateKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestClientIPKey(t *testing.T) {
	trusted, _ := config.ParseCIDRList("10.0.0.0/8")
	key := ClientIPKey(trusted)
	tests := []struct{ remote, xff, want string }{
		{"10.0.0.1:1", "2001:db8::1", "ip:2001:db8::/64"},
		{"203.0.113.5:1", "", "ip:203.0.113.5"},
		{"", "", ""},
	}
	for _, tt := range tests {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest(http.MethodGet, "/", nil)
		c.Request.RemoteAddr = tt.remote
		if tt.xff != "" {
			c.Request.Header.Set("X-Forwarded-For", tt.xff)
		}
		if got := key(c); got != tt.want {
			t.Errorf("key(%q, %q) = %q, want %q", tt.remote, tt.xff, got, tt.want)
		}
	}
}
