package dest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Probe tries a destination's settings and keeps nothing: an MQTT
// destination connects (TLS and credentials included) and disconnects; a
// tsdb asks the InfluxDB v2 API for the bucket with the token, which proves
// the address, the token and the org at once. The message says what
// answered. ctx bounds the attempt.
func Probe(ctx context.Context, typ string, config json.RawMessage, env Env) (string, error) {
	cfg, err := parse(typ, config)
	if err != nil {
		return "", err
	}
	switch c := cfg.(type) {
	case tsdbConfig:
		return "the time-series database answered and accepted the token", probeTSDB(ctx, c)
	case mqttBuilder:
		return "connected to the broker", probeMQTT(ctx, typ, c, env)
	}
	return "", fmt.Errorf("type %s cannot be tested: it uses the device's provisioned credentials", typ)
}

func probeMQTT(ctx context.Context, typ string, b mqttBuilder, env Env) error {
	t, err := newMQTT(0, typ, b, env)
	if err != nil {
		return err
	}
	if err := t.Start(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = t.Stop(sctx)
	}()
	// A plain TCP dial first names the commonest failures with the quality
	// codes the rest of the API uses (CONNECTION_REFUSED, HOST_NOT_FOUND,
	// TIMEOUT); the MQTT client's own errors arrive as text only.
	if addr, err := mqttx.BrokerAddr(t.Status().Target); err == nil {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("%s: %w", adapters.Classify(err), err)
		}
		_ = nc.Close()
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !t.Connected() {
		select {
		case <-t.Changes():
		case <-tick.C:
			// The first failed attempt is the answer: TLS and
			// credentials do not fix themselves.
			if st := t.Status(); st.LastError != "" {
				return errors.New(st.LastError)
			}
		case <-ctx.Done():
			return fmt.Errorf("%s: no connection to %s: %w", adapters.CodeTimeout, t.Status().Target, ctx.Err())
		}
	}
	return nil
}

func probeTSDB(ctx context.Context, c tsdbConfig) error {
	u := strings.TrimSuffix(c.URL, "/") + "/api/v2/buckets?name=" + url.QueryEscape(c.Bucket) + "&org=" + url.QueryEscape(c.Org)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Token "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", adapters.Classify(err), redactURL(c.URL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s: %s", redactURL(c.URL), resp.Status, errorMessage(resp))
	}
	return nil
}
