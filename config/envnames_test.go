package config

import "testing"

func TestEnvNames(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{[]string{"db.host", "db.port"}, "DB_HOST, DB_PORT"},
		{[]string{"streamstore.host"}, "STREAMSTORE_HOST"},
		{nil, ""},
	} {
		if got := EnvNames(tc.keys...); got != tc.want {
			t.Errorf("EnvNames(%q) = %q, want %q", tc.keys, got, tc.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("EnvNames of an unknown key did not panic")
		}
	}()
	EnvNames("db.nope")
}
