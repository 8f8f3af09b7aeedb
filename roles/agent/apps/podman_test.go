package apps

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

// tickerImage has a default command that prints a line a second.
const tickerImage = "localhost/ticker:test"

// podman starts podman's Docker-compatible API service on a socket of
// its own (the recipe of docs/apps.md, "Testing") and returns the
// socket path and the process, which the test may kill and restart.
// It skips without podman, unless CI=true.
func podman(t *testing.T) *podmanService {
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
	p := &podmanService{t: t, socket: filepath.Join(dir, "podman.sock"), env: append(os.Environ(), "CONTAINERS_CONF="+conf)}
	p.ensureImage()
	p.start()
	t.Cleanup(p.stop)
	return p
}

type podmanService struct {
	t      *testing.T
	socket string
	env    []string
	cmd    *exec.Cmd
}

func (p *podmanService) run(args ...string) (string, error) {
	cmd := exec.Command("podman", args...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (p *podmanService) ensureImage() {
	if _, err := p.run("image", "exists", tickerImage); err == nil {
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
		`tar -C "$2" -c . | podman import --change 'CMD ["/bin/sh","-c","while true; do echo tick $(date +%s); sleep 1; done"]' - ` + tickerImage
	cmd := exec.Command("sh", "-c", script, "sh", bb, root)
	cmd.Env = p.env
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("build %s: %v\n%s", tickerImage, err, out)
	}
}

// start runs the API service and waits until it answers.
func (p *podmanService) start() {
	_ = os.Remove(p.socket)
	p.cmd = exec.Command("podman", "system", "service", "--time=0", "unix://"+p.socket)
	p.cmd.Env = p.env
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	cli := p.client()
	defer cli.Close()
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

// stop ends the API service (the containers keep running).
func (p *podmanService) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

func (p *podmanService) config() RuntimeConfig {
	return RuntimeConfig{Type: RuntimeSocket, SocketPath: p.socket}
}

func (p *podmanService) client() *client.Client {
	cli, err := newClient(p.config())
	if err != nil {
		p.t.Fatal(err)
	}
	return cli
}
