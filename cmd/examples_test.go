package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/config"
)

// TestExamplesNameRealVariables: every environment variable an example
// names (in its YAML comments or its README) is one edgeplat reads.
// examples/cloud/serve-api.yaml once named MQTT_PASSWORD while only
// EDGEPLAT_MQTT_PASSWORD was read.
func TestExamplesNameRealVariables(t *testing.T) {
	known := knownEnvNames()
	envName := regexp.MustCompile(`\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b`)
	files, err := filepath.Glob(filepath.Join("..", "examples", "*", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		if ext := filepath.Ext(f); ext != ".yaml" && ext != ".md" {
			continue
		}
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range envName.FindAllString(string(doc), -1) {
			if !known[name] {
				t.Errorf("%s names %s, which no setting reads (see docs/configuration.md)", f, name)
			}
		}
	}
}

// TestCloudExampleExplainsTheLicence: examples/cloud says that agents
// register only under a licence, and its licence commands work as written.
func TestCloudExampleExplainsTheLicence(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "examples", "cloud", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(doc)
	for _, want := range []string{"licence is needed to register agents", "licence_restricted", "LICENSE_KEY", "LICENSE_PUBLIC_KEY", "docs/licence.md"} {
		if !strings.Contains(readme, want) {
			t.Errorf("examples/cloud/README.md does not mention %q", want)
		}
	}

	// Run the README's "edgeplat license" commands, continuation lines
	// joined, in an empty directory; "> file" is the only shell used.
	var cmds []string
	lines := strings.Split(strings.ReplaceAll(readme, "\\\n", " "), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "edgeplat license ") {
			cmds = append(cmds, l)
		}
	}
	if len(cmds) < 3 {
		t.Fatalf("want keygen, issue and verify in the README, found %q", cmds)
	}
	t.Chdir(t.TempDir())
	word := regexp.MustCompile(`"[^"]*"|\S+`)
	for _, line := range cmds {
		cmdline, outFile, _ := strings.Cut(line, " > ")
		var args []string
		for _, w := range word.FindAllString(strings.TrimPrefix(cmdline, "edgeplat "), -1) {
			args = append(args, strings.Trim(w, `"`))
		}
		code, stdout, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", line, code, stderr)
		}
		if outFile = strings.TrimSpace(outFile); outFile != "" {
			if err := os.WriteFile(outFile, []byte(stdout), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// knownEnvNames is every environment variable some role reads.
func knownEnvNames() map[string]bool {
	known := map[string]bool{}
	for _, k := range config.Keys {
		known[k.Env] = true
		for _, a := range k.Aliases {
			known[a] = true
		}
	}
	return known
}
