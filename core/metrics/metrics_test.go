package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRegistryServesRuntimeAndBuildInfo(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler(NewRegistry()).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes", `edgeplat_build_info{commit=`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("content type %q, want the text exposition format", ct)
	}
}
