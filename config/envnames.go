package config

import "strings"

// EnvNames names the environment variables of keys, comma-separated, for
// messages that tell the operator which settings to check
// ("DB_HOST, DB_PORT"). An unknown key is a bug of the caller.
func EnvNames(keys ...string) string {
	names := make([]string, len(keys))
	for i, key := range keys {
		names[i] = mustKey(key).Env
	}
	return strings.Join(names, ", ")
}

// Label names a setting the way configuration errors do, key and primary
// environment variable: Label("jwt.secret") is "jwt.secret (JWT_SECRET)".
// Messages outside config use it instead of typing the variable, so a
// renamed variable cannot leave a stale message. An unknown key is a bug
// of the caller.
func Label(key string) string { return mustKey(key).Label() }

func mustKey(key string) Key {
	k, ok := KeyByName(key)
	if !ok {
		panic("BUG: unknown config key " + key)
	}
	return k
}
