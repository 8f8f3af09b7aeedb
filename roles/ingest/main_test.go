package ingest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when its tests leave a goroutine behind:
// workers, the autoscaler, consumer loops and the clients of PostgreSQL
// and Redis must all end with the engine that started them.
//
// One goroutine of pgx is ignored: when a query's context is cancelled
// and pgx closes that connection in the background, the connection's
// context watcher stays blocked on its unwatch channel after the query's
// goroutine and the pool have ended (pgx v5.7 ctxwatch). It holds no
// connection and does no work; the goroutine that started the query,
// which would be ours to end, is still checked.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgconn/ctxwatch.(*ContextWatcher).Watch.func1"))
}
