// Package appstest runs podman's Docker-compatible API service for the
// apps tests (docs/apps.md, "Testing"), until core/coretest has one.
package appstest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// TickerImage has a default command that prints a line a second.
const TickerImage = "localhost/ticker:test"

// Podman starts podman's Docker-compatible API service on a socket of
// its own (the recipe of docs/apps.md, "Testing") and returns the
// socket path and the process, which the test may kill and restart.
// It skips without podman, unless CI=true.
func Podman(t *testing.T) *Service {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("podman is required under CI")
		}
		t.Skip("podman not installed")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte(`[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
events_logger = "file"
cgroup_manager = "cgroupfs"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Service{t: t, Socket: filepath.Join(dir, "podman.sock"), env: append(os.Environ(), "CONTAINERS_CONF="+conf)}
	p.ensureImage()
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// Service is a running podman API service.
type Service struct {
	t *testing.T
	// Socket is the API's unix socket.
	Socket string
	env    []string
	cmd    *exec.Cmd
}

// Run runs the podman command with args.
func (p *Service) Run(args ...string) (string, error) {
	cmd := exec.Command("podman", args...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (p *Service) ensureImage() {
	if _, err := p.Run("image", "exists", TickerImage); err == nil {
		return
	}
	root := filepath.Join(p.t.TempDir(), "rootfs")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		p.t.Fatal(err)
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		p.t.Skip("busybox-static not installed")
	}
	script := `cp "$1" "$2/bin/busybox" && for a in $("$1" --list); do ln -sf busybox "$2/bin/$a"; done && ` +
		`tar -C "$2" -c . | podman import --change 'CMD ["/bin/sh","-c","while true; do echo tick $(date +%s); sleep 1; done"]' - ` + TickerImage
	cmd := exec.Command("sh", "-c", script, "sh", bb, root)
	cmd.Env = p.env
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("build %s: %v\n%s", TickerImage, err, out)
	}
}

// Start runs the API service and waits until it answers.
func (p *Service) Start() {
	_ = os.Remove(p.Socket)
	p.cmd = exec.Command("podman", "system", "service", "--time=0", "unix://"+p.Socket)
	p.cmd.Env = p.env
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	cli := p.Client()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Ping(ctx, client.PingOptions{})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("podman service not answering: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the API service (the containers keep running).
func (p *Service) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

// Client is an API client of the service.
func (p *Service) Client() *client.Client {
	cli, err := client.New(client.WithHost("unix://" + p.Socket))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = cli.Close() })
	return cli
}
