package config

import (
	"strings"
	"testing"
)

// TestRetiredSettingsWarnAndStart: a deployment that still sets a removed
// setting, by variable or in its config file, starts and is told why the
// setting is ignored; the file's other keys still apply.
func TestRetiredSettingsWarnAndStart(t *testing.T) {
	for _, r := range Retired {
		t.Run(r.Name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(r.Env, "1")
			section, leaf, _ := strings.Cut(r.Name, ".")
			file := writeFile(t, section+":\n  "+leaf+": 1\nlog:\n  level: debug\n")
			cfg, err := Load(LoadOptions{Role: RoleAllInOne, File: file})
			if err != nil {
				t.Fatalf("a retired setting stopped Load: %v", err)
			}
			if cfg.Log.Level != "debug" {
				t.Errorf("log.level = %q: the file's other keys were not applied", cfg.Log.Level)
			}
			var envWarned bool
			for _, w := range cfg.EnvWarnings() {
				envWarned = envWarned || (w.Var == r.Env && strings.Contains(w.Reason, r.Name+" was removed"))
			}
			if !envWarned {
				t.Errorf("no warning for %s among %v", r.Env, cfg.EnvWarnings())
			}
			if fw := cfg.FileWarnings(); len(fw) != 1 || !strings.Contains(fw[0], r.Name+" was removed") || !strings.Contains(fw[0], file) {
				t.Errorf("file warnings = %q, want one naming %s and the file", fw, r.Name)
			}
		})
	}
}

func TestRetiredSettingsAreNotKeys(t *testing.T) {
	for _, r := range Retired {
		if _, ok := KeyByName(r.Name); ok {
			t.Errorf("%s is both a key and retired", r.Name)
		}
		for _, k := range Keys {
			if k.Env == r.Env || contains(k.Aliases, r.Env) {
				t.Errorf("retired %s's variable %s is read by %s", r.Name, r.Env, k.Name)
			}
		}
		if r.Reason == "" {
			t.Errorf("retired %s gives no reason", r.Name)
		}
	}
}
