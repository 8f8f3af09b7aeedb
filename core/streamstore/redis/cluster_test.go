package redis

import (
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/storetest"
)

func TestContractClusterIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test needs redis-server; skipped in -short mode")
	}
	start := time.Now()
	cluster := coretest.StartRedisCluster(t, 3)
	t.Logf("3-master cluster up in %s", time.Since(start).Round(time.Millisecond))
	storetest.Run(t, func(t *testing.T) streamstore.Store {
		st, err := New(Options{Addrs: cluster.Addrs(), BlockSlice: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}
