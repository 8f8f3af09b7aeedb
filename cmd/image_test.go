package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestReleaseImagePlatforms: dockers_v2 finds each platform's binary by
// GOOS/GOARCH/GOARM, so an image platform without a linux build (or a linux
// build without an image) would silently ship an image short of an
// architecture. The Dockerfile it names must exist and copy the binary from
// the $TARGETPLATFORM directory dockers_v2 lays out.
func TestReleaseImagePlatforms(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		DockersV2 []struct {
			IDs        []string          `yaml:"ids"`
			Dockerfile string            `yaml:"dockerfile"`
			Images     []string          `yaml:"images"`
			Platforms  []string          `yaml:"platforms"`
			BuildArgs  map[string]string `yaml:"build_args"`
		} `yaml:"dockers_v2"`
		Dockers []any `yaml:"dockers"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Dockers) != 0 {
		t.Error("dockers (v1) is back: dockers_v2 builds every platform from one Dockerfile")
	}
	if len(cfg.DockersV2) != 1 {
		t.Fatalf("want one dockers_v2 entry, got %d", len(cfg.DockersV2))
	}
	d := cfg.DockersV2[0]
	var linux []string
	for _, target := range releaseTargets(t, data) {
		if rest, ok := strings.CutPrefix(target, "linux/"); ok {
			// Makefile form linux/arm/7 is OCI platform linux/arm/v7.
			if arch, arm, ok := strings.Cut(rest, "/"); ok {
				rest = arch + "/v" + arm
			}
			linux = append(linux, "linux/"+rest)
		}
	}
	got := slices.Sorted(slices.Values(d.Platforms))
	if !slices.Equal(got, linux) {
		t.Errorf("dockers_v2 platforms = %v, linux builds = %v", got, linux)
	}
	if !slices.Equal(d.IDs, []string{"edgeplat"}) || len(d.Images) == 0 {
		t.Errorf("dockers_v2 ids = %v, images = %v", d.IDs, d.Images)
	}
	for _, arg := range []string{"VERSION", "REVISION", "CREATED"} {
		if d.BuildArgs[arg] == "" {
			t.Errorf("dockers_v2 does not pass build arg %s (the image's OCI labels)", arg)
		}
	}
	df, err := os.ReadFile(filepath.Join("..", d.Dockerfile))
	if err != nil {
		t.Fatalf("dockers_v2 dockerfile: %v", err)
	}
	for _, want := range []string{"ARG BASE_IMAGE=", "FROM ${BASE_IMAGE}", "COPY ${TARGETPLATFORM}/edgeplat /usr/bin/edgeplat",
		"USER 65532:65532", `CMD ["/usr/bin/edgeplat", "healthcheck"]`} {
		if !strings.Contains(string(df), want) {
			t.Errorf("%s lacks %q", d.Dockerfile, want)
		}
	}
}

// imageConfig is the part of `podman image inspect` the test checks.
type imageConfig struct {
	Size int64 `json:"Size"`
	// Podman reports the docker-format HEALTHCHECK beside Config.
	Healthcheck *struct {
		Test []string `json:"Test"`
	} `json:"Healthcheck"`
	Config struct {
		User         string              `json:"User"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		Labels       map[string]string   `json:"Labels"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	} `json:"Config"`
}

// TestContainerImageIntegration builds the release image the way a
// machine without registry access does: the binary from this tree in the
// $TARGETPLATFORM layout GoReleaser gives, FROM a base built locally from
// dist/image-base and the host's CA bundle. It checks the image's
// metadata, runs `edgeplat version` in it, and starts all-in-one with a
// read-only root file system (as the chart does) until the image's own
// HEALTHCHECK passes.
func TestContainerImageIntegration(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("builds a linux image with podman")
	}
	e := coretest.Podman(t)
	podman := func(args ...string) (string, error) {
		out, err := e.Command(args...).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := podman(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	tmp := t.TempDir()
	suffix := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	version := "0.0.0-imagetest." + suffix
	platform := "linux/" + runtime.GOARCH
	if runtime.GOARCH == "arm" {
		platform += "/v7"
	}

	// The binary: CGO_ENABLED=0 for linux, as `make cross` builds it, so
	// the build cache already holds the packages and only linking is left.
	bin := filepath.Join(tmp, "ctx", filepath.FromSlash(platform), "edgeplat")
	start := time.Now()
	build := exec.Command("go", "build", "-ldflags", "-s -w -X github.com/edgeplat/edgeplat/core/buildinfo.Version="+version, "-o", bin, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("go build: %s", time.Since(start).Round(time.Millisecond))

	// The local base: dist/image-base plus the host's CA bundle.
	baseCtx := filepath.Join(tmp, "base")
	if err := os.CopyFS(baseCtx, os.DirFS(filepath.Join("..", "dist", "image-base"))); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		coretest.Unavailable(t, "CA bundle (ca-certificates)", "/etc/ssl/certs/ca-certificates.crt", err)
	}
	if err := os.WriteFile(filepath.Join(baseCtx, "ca-certificates.crt"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	base, image := "localhost/edgeplat-base:test-"+suffix, "localhost/edgeplat:test-"+suffix
	t.Cleanup(func() {
		if out, err := podman("rmi", "-f", image, base); err != nil {
			t.Logf("cleanup: %v %s", err, out)
		}
	})
	start = time.Now()
	must("build", "--quiet", "-t", base, baseCtx)
	// --platform sets TARGETPLATFORM explicitly; buildah 1.28 warns
	// that it is missing otherwise (while filling it with the host's).
	must("build", "--quiet", "--format", "docker", "--platform", platform,
		"--build-arg", "BASE_IMAGE="+base,
		"--build-arg", "VERSION="+version,
		"--build-arg", "REVISION=0123456789abcdef",
		"--build-arg", "CREATED=2026-12-07T00:00:00Z",
		"-f", filepath.Join("..", "dist", "Dockerfile"), "-t", image, filepath.Join(tmp, "ctx"))
	t.Logf("podman build (base and image): %s", time.Since(start).Round(time.Millisecond))

	var inspected []imageConfig
	if err := json.Unmarshal([]byte(must("image", "inspect", image)), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("image inspect: %v (%d images)", err, len(inspected))
	}
	img := inspected[0]
	t.Logf("image size: %.1f MiB (binary %.1f MiB)", float64(img.Size)/(1<<20), fileMiB(t, bin))
	if img.Config.User != "65532:65532" {
		t.Errorf("image user = %q, want 65532:65532 (non-root)", img.Config.User)
	}
	if !slices.Equal(img.Config.Entrypoint, []string{"/usr/bin/edgeplat"}) || !slices.Equal(img.Config.Cmd, []string{"serve-api"}) {
		t.Errorf("entrypoint %v cmd %v", img.Config.Entrypoint, img.Config.Cmd)
	}
	if img.Healthcheck == nil || !slices.Equal(img.Healthcheck.Test, []string{"CMD", "/usr/bin/edgeplat", "healthcheck"}) {
		t.Errorf("healthcheck = %+v", img.Healthcheck)
	}
	for _, p := range []string{"3002/tcp", "3003/tcp"} {
		if _, ok := img.Config.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed: %v", p, img.Config.ExposedPorts)
		}
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.title":    "edgeplat",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": "0123456789abcdef",
		"org.opencontainers.image.created":  "2026-12-07T00:00:00Z",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.source":   "https://github.com/edgeplat/edgeplat",
	} {
		if got := img.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}

	if out := must("run", "--rm", "--network", "none", "--read-only", "--no-healthcheck", image, "version"); !strings.Contains(out, "edgeplat "+version) {
		t.Errorf("edgeplat version in the image printed %q, want version %s", out, version)
	}

	// all-in-one needs nothing outside the container; --read-only gives it
	// a writable /tmp only, as the chart's readOnlyRootFilesystem does.
	name := "edgeplat-imagetest-" + suffix
	must("run", "-d", "--name", name, "--network", "none", "--read-only", image, "all-in-one", "--data-dir", "/tmp/data")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := podman("logs", name)
			t.Logf("container log:\n%s", out[max(0, len(out)-4000):])
		}
		if out, err := podman("rm", "-f", "-t", "0", name); err != nil {
			t.Logf("cleanup: %v %s", err, out)
		}
	})
	start = time.Now()
	coretest.Eventually(t, 90*time.Second, "the image's HEALTHCHECK to pass on all-in-one", func() bool {
		// Exit 0 healthy, 1 unhealthy (still starting).
		_, err := podman("healthcheck", "run", name)
		return err == nil
	})
	t.Logf("all-in-one healthy after %s", time.Since(start).Round(time.Millisecond))
	if out, err := podman("exec", name, "/usr/bin/edgeplat", "healthcheck", "--url", "http://127.0.0.1:3003/health"); err != nil {
		t.Errorf("ingest /health in the container: %v", err)
	} else if !strings.Contains(out, "healthy: http://127.0.0.1:3003/health") {
		t.Errorf("healthcheck printed %q", out)
	}
	// The probe can fail: a 404 is not healthy.
	if out, err := podman("exec", name, "/usr/bin/edgeplat", "healthcheck", "--url", "http://127.0.0.1:3002/no-such-path"); err == nil {
		t.Errorf("healthcheck of a 404 passed: %s", out)
	}
	if out := must("top", name, "huser"); !strings.Contains(out, "65532") {
		t.Errorf("all-in-one does not run as 65532:\n%s", out)
	}
}

func fileMiB(t *testing.T, path string) float64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return float64(st.Size()) / (1 << 20)
}
