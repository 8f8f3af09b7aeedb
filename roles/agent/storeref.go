package agent

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// storeRef is the agent's store while the store phase has it open. Users
// hold it open (Hold) for the length of a request or a pull; closing
// waits for them, and later users find no store and answer 503.
type storeRef struct {
	mu sync.RWMutex
	st atomic.Pointer[store.Store]
}

// Load returns the store, nil while it is not open.
func (r *storeRef) Load() *store.Store { return r.st.Load() }

// Open returns the store or httpapi.ErrNotReady.
func (r *storeRef) Open() (*store.Store, error) {
	if s := r.st.Load(); s != nil {
		return s, nil
	}
	return nil, httpapi.ErrNotReady
}

// Hold implements httpapi.StoreGate.
func (r *storeRef) Hold() func() {
	r.mu.RLock()
	return r.mu.RUnlock
}

// set makes s the store.
func (r *storeRef) set(s *store.Store) { r.st.Store(s) }

// close closes the store once nobody holds it.
func (r *storeRef) close(log *slog.Logger) {
	r.mu.Lock()
	s := r.st.Swap(nil)
	r.mu.Unlock()
	if s != nil {
		if err := s.Close(); err != nil {
			log.Warn("close store", "err", err)
		}
	}
}
