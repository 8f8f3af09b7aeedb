//go:build linux

package sysinfo

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTemperature: the hottest readable zone wins; zones that cannot be
// read or hold nonsense are skipped; no zone at all is "no figure".
func TestTemperature(t *testing.T) {
	root := t.TempDir()
	zone := func(name, v string) {
		dir := filepath.Join(root, "class", "thermal", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "temp"), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := Temperature(root); ok {
		t.Fatal("a temperature without thermal zones")
	}
	zone("thermal_zone0", "41500\n")
	zone("thermal_zone1", "57250\n")
	zone("thermal_zone2", "garbage")
	zone("thermal_zone3", "999999999")
	c, ok := Temperature(root)
	if !ok || c != 57.25 {
		t.Fatalf("Temperature = %v, %v; want 57.25", c, ok)
	}
}
