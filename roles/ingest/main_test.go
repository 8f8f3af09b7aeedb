package ingest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when its tests leave a goroutine behind:
// workers, the autoscaler, consumer loops and the clients of PostgreSQL
// and Redis must all end with the engine that started them. No goroutine
// is ignored: none of the libraries used here keeps one running once its
// client is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
