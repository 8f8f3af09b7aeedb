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
	mustPanic(t, "EnvNames", func() { EnvNames("db.nope") })
}

func TestLabel(t *testing.T) {
	for key, want := range map[string]string{
		"jwt.secret":         "jwt.secret (JWT_SECRET)",
		"licence.key":        "licence.key (LICENSE_KEY)",
		"db.sqlite_path":     "db.sqlite_path (EDGEPLAT_DB_SQLITE_PATH)",
		"ingest.port":        "ingest.port (PORT)",
		"ingest.insert_mode": "ingest.insert_mode (READINGS_BULK_INSERT_MODE)",
	} {
		if got := Label(key); got != want {
			t.Errorf("Label(%q) = %q, want %q", key, got, want)
		}
	}
	// Every key has a label naming its variable: Label is how messages
	// outside config name a setting.
	for _, k := range Keys {
		if got, want := Label(k.Name), k.Name+" ("+k.Env+")"; got != want {
			t.Errorf("Label(%q) = %q, want %q", k.Name, got, want)
		}
	}
	mustPanic(t, "Label", func() { Label("jwt.secrte") })
}

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s of an unknown key did not panic", name)
		}
	}()
	f()
}
