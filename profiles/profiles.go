// Package profiles holds the ingestion profiles (INGESTION_PROFILE) as
// embedded YAML, one file each, keyed by configuration key. Profiles sit
// between built-in defaults and everything an operator sets, so any single
// variable still overrides its profile value. The package imports nothing of
// edgeplat's so the config package can depend on it.
package profiles

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed *.yaml
var files embed.FS

// Names lists the available profiles, sorted.
func Names() []string {
	entries, err := files.ReadDir(".")
	if err != nil {
		panic("BUG: embedded profiles unreadable: " + err.Error())
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), path.Ext(e.Name())))
	}
	sort.Strings(names)
	return names
}

// Get returns the settings of profile name as flat dotted keys.
func Get(name string) (map[string]any, error) {
	if name == "" || strings.ContainsAny(name, "/\\.") {
		return nil, fmt.Errorf("unknown ingestion profile %q", name)
	}
	data, err := files.ReadFile(name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("unknown ingestion profile %q (have %s)", name, strings.Join(Names(), ", "))
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("profile %s: %w", name, err)
	}
	flat := map[string]any{}
	flatten("", doc, flat)
	return flat, nil
}

func flatten(prefix string, in map[string]any, out map[string]any) {
	for k, v := range in {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if m, ok := v.(map[string]any); ok {
			flatten(key, m, out)
			continue
		}
		out[key] = v
	}
}
