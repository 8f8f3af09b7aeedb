package cmd

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/config"
)

const module = "github.com/edgeplat/edgeplat"

type listedPackage struct {
	ImportPath                string
	Name                      string
	Doc                       string
	Imports                   []string
	TestImports, XTestImports []string
	TestGoFiles, XTestGoFiles []string
}

// goList lists the module's packages with the go tool, as tailscale's
// deptest does, so the rules below see exactly what the build sees.
func goList(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []listedPackage
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// layer names the architectural layer of an import path inside the module.
func layer(path string) (kind, name string) {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	parts := strings.Split(rel, "/")
	switch parts[0] {
	case "roles":
		if len(parts) > 1 {
			return "roles", parts[1]
		}
		return "roles", ""
	case "":
		return "main", ""
	}
	return parts[0], ""
}

// TestImportDirection keeps the architecture's import rule true:
// cmd → cmd/internal/*, roles/*, core/*, config, profiles; roles/X → core, config,
// profiles, roles/X/... but never roles/Y; core → core, config;
// config → profiles; profiles → nothing of ours. Test files are held to the
// same rule: a core test that starts a role's server ties core to that role
// as surely as core code would, and makes core's tests build the role.
func TestImportDirection(t *testing.T) {
	allowed := map[string][]string{
		"main":     {"cmd"},
		"cmd":      {"cmd", "roles", "core", "config", "profiles"},
		"roles":    {"roles", "core", "config", "profiles"},
		"core":     {"core", "config", "profiles"},
		"config":   {"profiles"},
		"profiles": {},
	}
	for _, p := range goList(t) {
		from, fromRole := layer(p.ImportPath)
		ok, known := allowed[from]
		if !known {
			t.Errorf("%s is in no known layer (%s)", p.ImportPath, from)
			continue
		}
		for _, set := range []struct {
			files   string
			imports []string
		}{{"", p.Imports}, {" (in its tests)", p.TestImports}, {" (in its external tests)", p.XTestImports}} {
			for _, imp := range set.imports {
				if !strings.HasPrefix(imp, module+"/") && imp != module {
					continue
				}
				// An external test package imports the package it tests.
				if imp == p.ImportPath {
					continue
				}
				to, toRole := layer(imp)
				if !contains(ok, to) {
					t.Errorf("%s (%s) must not import %s (%s)%s", p.ImportPath, from, imp, to, set.files)
				}
				if from == "roles" && to == "roles" && fromRole != toRole {
					t.Errorf("role %s imports role %s (%s)%s: share code through core instead", fromRole, toRole, imp, set.files)
				}
			}
		}
	}
}

func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range goList(t) {
		want := "Package " + p.Name + " "
		if p.Name == "main" {
			want = "Command "
		}
		if !strings.HasPrefix(p.Doc, strings.TrimSpace(want)) {
			t.Errorf("%s: doc comment must start with %q, got %q", p.ImportPath, want, p.Doc)
		}
	}
}

// TestExamplesLoad loads every example config with the role its file is
// named after.
func TestExamplesLoad(t *testing.T) {
	clearEnv(t)
	// The key-mode agent example takes its key from the environment.
	t.Setenv("API_KEY", "example-key-for-tests")
	files, err := filepath.Glob(filepath.Join("..", "examples", "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		role := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(f, func(t *testing.T) {
			if !contains(config.Roles(), role) {
				t.Fatalf("example %s is not named after a role (%v)", f, config.Roles())
			}
			if _, err := config.Load(config.LoadOptions{Role: role, File: f}); err != nil {
				t.Errorf("example does not load: %v", err)
			}
		})
		if _, err := os.Stat(filepath.Join(filepath.Dir(f), "README.md")); err != nil {
			t.Errorf("example folder %s has no README.md", filepath.Dir(f))
		}
	}
}

// TestDistConfigsLoad loads the default configs the .deb installs.
func TestDistConfigsLoad(t *testing.T) {
	clearEnv(t)
	for file, role := range map[string]string{"agent.yaml": config.RoleAgent, "api.yaml": config.RoleAPI, "ingest.yaml": config.RoleIngest} {
		path := filepath.Join("..", "dist", "config", file)
		if _, err := os.Stat(path); err != nil {
			t.Errorf("packaged config %s missing: %v", path, err)
			continue
		}
		if _, err := config.Load(config.LoadOptions{Role: role, File: path}); err != nil {
			t.Errorf("%s does not load as %s: %v", path, role, err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
