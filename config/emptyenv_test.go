package config

import (
	"testing"
)

// TestEmptyEnvMeansNone checks BROKER_AUTH_ALLOWED_NETWORKS set to the
// empty string gives no network, as documented, while unset gives the
// default. Viper alone read the empty variable as unset.
func TestEmptyEnvMeansNone(t *testing.T) {
	const def = "127.0.0.1/32,::1/128"
	tests := []struct {
		name    string
		env     *string
		file    string
		want    string
		wantSrc string
	}{
		{name: "unset", want: def, wantSrc: "default"},
		{name: "set to empty", env: new(""), want: "", wantSrc: "env BROKER_AUTH_ALLOWED_NETWORKS"},
		{name: "set", env: new("10.0.0.0/8"), want: "10.0.0.0/8", wantSrc: "env BROKER_AUTH_ALLOWED_NETWORKS"},
		{name: "empty env over file", env: new(""), file: "broker_auth:\n  allowed_networks: 10.0.0.0/8\n", want: "", wantSrc: "env BROKER_AUTH_ALLOWED_NETWORKS"},
		{name: "file when unset", file: "broker_auth:\n  allowed_networks: \"\"\n", want: "", wantSrc: "file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			if tt.env != nil {
				t.Setenv("BROKER_AUTH_ALLOWED_NETWORKS", *tt.env)
			}
			opts := LoadOptions{Role: RoleAPI}
			if tt.file != "" {
				opts.File = writeFile(t, tt.file)
			}
			cfg, err := Load(opts)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BrokerAuth.AllowedNetworks != tt.want {
				t.Errorf("allowed networks = %q, want %q", cfg.BrokerAuth.AllowedNetworks, tt.want)
			}
			if got := cfg.SourceOf("broker_auth.allowed_networks").String(); got != tt.wantSrc {
				t.Errorf("source = %q, want %q", got, tt.wantSrc)
			}
		})
	}
	// Only keys whose empty value means something take an empty variable.
	clearEnv(t)
	t.Setenv("DB_HOST", "")
	cfg, err := Load(LoadOptions{Role: RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := KeyByName("db.host"); cfg.DB.Host != k.Default {
		t.Errorf("empty DB_HOST gave %q, want the default %q", cfg.DB.Host, k.Default)
	}
}
