package redis

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/config"
)

// TestStreamStoreSettingsReachTheClient: each streamstore.* connection
// setting, changed from its default, changes the client go-redis dials
// with.
func TestStreamStoreSettingsReachTheClient(t *testing.T) {
	base := config.StreamStore{Driver: "redis", Host: "localhost", Port: 6379}
	tests := []struct {
		key  string
		set  func(*config.StreamStore)
		want func(t *testing.T, o *goredis.Options)
	}{
		{"streamstore.host", func(c *config.StreamStore) { c.Host = "redis.internal" }, func(t *testing.T, o *goredis.Options) {
			if o.Addr != "redis.internal:6379" {
				t.Errorf("addr %s", o.Addr)
			}
		}},
		{"streamstore.port", func(c *config.StreamStore) { c.Port = 6390 }, func(t *testing.T, o *goredis.Options) {
			if o.Addr != "localhost:6390" {
				t.Errorf("addr %s", o.Addr)
			}
		}},
		{"streamstore.password", func(c *config.StreamStore) { c.Password = "pw" }, func(t *testing.T, o *goredis.Options) {
			if o.Password != "pw" {
				t.Errorf("password %q", o.Password)
			}
		}},
		{"streamstore.db", func(c *config.StreamStore) { c.DB = 5 }, func(t *testing.T, o *goredis.Options) {
			if o.DB != 5 {
				t.Errorf("db %d", o.DB)
			}
		}},
		{"streamstore.tls", func(c *config.StreamStore) { c.TLS = true }, func(t *testing.T, o *goredis.Options) {
			if o.TLSConfig == nil || o.TLSConfig.ServerName != "localhost" {
				t.Errorf("TLS config %+v, want TLS verifying localhost", o.TLSConfig)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			c := base
			tt.set(&c)
			st, err := New(OptionsFromConfig(c))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cl, ok := st.client.(*goredis.Client)
			if !ok {
				t.Fatalf("client %T, want a single-server client", st.client)
			}
			tt.want(t, cl.Options())
		})
	}
}
