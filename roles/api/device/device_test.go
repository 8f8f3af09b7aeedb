package device

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

func TestETagMatches(t *testing.T) {
	for _, tt := range []struct {
		header string
		ok     bool
	}{
		{`"3"`, true},
		{`W/"3"`, true},
		{`"1", "3"`, true},
		{`*`, true},
		{`"4"`, false},
		{`3`, false},
	} {
		if got := etagMatches(tt.header, `"3"`); got != tt.ok {
			t.Errorf("etagMatches(%q) = %v, want %v", tt.header, got, tt.ok)
		}
	}
}

func TestInflate(t *testing.T) {
	plain := []byte(`{"level":"info","message":"x","timestamp":"2026-11-24T08:00:00Z"}` + "\n")
	var gz, zl, fl bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(plain)
	gw.Close()
	zw := zlib.NewWriter(&zl)
	zw.Write(plain)
	zw.Close()
	fw, _ := flate.NewWriter(&fl, flate.DefaultCompression)
	fw.Write(plain)
	fw.Close()
	for _, tt := range []struct {
		name, encoding string
		body           []byte
	}{
		{"plain", "", plain},
		{"identity", "identity", plain},
		{"gzip header", "gzip", gz.Bytes()},
		{"gzip detected", "", gz.Bytes()},
		{"zlib as deflate", "deflate", zl.Bytes()},
		{"zlib detected", "", zl.Bytes()},
		{"raw deflate", "deflate", fl.Bytes()},
	} {
		got, err := inflate(tt.body, tt.encoding)
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("%s: %q %v", tt.name, got, err)
		}
	}
	if _, err := inflate(plain, "br"); err == nil || !strings.Contains(err.Error(), "br") {
		t.Errorf("unknown encoding: %v", err)
	}
	if _, err := inflate([]byte("not gzip"), "gzip"); err == nil {
		t.Error("a bad gzip body was accepted")
	}
	var bomb bytes.Buffer
	bw := gzip.NewWriter(&bomb)
	bw.Write(bytes.Repeat([]byte{' '}, MaxInflatedBytes+1))
	bw.Close()
	if _, err := inflate(bomb.Bytes(), "gzip"); !errors.Is(err, errTooLarge) {
		t.Errorf("an upload inflating past the cap: %v", err)
	}
}

func TestParseLinesAndBatches(t *testing.T) {
	line := `{"level":"info","message":"` + strings.Repeat("m", 1000) + `","timestamp":"2026-11-24T08:00:00Z"}`
	var b strings.Builder
	for range 1200 {
		b.WriteString(line + "\n\n")
	}
	lines, n, err := parseLines([]byte(b.String()))
	if err != nil || n != 1200 {
		t.Fatalf("parseLines: %d %v", n, err)
	}
	values, err := batches("0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11", lines)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, v := range values {
		if len(v) > batchBytes+len(line) {
			t.Errorf("a batch of %d bytes, cap %d", len(v), batchBytes)
		}
		lb, err := telemetry.ParseLogBatch(v)
		if err != nil {
			t.Fatal(err)
		}
		total += len(lb.Logs)
	}
	if len(values) < 2 || total != 1200 {
		t.Errorf("%d batches with %d lines, want several with 1200", len(values), total)
	}
	for _, tt := range []struct{ body, want string }{
		{"", "no log lines"},
		{"{}\nnot json\n", "line 2"},
		{`{"level":"info","message":"x"}` + "\n", "timestamp"},
		// One line longer than half a log entry's bound: log lines do not
		// take the telemetry entry bound, which is sized for payloads.
		{`{"level":"info","message":"` + strings.Repeat("m", telemetry.MaxLogBatchBytes/2) + `","timestamp":1}` + "\n", "line 1"},
	} {
		lines, _, err := parseLines([]byte(tt.body))
		if err == nil {
			_, err = batches("0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11", lines)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error with %q", tt.body, err, tt.want)
		}
	}
	var many strings.Builder
	for range MaxLines + 1 {
		many.WriteString("{}\n")
	}
	if _, _, err := parseLines([]byte(many.String())); !errors.Is(err, errTooLarge) {
		t.Errorf("too many lines: %v", err)
	}
}

// FuzzLogUpload: whatever an agent uploads, the handler's parsing neither
// panics nor produces a stream entry the ingestion service would refuse.
func FuzzLogUpload(f *testing.F) {
	f.Add([]byte(`{"level":"info","message":"x","timestamp":"2026-11-24T08:00:00Z","appId":"a"}`+"\n"), "")
	f.Add([]byte("{}\n\n{\"level\":\"warn\"}"), "")
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00}, "gzip")
	f.Fuzz(func(t *testing.T, body []byte, encoding string) {
		plain, err := inflate(body, encoding)
		if err != nil {
			return
		}
		lines, _, err := parseLines(plain)
		if err != nil {
			return
		}
		values, err := batches("0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11", lines)
		if err != nil {
			return
		}
		for _, v := range values {
			if _, err := telemetry.ParseLogBatch(v); err != nil {
				t.Fatalf("an accepted batch does not parse: %v", err)
			}
		}
	})
}

// TestAuthenticatorRefusesMissingKey: the exported middleware is the
// routes' own check, so a request without a key never reaches the handler.
func TestAuthenticatorRefusesMissingKey(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	reached := false
	e.GET("/agents/:uuid/jobs/next", Authenticator(Deps{WriteError: func(c *gin.Context, status int, code, msg string) {
		c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": msg}})
	}}), func(c *gin.Context) { reached = From(c) != (registry.Device{}) })
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/agents/0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11/jobs/next", nil))
	if rec.Code != http.StatusUnauthorized || reached {
		t.Fatalf("no key: %d %s, handler reached %v", rec.Code, rec.Body, reached)
	}
}
