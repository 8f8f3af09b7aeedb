package agent

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCrossSiteRequestsRefused(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, keyMode)
	if code, _ := r.do("POST", "/v1/auth/setup", `{"username":"root","password":"correct horse"}`, nil); code != 201 {
		t.Fatal("setup", code)
	}
	resp := r.raw("POST", "/v1/auth/login", `{"username":"root","password":"correct horse"}`, nil)
	resp.Body.Close()
	cookie := sessionCookieOf(t, resp)
	r.key = ""
	r.cookies = []*http.Cookie{cookie}
	port := r.base[strings.LastIndex(r.base, ":")+1:]

	tests := []struct {
		name   string
		method string
		path   string
		body   string
		header map[string]string
		want   int
	}{
		{"a form body is not JSON", "POST", "/v1/admin/users", `{"username":"evil","password":"123456=","is_superuser":true}`,
			map[string]string{"Content-Type": "text/plain"}, 415},
		{"a foreign origin's session is no session", "POST", "/v1/reboot", "", map[string]string{"Origin": "http://127.0.0.1:9999"}, 401},
		{"a same-site page's session is no session", "GET", "/v1/admin/users", "", map[string]string{"Sec-Fetch-Site": "same-site"}, 401},
		{"login from a foreign page", "POST", "/v1/auth/login", `{"username":"root","password":"correct horse"}`,
			map[string]string{"Origin": "http://evil.example"}, 403},
		{"the agent's own page", "GET", "/v1/admin/users", "", map[string]string{"Origin": "http://127.0.0.1:" + port, "Sec-Fetch-Site": "same-origin"}, 200},
		{"a non-browser client", "GET", "/v1/admin/users", "", nil, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := r.do(tt.method, tt.path, tt.body, tt.header)
			if code != tt.want {
				t.Fatalf("%s %s = %d, want %d (%s)", tt.method, tt.path, code, tt.want, body)
			}
		})
	}
	if _, body := r.do("GET", "/v1/admin/users", "", nil); strings.Contains(body, "evil") {
		t.Fatal("the form created a user")
	}
}

func TestShutdownWhileInitialising(t *testing.T) {
	// A directory where the store file should be fails the config
	// phase, and is retried: the agent stays INITIALIZING and says why.
	// (Access errors end the agent instead: TestUnusableDataDirEndsTheAgent.)
	r := startAgent(t, retriedDataDir(t), false, nil)
	eventually(t, 10*time.Second, "a failed config phase", func() bool {
		_, body := r.do("GET", "/v1/readiness", "", nil)
		return strings.Contains(body, "config")
	})
	if code, _ := r.do("POST", "/v1/shutdown", "", nil); code != 202 {
		t.Fatal("shutdown", code)
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("shutdown ended the agent with %v", err)
		}
		r.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not stop while initialising")
	}
}

// TestRebootUnderLoad checks that requests racing soft reboots get an
// answer or a 503, never a 500 from a store closed under them.
func TestRebootUnderLoad(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, p := range []string{"/v1/db/stats", "/v1/endpoints", "/v1/settings"} {
					code, _ := r.do("GET", p, "", nil)
					mu.Lock()
					codes[code]++
					mu.Unlock()
				}
			}
		})
	}
	for range 5 {
		r.waitReady()
		if code, body := r.do("POST", "/v1/reboot", "", nil); code != 202 && code != 409 {
			t.Errorf("reboot = %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.waitReady()
	close(stop)
	wg.Wait()
	for code, n := range codes {
		if code != 200 && code != 503 {
			t.Errorf("%d answers with status %d during reboots (all: %v)", n, code, codes)
		}
	}
}
