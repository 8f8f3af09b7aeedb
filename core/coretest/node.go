package coretest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// NodePackage finds node on PATH and the npm package pkg (a third-party
// protocol peer such as node-opcua) where the build machines install it:
// $EDGEPLAT_NPM_CACHE/node_modules, by default ~/.cache/edgeplat-npm
// (.ci/run installs the peers there). It returns node's path and the
// node_modules folder, for NODE_PATH; without either the test is skipped,
// and it fails under CI=true or EDGEPLAT_REQUIRE_SERVICES=1.
func NodePackage(t testing.TB, pkg string) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Unavailable(t, pkg, "node on PATH", err)
	}
	cache := os.Getenv("EDGEPLAT_NPM_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			Unavailable(t, pkg, "~/.cache/edgeplat-npm", err)
		}
		cache = filepath.Join(home, ".cache", "edgeplat-npm")
	}
	modules = filepath.Join(cache, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, pkg, "package.json")); err != nil {
		Unavailable(t, pkg, modules, err)
	}
	return node, modules
}
