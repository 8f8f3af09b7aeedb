package config

import (
	"slices"
	"sort"
	"strings"
)

// EnvWarning is an environment variable that looks meant for edgeplat but
// that this role does not read: a typo, a retired name, or a variable of
// another role. It is a warning, not an error, because the environment is
// often shared with other programs.
type EnvWarning struct {
	Var string
	// Reason says why the variable is not read.
	Reason string
	// DidYouMean is the variable or key probably meant, or "".
	DidYouMean string
}

func (w EnvWarning) String() string {
	s := w.Var + ": " + w.Reason
	if w.DidYouMean != "" {
		s += "; did you mean " + w.DidYouMean + "?"
	}
	return s
}

// EnvWarnings lists the environment variables Load found suspicious,
// sorted by name.
func (c *Config) EnvWarnings() []EnvWarning { return c.envWarnings }

// envPrefix starts the name of every edgeplat setting that has no bare
// environment name of its own (DB_HOST has one).
const envPrefix = "EDGEPLAT_"

// nonSettingEnv are EDGEPLAT_ variables read by the test harness and the
// build scripts, not by the roles; they are not typos.
var nonSettingEnv = []string{"EDGEPLAT_REQUIRE_SERVICES", "EDGEPLAT_NPM_CACHE", "EDGEPLAT_AEDES_MODULE", "EDGEPLAT_STORE_KILL_CHILD"}

// nonSettingEnvPrefixes are prefixes of such variables.
var nonSettingEnvPrefixes = []string{"EDGEPLAT_TEST_", "EDGEPLAT_E2E_"}

// envWarnings checks environ (os.Environ's form) for variables that look
// meant for role but are not read by it: any unknown EDGEPLAT_ variable,
// a variable within a typo of a known name (DB_HOTS), and a known variable
// this role ignores (PORT in all-in-one). Everything else in the
// environment (PATH, HOME, other programs' settings) is left alone.
func envWarnings(role string, environ []string) []EnvWarning {
	known := map[string][]Key{}
	var specNames, prefixed []string
	for _, k := range Keys {
		for _, env := range append([]string{k.Env}, k.Aliases...) {
			if _, dup := known[env]; !dup {
				if strings.HasPrefix(env, envPrefix) {
					prefixed = append(prefixed, env)
				} else {
					specNames = append(specNames, env)
				}
			}
			known[env] = append(known[env], k)
		}
	}
	retired := map[string]RetiredKey{}
	for _, r := range Retired {
		retired[r.Env] = r
	}
	var out []EnvWarning
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if name == "" || val == "" {
			// Load treats an empty variable as unset too.
			continue
		}
		if keys, ok := known[name]; ok {
			if w, ignored := ignoredByRole(role, name, keys); ignored {
				out = append(out, w)
			}
			continue
		}
		if r, ok := retired[name]; ok {
			out = append(out, EnvWarning{Var: name, Reason: r.warning()})
			continue
		}
		if rest, ok := strings.CutPrefix(name, envPrefix); ok {
			if slices.Contains(nonSettingEnv, name) || hasAnyPrefix(name, nonSettingEnvPrefixes) {
				continue
			}
			w := EnvWarning{Var: name, Reason: "no setting has this name (see docs/configuration.md)"}
			switch {
			case known[rest] != nil:
				// EDGEPLAT_DB_HOST: the bare names go without
				// the prefix.
				w.DidYouMean = rest
			default:
				w.DidYouMean = nearest(name, prefixed)
				if w.DidYouMean == "" {
					w.DidYouMean = nearest(rest, specNames)
				}
			}
			out = append(out, w)
			continue
		}
		if near := nearest(name, specNames); near != "" {
			out = append(out, EnvWarning{Var: name, Reason: "no setting has this name", DidYouMean: near})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Var < out[j].Var })
	return out
}

// ignoredByRole reports a known variable that role does not read although
// it reads the keys' section: a binding restricted to other roles (PORT).
func ignoredByRole(role, name string, keys []Key) (EnvWarning, bool) {
	var names []string
	for _, k := range keys {
		if len(k.envFor(role)) > 0 {
			return EnvWarning{}, false
		}
		if contains(roleSections[role], k.section()) {
			names = append(names, k.Name)
		}
	}
	if len(names) == 0 {
		return EnvWarning{}, false
	}
	var readers []string
	for _, k := range keys {
		readers = append(readers, k.EnvRoles...)
	}
	return EnvWarning{Var: name, Reason: "read by " + strings.Join(readers, " and ") + " only, not by " + role +
		"; set " + strings.Join(names, " and ") + " with a flag or in the config file"}, true
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// keyNames lists every key's dotted name.
func keyNames() []string {
	names := make([]string, len(Keys))
	for i, k := range Keys {
		names[i] = k.Name
	}
	return names
}

// nearest returns the candidate closest to s within a typo's reach (one
// edit for names under 8 characters, two for longer ones; a swap of two
// neighbours counts as one), or "" when none is that close. Ties go to the
// first candidate.
func nearest(s string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		limit := 1
		if len(c) >= 8 {
			limit = 2
		}
		d := editDistance(s, c)
		if d == 0 || d > limit {
			continue
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of adjacent characters
// each cost one. Names are ASCII, so bytes will do.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
