package dest

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// newRecorder serves h on a local HTTP server for the test's life.
func newRecorder(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func gunzip(t *testing.T, r io.Reader) []byte {
	t.Helper()
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Errorf("body is not gzip: %v", err)
		return nil
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Errorf("gunzip: %v", err)
	}
	return b
}
