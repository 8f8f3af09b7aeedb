// Package licencetest issues licences for tests, signed with a key pair
// of their own and verified by the licence manager as in production.
package licencetest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// Config issues a licence with claims c (customer "test" and an expiry an
// hour away when unset) and returns the configuration that loads it.
func Config(t testing.TB, c licence.Claims) config.Licence {
	t.Helper()
	priv, pub, err := licence.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if c.Customer == "" {
		c.Customer = "test"
	}
	if c.ExpiresAt.IsZero() {
		c.ExpiresAt = time.Now().Add(time.Hour)
	}
	tok, err := licence.Issue(priv, c)
	if err != nil {
		t.Fatal(err)
	}
	return config.Licence{Key: tok, PublicKey: string(pub)}
}

// Manager returns a loaded licence manager for a licence granting
// features (none: a valid licence without premium features).
func Manager(t testing.TB, features ...string) *licence.Manager {
	t.Helper()
	m := licence.New(Config(t, licence.Claims{Features: features}), slog.New(slog.DiscardHandler))
	m.Load(t.Context())
	return m
}
