package httpx

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/coretest"
)

func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	e := NewEngine(EngineOptions{WriteError: writeTestError})
	e.GET("/ok", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	e.GET("/panic", func(*gin.Context) { panic("kaboom") })
	want := map[string]string{
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
		"Content-Security-Policy": "frame-ancestors 'none'",
	}
	for _, path := range []string{"/ok", "/nope", "/panic", "/ok?x=%00"} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		for k, v := range want {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("GET %s (%d): %s = %q, want %q", path, rec.Code, k, got, v)
			}
		}
	}
}

func TestCheckNUL(t *testing.T) {
	tests := []struct {
		name, body, want string // want "" means no error
	}{
		{"no escape at all", `{"a": "b"}`, ""},
		{"escaped backslash is not a NUL", `{"a": "x\\u0000y"}`, ""},
		{"top-level value", `{"email": "a\u0000@b.c"}`, "body: email contains a NUL"},
		{"nested value", `{"tags": {"site": "x", "location": "\u0000"}}`, "body: tags.location contains"},
		{"array element", `{"list": ["ok", "b\u0000"]}`, "body: list[1] contains"},
		{"object in array", `[{"a": 1}, {"agentUuid": "\u0000"}]`, "body: [1].agentUuid contains"},
		{"after numbers and nulls", `{"n": 1, "z": null, "t": true, "s": "\u0000"}`, "body: s contains"},
		{"after a closed object", `{"a": {"b": 1}, "c": "\u0000"}`, "body: c contains"},
		{"top-level key", `{"a\u0000b": 1}`, "body: a key of the top-level object contains"},
		{"nested key", `{"tags": {"\u0000": "x"}}`, "body: a key of tags contains"},
		{"top-level string", `"\u0000"`, "body: the document contains"},
		{"syntax error is left to the decoder", `{"a": 1,, "b": "\u0000"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkNUL([]byte(tt.body))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("checkNUL(%s) = %v, want nil", tt.body, err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Fatalf("checkNUL(%s) = %v, want %q...", tt.body, err, tt.want)
			}
		})
	}
}

func TestBindStrictRefusesNUL(t *testing.T) {
	e := NewEngine(EngineOptions{WriteError: writeTestError})
	e.POST("/x", func(c *gin.Context) {
		var in struct {
			Name string            `json:"name"`
			Tags map[string]string `json:"tags"`
		}
		if BindStrict(c, 1<<10, &in, writeTestError) {
			c.String(http.StatusOK, "bound")
		}
	})
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{"tags": {"location": "a\u0000"}}`)))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "tags.location contains a NUL") {
		t.Errorf("got %d %s, want 400 naming tags.location", rec.Code, rec.Body)
	}
}

func TestNULParametersRefused(t *testing.T) {
	e := NewEngine(EngineOptions{WriteError: writeTestError})
	e.GET("/items/:id", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	tests := []struct {
		path   string
		status int
		want   string
	}{
		{"/items/a?metric=x", 200, "ok"},
		{"/items/a?metric=%2500", 200, "ok"}, // the text %00, not a NUL
		{"/items/a%00b", 400, "path parameter id contains a NUL"},
		{"/items/a?metric=x%00", 400, "query parameter metric contains a NUL"},
		{"/items/a?ok=1&start=%00&x=2", 400, "query parameter start contains a NUL"},
		{"/items/a?na%00me=1", 400, `query parameter na\\u0000me contains a NUL`},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("GET %s = %d %s, want %d containing %q", tt.path, rec.Code, rec.Body, tt.status, tt.want)
		}
		if tt.status == 400 && !strings.Contains(rec.Body.String(), `"code":"invalid_parameter"`) {
			t.Errorf("GET %s: %s, want code invalid_parameter", tt.path, rec.Body)
		}
	}
}

// bodyTimeoutServer serves e on a real connection, which the body deadline
// needs.
func bodyTimeoutServer(t *testing.T, timeout time.Duration) (*gin.Engine, string) {
	t.Helper()
	e := NewEngine(EngineOptions{WriteError: writeTestError, BodyTimeout: timeout})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return e, srv.Listener.Addr().String()
}

// TestTrickledBodyIsCutOff: a body sent one byte at a time, which would take
// a minute to complete, is answered 408 once the body timeout has passed.
func TestTrickledBodyIsCutOff(t *testing.T) {
	e, addr := bodyTimeoutServer(t, 300*time.Millisecond)
	e.POST("/echo", func(c *gin.Context) {
		if b, ok := ReadBody(c, 1<<20, writeTestError); ok {
			c.String(http.StatusOK, string(b))
		}
	})
	resp, body := coretest.TrickleBody(t, addr, "/echo")
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "request_timeout") {
		t.Fatalf("trickled body = %d %s, want 408 request_timeout", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("408 X-Frame-Options = %q", got)
	}
}

// TestBodyTimeoutSparesLongAnswers: the deadline covers the body only. A
// handler that has read its body, and a stream without a body (as the live
// SSE route), keep working well past the timeout, their contexts alive.
func TestBodyTimeoutSparesLongAnswers(t *testing.T) {
	const timeout = 200 * time.Millisecond
	e, addr := bodyTimeoutServer(t, timeout)
	work := func(c *gin.Context) {
		for i := range 5 {
			select {
			case <-c.Request.Context().Done():
				c.String(http.StatusInternalServerError, "cancelled after %d: %v", i, context.Cause(c.Request.Context()))
				return
			case <-time.After(timeout):
			}
			_, _ = c.Writer.WriteString(".")
			c.Writer.Flush()
		}
	}
	e.POST("/slow", func(c *gin.Context) {
		if _, ok := ReadBody(c, 1<<20, writeTestError); ok {
			c.Status(http.StatusOK)
			work(c)
		}
	})
	e.GET("/stream", func(c *gin.Context) {
		c.Status(http.StatusOK)
		work(c)
	})
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	for _, req := range []struct{ method, path, body string }{
		{http.MethodGet, "/stream", ""},
		{http.MethodPost, "/slow", `{"a": 1}`},
	} {
		r, err := http.NewRequest(req.method, "http://"+addr+req.path, strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		if req.body == "" {
			r.Body = http.NoBody
		}
		resp, err := client.Do(r)
		if err != nil {
			t.Fatalf("%s %s: %v", req.method, req.path, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("%s %s: read: %v", req.method, req.path, err)
		}
		if string(b) != "....." {
			t.Errorf("%s %s = %q, want five dots (the answer outlived the body timeout)", req.method, req.path, b)
		}
	}
}

// TestClientGoneRecordedAs499: a server error answered after the client
// hung up is logged and counted as 499, not as the server's failure.
func TestClientGoneRecordedAs499(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := NewEngine(EngineOptions{WriteError: writeTestError, Metrics: reg, Server: "t"})
	e.GET("/db", func(c *gin.Context) {
		writeTestError(c, http.StatusServiceUnavailable, "database_unavailable", "the database is not available")
	})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, ctx := range []context.Context{context.Background(), gone, gone} {
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/db", nil).WithContext(ctx))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" {
					got[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if got["503"] != 1 || got["499"] != 2 {
		t.Errorf("requests by code = %v, want one 503 and two 499", got)
	}
}
