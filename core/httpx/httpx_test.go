package httpx

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func writeTestError(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, gin.H{"code": code, "message": message})
}

func TestEngineAnswersInTheRoleShape(t *testing.T) {
	e := NewEngine(EngineOptions{WriteError: writeTestError, MaxBodyBytes: 16})
	e.GET("/panic", func(*gin.Context) { panic("kaboom") })
	e.POST("/echo", func(c *gin.Context) {
		b, err := io.ReadAll(c.Request.Body)
		if IsBodyTooLarge(err) {
			writeTestError(c, http.StatusRequestEntityTooLarge, "body_too_large", "too large")
			return
		}
		c.String(http.StatusOK, string(b))
	})
	tests := []struct {
		name, method, path, body string
		chunked                  bool
		status                   int
		want                     string
	}{
		{"unknown route", "GET", "/nope", "", false, 404, `"code":"not_found"`},
		{"wrong method", "DELETE", "/echo", "", false, 405, `"code":"method_not_allowed"`},
		{"panic", "GET", "/panic", "", false, 500, `"code":"internal"`},
		{"body within cap", "POST", "/echo", "small", false, 200, "small"},
		{"declared body over cap", "POST", "/echo", strings.Repeat("x", 17), false, 413, `"code":"body_too_large"`},
		{"streamed body over cap", "POST", "/echo", strings.Repeat("x", 17), true, 413, `"code":"body_too_large"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			if tt.chunked {
				req.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Errorf("%s %s = %d %s, want %d containing %s", tt.method, tt.path, rec.Code, rec.Body, tt.status, tt.want)
			}
		})
	}
}

func TestServerPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, err := NewServer(ServerOptions{Name: "t", Addr: ln.Addr().String(), Handler: http.NotFoundHandler(), PortHint: "--port"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "already in use; choose another port with --port") {
		t.Fatalf("Start = %v", err)
	}
}

// TestServerDrainsInFlightRequests: Stop waits for a request that is being
// served instead of cutting it off.
func TestServerDrainsInFlightRequests(t *testing.T) {
	entered := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		time.Sleep(200 * time.Millisecond)
		_, _ = io.WriteString(w, "done")
	})
	s, err := NewServer(ServerOptions{Name: "t", Addr: "127.0.0.1:0", Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- s.Run(ctx) }()

	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + s.Addr() + "/")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{string(b), err}
	}()
	<-entered
	// Run drains once its context ends; Stop follows Run (lifecycle).
	cancel()
	if err := <-runDone; err != nil {
		t.Errorf("Run = %v", err)
	}
	if r := <-got; r.err != nil || r.body != "done" {
		t.Errorf("in-flight request got %q, %v", r.body, r.err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestStopWithoutRunReleasesThePort: when a later service fails to start,
// lifecycle stops this one without running it; its port must be free
// again, or a retry in the same process could not bind it.
func TestStopWithoutRunReleasesThePort(t *testing.T) {
	s, err := NewServer(ServerOptions{Name: "t", Addr: "127.0.0.1:0", Handler: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port still held after Stop: %v", err)
	}
	_ = ln.Close()
}
