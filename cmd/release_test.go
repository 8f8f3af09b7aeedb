package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// goreleaserBuilds is the part of .goreleaser.yaml that decides targets.
type goreleaserBuilds struct {
	Builds []struct {
		ID     string   `yaml:"id"`
		GOOS   []string `yaml:"goos"`
		GOARCH []string `yaml:"goarch"`
		GOARM  []string `yaml:"goarm"`
		Ignore []struct {
			GOOS   string `yaml:"goos"`
			GOARCH string `yaml:"goarch"`
			GOARM  string `yaml:"goarm"`
		} `yaml:"ignore"`
	} `yaml:"builds"`
}

// releaseTargets expands .goreleaser.yaml's build matrix into
// "os/arch[/arm]" strings, the form the Makefile's CROSS_TARGETS uses.
func releaseTargets(t *testing.T, data []byte) []string {
	t.Helper()
	var cfg goreleaserBuilds
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("parse .goreleaser.yaml: %v", err)
	}
	if len(cfg.Builds) == 0 {
		t.Fatal(".goreleaser.yaml has no builds")
	}
	var out []string
	for _, b := range cfg.Builds {
		for _, goos := range b.GOOS {
			for _, arch := range b.GOARCH {
				arms := []string{""}
				if arch == "arm" {
					arms = b.GOARM
					if len(arms) == 0 {
						arms = []string{"6"} // GoReleaser's default
					}
				}
			next:
				for _, arm := range arms {
					for _, ig := range b.Ignore {
						if ig.GOOS == goos && ig.GOARCH == arch && (ig.GOARM == "" || ig.GOARM == arm) {
							continue next
						}
					}
					target := goos + "/" + arch
					if arm != "" {
						target += "/" + arm
					}
					out = append(out, target)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestCrossTargetsMatchRelease: `make cross`, which CI runs, must build
// exactly what a release builds, or a target can break unnoticed until the
// release (as darwin and linux/arm did).
func TestCrossTargetsMatchRelease(t *testing.T) {
	root := filepath.Join("..")
	rel, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := releaseTargets(t, rel)

	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CROSS_TARGETS\s*\?=\s*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile has no CROSS_TARGETS line")
	}
	got := strings.Fields(string(m[1]))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Makefile CROSS_TARGETS = %v, .goreleaser.yaml builds %v", got, want)
	}

	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*make cross\s*$`).Match(ci) {
		t.Error(".ci/run does not run `make cross`")
	}
}

func TestReleaseTargets(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "matrix with ignore",
			yaml: "builds:\n- goos: [linux, darwin]\n  goarch: [amd64, arm]\n  goarm: [\"7\"]\n  ignore: [{goos: darwin, goarch: arm}]\n",
			want: []string{"darwin/amd64", "linux/amd64", "linux/arm/7"},
		},
		{
			name: "default goarm",
			yaml: "builds:\n- goos: [linux]\n  goarch: [arm]\n",
			want: []string{"linux/arm/6"},
		},
		{
			name: "ignore one goarm",
			yaml: "builds:\n- goos: [linux]\n  goarch: [arm]\n  goarm: [\"6\", \"7\"]\n  ignore: [{goos: linux, goarch: arm, goarm: \"6\"}]\n",
			want: []string{"linux/arm/7"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := releaseTargets(t, []byte(tt.yaml)); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMakeToolsInstallsStaticcheck: `make test` on a fresh clone (no
// staticcheck anywhere) must install the pinned version itself rather than
// fail in lint. A stand-in go records what make asks of it.
func TestMakeToolsInstallsStaticcheck(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make not installed")
		}
		t.Skip("make not installed")
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "calls")
	fakeGo := filepath.Join(dir, "go")
	script := "#!/bin/sh\necho \"$*\" >> " + record + "\n"
	if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "bin", "staticcheck")
	cmd := exec.Command("make", "-s", "-C", "..", "tools", "GO="+fakeGo, "STATICCHECK="+missing)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make tools: %v\n%s", err, out)
	}
	calls, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("make tools did not run go: %v", err)
	}
	if !strings.Contains(string(calls), "install honnef.co/go/tools/cmd/staticcheck@v0.8.0") {
		t.Fatalf("make tools ran go with:\n%s", calls)
	}

	// Present: nothing to install.
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	// (make also runs `go env` to find GOBIN, which the record shows.)
	if err := os.WriteFile(fakeGo+"-staticcheck", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("make", "-s", "-C", "..", "tools", "GO="+fakeGo, "STATICCHECK="+fakeGo+"-staticcheck")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make tools: %v\n%s", err, out)
	}
	if calls, _ := os.ReadFile(record); strings.Contains(string(calls), "install") {
		t.Fatalf("make tools installed although staticcheck exists:\n%s", calls)
	}
}

func TestVersionFlag(t *testing.T) {
	_, want, _ := run(t, "version")
	for _, flag := range []string{"--version", "-v"} {
		code, out, errOut := run(t, flag)
		if code != 0 || out != want {
			t.Errorf("%s = %d %q (stderr %q), want the output of `edgeplat version` %q", flag, code, out, errOut, want)
		}
	}
}

// TestCompletion: the packages install these scripts, so each shell's must
// be generated, and `completion` must be listed in the help.
func TestCompletion(t *testing.T) {
	tests := []struct{ shell, marker string }{
		{"bash", "__start_edgeplat"},
		{"zsh", "#compdef edgeplat"},
		{"fish", "complete -c edgeplat"},
	}
	for _, tt := range tests {
		t.Run(tt.shell, func(t *testing.T) {
			code, out, errOut := run(t, "completion", tt.shell)
			if code != 0 || !strings.Contains(out, tt.marker) {
				t.Fatalf("completion %s = %d, stderr %q, output lacks %q", tt.shell, code, errOut, tt.marker)
			}
		})
	}
	if _, out, _ := run(t, "--help"); !strings.Contains(out, "completion") {
		t.Errorf("--help does not list completion:\n%s", out)
	}
}

func TestManPages(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	code, _, errOut := run(t, "man", "--dir", dir)
	if code != 0 {
		t.Fatalf("man: exit %d: %s", code, errOut)
	}
	for _, page := range []string{"edgeplat.1", "edgeplat-serve-api.1", "edgeplat-agent.1", "edgeplat-ingest.1", "edgeplat-all-in-one.1", "edgeplat-completion-bash.1"} {
		data, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("%s: %v", page, err)
			continue
		}
		s := string(data)
		if !strings.Contains(s, `.TH "EDGEPLAT" "1" "Nov 2023" "edgeplat dev"`) || !strings.Contains(s, ".SH NAME") {
			t.Errorf("%s header:\n%s", page, s[:min(len(s), 300)])
		}
		if strings.Contains(s, "Auto generated") {
			t.Errorf("%s carries cobra's generation tag (not reproducible)", page)
		}
	}
	if code, _, errOut := run(t, "man"); code != exitUsage || !strings.Contains(errOut, "--dir") {
		t.Errorf("man without --dir = %d %q, want %d naming --dir", code, errOut, exitUsage)
	}
}

// goreleaserBrew is the Homebrew formula section of .goreleaser.yaml.
type goreleaserBrew struct {
	Brews []struct {
		Name        string `yaml:"name"`
		Goarm       string `yaml:"goarm"`
		Description string `yaml:"description"`
		Install     string `yaml:"install"`
		PostInstall string `yaml:"post_install"`
		Service     string `yaml:"service"`
		Test        string `yaml:"test"`
		Caveats     string `yaml:"caveats"`
	} `yaml:"brews"`
	HomebrewCasks []any `yaml:"homebrew_casks"`
}

// TestHomebrewFormula checks the Ruby that .goreleaser.yaml contributes to
// the formula (install, post_install, service, test), which GoReleaser
// pastes verbatim into its template: the earlier cask was invalid Ruby and
// used formula-only helpers. The snippets are placed the way GoReleaser's
// formula template places them and checked with `ruby -c`. When
// goreleaser has rendered the whole formula (`make release-snapshot`), that
// file is checked too.
func TestHomebrewFormula(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg goreleaserBrew
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.HomebrewCasks) != 0 {
		t.Error("homebrew_casks is back: casks cannot carry the service brew services needs")
	}
	if len(cfg.Brews) != 1 {
		t.Fatalf("want one brews entry, got %d", len(cfg.Brews))
	}
	b := cfg.Brews[0]
	if b.Goarm != "7" {
		t.Errorf("brews goarm = %q: the formula must pick the armv7 build for 32-bit ARM Linux", b.Goarm)
	}
	if !strings.Contains(b.Service, `run [opt_bin/"edgeplat", "agent"]`) {
		t.Errorf("service does not run the agent:\n%s", b.Service)
	}
	if len(b.Description) > 80 {
		t.Errorf("description has %d characters; brew audit allows 80", len(b.Description))
	}

	ruby, err := exec.LookPath("ruby")
	if err != nil {
		coretest.Unavailable(t, "ruby", "PATH", err)
	}
	indent := func(s, pad string) string {
		var out []string
		for l := range strings.Lines(strings.TrimRight(s, "\n")) {
			out = append(out, pad+strings.TrimRight(l, "\n"))
		}
		return strings.Join(out, "\n")
	}
	formula := "class Edgeplat < Formula\n" +
		"  desc " + strconv.Quote(b.Description) + "\n" +
		"  on_linux do\n    if Hardware::CPU.arm? && !Hardware::CPU.is_64_bit?\n" +
		"      url \"https://example.invalid/edgeplat_linux_armv7.tar.gz\"\n" +
		"      define_method(:install) do\n" + indent(b.Install, "        ") + "\n      end\n    end\n  end\n" +
		"  def post_install\n" + indent(b.PostInstall, "    ") + "\n  end\n" +
		"  def caveats\n    <<~EOS\n" + indent(b.Caveats, "      ") + "\n    EOS\n  end\n" +
		"  service do\n" + indent(b.Service, "    ") + "\n  end\n" +
		"  test do\n" + indent(b.Test, "    ") + "\n  end\n" +
		"end\n"
	checkRuby(t, ruby, "assembled formula", formula)

	rendered := filepath.Join("..", "build", "release", "homebrew", "Formula", "edgeplat.rb")
	if data, err := os.ReadFile(rendered); err == nil {
		s := string(data)
		checkRuby(t, ruby, rendered, s)
		for _, want := range []string{"class Edgeplat < Formula", "service do", "def post_install",
			"if Hardware::CPU.arm? && !Hardware::CPU.is_64_bit?", "linux_armv7.tar.gz"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s lacks %q", rendered, want)
			}
		}
	}
}

// checkRuby fails the test when ruby -c finds a syntax error in src.
func checkRuby(t *testing.T, ruby, name, src string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "formula.rb")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(ruby, "-c", f).CombinedOutput(); err != nil {
		t.Errorf("ruby -c %s: %v\n%s\n%s", name, err, out, src)
	}
}

// TestPackageShipsDocs: lintian's no-changelog error and no-manual-page
// warning, and completions that only `edgeplat completion` could produce,
// were what the .deb lacked. The nfpm contents must install each, from the
// files dist/package-docs.sh writes.
func TestPackageShipsDocs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Before struct {
			Hooks []string `yaml:"hooks"`
		} `yaml:"before"`
		NFPMs []struct {
			Contents []struct {
				Src, Dst, Packager string
			} `yaml:"contents"`
		} `yaml:"nfpms"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(cfg.Before.Hooks, func(h string) bool { return strings.Contains(h, "dist/package-docs.sh") }) {
		t.Errorf("no before hook runs dist/package-docs.sh: %v", cfg.Before.Hooks)
	}
	if len(cfg.NFPMs) != 1 {
		t.Fatalf("want one nfpms entry, got %d", len(cfg.NFPMs))
	}
	installed := map[string]string{}
	for _, c := range cfg.NFPMs[0].Contents {
		if c.Packager == "" || c.Packager == "deb" {
			installed[c.Dst] = c.Src
		}
	}
	for dst, src := range map[string]string{
		"/usr/share/doc/edgeplat/changelog.gz":               "build/package/changelog.gz",
		"/usr/share/man/man1/":                               "build/package/man/*.1.gz",
		"/usr/share/bash-completion/completions/edgeplat":    "build/package/completions/edgeplat.bash",
		"/usr/share/zsh/vendor-completions/_edgeplat":        "build/package/completions/_edgeplat",
		"/usr/share/fish/vendor_completions.d/edgeplat.fish": "build/package/completions/edgeplat.fish",
	} {
		if got, ok := installed[dst]; !ok || got != src {
			t.Errorf("the .deb installs %s from %q, want %q", dst, got, src)
		}
	}

	script, err := os.ReadFile(filepath.Join("..", "dist", "package-docs.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"man --dir", "completion bash", "completion zsh", "completion fish", "gzip -9n", "dist/debian/changelog"} {
		if !strings.Contains(string(script), want) {
			t.Errorf("dist/package-docs.sh lacks %q", want)
		}
	}
	// A Debian changelog entry starts "name (version) dist; urgency=..."
	// and ends with the maintainer line; lintian parses it.
	cl, err := os.ReadFile(filepath.Join("..", "dist", "debian", "changelog"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^edgeplat \([0-9][^)]*\) [a-z]+; urgency=[a-z]+\n`).Match(cl) ||
		!regexp.MustCompile(`(?m)^ -- .+ <.+@.+>  [A-Z][a-z]{2}, \d{1,2} [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d [+-]\d{4}$`).Match(cl) {
		t.Errorf("dist/debian/changelog is not in Debian changelog format:\n%s", cl)
	}
}

// TestQuicGoPastAdvisories: gin links quic-go into the binary, and gin's
// own requirement (v0.54.0) has published advisories; a go.mod merge must
// not take it back below the version that fixes them (docs/packaging.md).
func TestQuicGoPastAdvisories(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if p := quicGoProblem(data); p != "" {
		t.Fatal(p)
	}
	for _, tt := range []struct {
		gomod string
		bad   bool
	}{
		{"\tgithub.com/quic-go/quic-go v0.54.0 // indirect\n", true},
		{"\tgithub.com/quic-go/quic-go v0.59.0 // indirect\n", true},
		{"\tgithub.com/quic-go/quic-go v0.59.1 // indirect\n", false},
		{"\tgithub.com/quic-go/quic-go v0.65.0\n", false},
		{"module x\n", false},
	} {
		if got := quicGoProblem([]byte(tt.gomod)) != ""; got != tt.bad {
			t.Errorf("%q: refused %v, want %v", tt.gomod, got, tt.bad)
		}
	}
}

// quicGoProblem says what is wrong with go.mod's quic-go requirement, if
// anything.
func quicGoProblem(gomod []byte) string {
	m := regexp.MustCompile(`(?m)^\s*github\.com/quic-go/quic-go v0\.(\d+)\.(\d+)`).FindSubmatch(gomod)
	if m == nil {
		return "" // no longer in the module graph
	}
	minor, _ := strconv.Atoi(string(m[1]))
	patch, _ := strconv.Atoi(string(m[2]))
	if minor < 59 || minor == 59 && patch < 1 {
		return fmt.Sprintf("go.mod has quic-go v0.%d.%d; v0.59.1 or later fixes CVE-2025-59530, CVE-2025-64702 and CVE-2026-40898", minor, patch)
	}
	return ""
}
