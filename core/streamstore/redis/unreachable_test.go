package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestPingUnreachableNamesSettings: a closed port is a message naming the
// service, the address and the variables to check, not go-redis's dial
// error alone.
func TestPingUnreachableNamesSettings(t *testing.T) {
	port := coretest.FreePort(t)
	st, err := New(OptionsFromConfig(config.StreamStore{Host: "127.0.0.1", Port: port}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err = st.Ping(ctx)
	if err == nil {
		t.Fatal("ping of a closed port succeeded")
	}
	want := fmt.Sprintf("cannot reach Redis at 127.0.0.1:%d (STREAMSTORE_HOST, STREAMSTORE_PORT): connection refused", port)
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err, want)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Errorf("the dial error is not in the chain: %v", err)
	}
}
