package config

import "strings"

// EnvNames names the environment variables of keys, comma-separated, for
// messages that tell the operator which settings to check
// ("DB_HOST, DB_PORT"). An unknown key is a bug of the caller.
func EnvNames(keys ...string) string {
	names := make([]string, len(keys))
	for i, key := range keys {
		k, ok := KeyByName(key)
		if !ok {
			panic("BUG: unknown config key " + key)
		}
		names[i] = k.Env
	}
	return strings.Join(names, ", ")
}
