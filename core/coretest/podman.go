package coretest

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The images Podman provides. Nothing is pulled: there is no registry on
// the test machines, so both are imported from busybox-static's binary.
const (
	// PodmanBusybox has no default command, like many real images run
	// without one: a service of it exits at once unless given a command.
	PodmanBusybox = "localhost/busybox:test"
	// PodmanTicker prints "tick <n>" every second, n counting from 1, so a
	// service of it keeps running and its logs grow.
	PodmanTicker = "localhost/ticker:test"
	// PodmanAgentLabel is the label the agent's reconciler puts on every
	// container it creates, valued with the agent's UUID (docs/apps.md).
	PodmanAgentLabel = "io.edgeplat.agent"
	// PodmanAPIVersion is the Docker Engine API version Podman 4 serves.
	PodmanAPIVersion = "v1.41"
)

// podmanImageLabel marks images this helper built, valued with
// podmanImageRev: an image of the same name built by other means (a
// broken hand-made one, say) is imported again. Bump the revision when the
// recipe changes so every machine rebuilds.
const (
	podmanImageLabel = "io.edgeplat.coretest-image"
	podmanImageRev   = "1"
	tickerCmd        = `i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done`
)

// containersConf sets what the test machines need: runc (crun is not
// installed), cgroupfs and file events (no systemd in containers), and
// ulimits below the machine's hard limits, which podman's defaults exceed.
const containersConf = `[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
events_logger = "file"
cgroup_manager = "cgroupfs"
`

// PodmanEngine is a private Podman API service (Docker Engine API
// compatible) on a unix socket of the test's own. Its containers and
// images live in the machine's root storage, shared with every other
// service and test: tests use unique agent UUIDs and app names, and remove
// only their own containers (CleanupAgent).
type PodmanEngine struct {
	// Socket is the path of the API socket.
	Socket string
	// Host is Socket as a Docker host URL: unix:///path.
	Host string
	// Image is PodmanBusybox; Images lists every image the helper provides.
	Image  string
	Images []string
	// Conf is the containers.conf the service runs with; podman commands a
	// test runs itself (Command) use it too.
	Conf string

	t    testing.TB
	proc *Process
	http *http.Client
}

// Podman starts `podman system service` on a fresh socket, waits until it
// answers /_ping, and makes sure PodmanBusybox and PodmanTicker exist.
// Like the other finders it skips in -short mode; without podman, runc or
// a static busybox the test is skipped, or failed under CI.
func Podman(t testing.TB) *PodmanEngine {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs podman, skipped in -short mode")
	}
	bin, err := exec.LookPath("podman")
	if err != nil {
		Unavailable(t, "podman", "PATH", err)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		if _, serr := os.Stat("/usr/sbin/runc"); serr != nil {
			Unavailable(t, "runc", "PATH or /usr/sbin", err)
		}
	}
	if err := checkStaticBusybox(busyboxPath); err != nil {
		Unavailable(t, "busybox-static", busyboxPath, err)
	}
	// A unix socket path has to fit in 108 bytes; t.TempDir's names grow
	// with the test's name, so the socket gets a short directory.
	dir, err := os.MkdirTemp("", "podman")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte(containersConf), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "podman.sock")
	e := &PodmanEngine{
		Socket: sock,
		Host:   "unix://" + sock,
		Image:  PodmanBusybox,
		Images: []string{PodmanBusybox, PodmanTicker},
		Conf:   conf,
		t:      t,
		http: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		}},
	}
	e.proc = NewProcess(t, bin, "system", "service", "--time=0", e.Host)
	e.proc.Env = []string{"CONTAINERS_CONF=" + conf}
	e.proc.Ready = e.Ping
	if err := e.ensureImages(); err != nil {
		t.Fatalf("podman images: %v", err)
	}
	e.Start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("podman service log:\n%s", tail(e.proc.Output(), 4000))
		}
	})
	return e
}

// Start runs the service (again, after Stop) on the same socket and waits
// until it answers. Containers keep running while it is down: they are
// children of conmon, not of the service.
func (e *PodmanEngine) Start() {
	e.t.Helper()
	// A killed service leaves its socket file, which would make it refuse
	// to bind.
	_ = os.Remove(e.Socket)
	e.proc.Start()
}

// Stop kills the service, an outage of the runtime as the agent sees it.
func (e *PodmanEngine) Stop() { e.proc.Stop() }

// Ping reports whether the service answers GET /_ping.
func (e *PodmanEngine) Ping() error {
	var ok string
	if err := e.get("/_ping", &ok); err != nil {
		return err
	}
	if ok != "OK" {
		return fmt.Errorf("ping answered %q", ok)
	}
	return nil
}

// PodmanVersion is part of GET /version's answer.
type PodmanVersion struct {
	Version    string `json:"Version"`
	APIVersion string `json:"ApiVersion"`
	MinAPI     string `json:"MinAPIVersion"`
	Os         string `json:"Os"`
	Arch       string `json:"Arch"`
}

// Version asks the service for its version.
func (e *PodmanEngine) Version() (PodmanVersion, error) {
	var v PodmanVersion
	err := e.get("/"+PodmanAPIVersion+"/version", &v)
	return v, err
}

// PodmanContainer is one entry of GET /containers/json.
type PodmanContainer struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	Image  string            `json:"Image"`
	State  string            `json:"State"`
	Status string            `json:"Status"`
	Labels map[string]string `json:"Labels"`
}

// Containers lists every container, running or not, that carries the agent
// label valued agentUUID.
func (e *PodmanEngine) Containers(agentUUID string) ([]PodmanContainer, error) {
	return e.ContainersLabelled(PodmanAgentLabel, agentUUID)
}

// ContainersLabelled lists every container, running or not, whose label
// key has value.
func (e *PodmanEngine) ContainersLabelled(key, value string) ([]PodmanContainer, error) {
	filters, err := json.Marshal(map[string][]string{"label": {key + "=" + value}})
	if err != nil {
		return nil, err
	}
	var cs []PodmanContainer
	err = e.get("/"+PodmanAPIVersion+"/containers/json?all=1&filters="+url.QueryEscape(string(filters)), &cs)
	return cs, err
}

// PodmanInspect is part of GET /containers/:id/json.
type PodmanInspect struct {
	ID    string `json:"Id"`
	Name  string `json:"Name"`
	State struct {
		Status    string `json:"Status"`
		Running   bool   `json:"Running"`
		StartedAt string `json:"StartedAt"`
	} `json:"State"`
	RestartCount int `json:"RestartCount"`
	Config       struct {
		Image  string            `json:"Image"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

// Inspect describes container id.
func (e *PodmanEngine) Inspect(id string) (PodmanInspect, error) {
	var in PodmanInspect
	err := e.get("/"+PodmanAPIVersion+"/containers/"+url.PathEscape(id)+"/json", &in)
	return in, err
}

// Logs returns what container id has printed on stdout and stderr, as
// podman's CLI shows it (no stream framing).
func (e *PodmanEngine) Logs(id string) (string, error) {
	out, err := e.Command("logs", id).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("podman logs %s: %w: %s", id, err, out)
	}
	return string(out), nil
}

// CleanupAgent removes, when the test ends, the containers and volumes
// labelled with agentUUID, and nothing else. It uses the podman CLI, so it
// works while the service is stopped.
func (e *PodmanEngine) CleanupAgent(agentUUID string) { e.CleanupLabelled(PodmanAgentLabel, agentUUID) }

// CleanupLabelled is CleanupAgent for another label: a test that does not
// know its agent's UUID in advance names its unique app instead
// (io.edgeplat.app-name).
func (e *PodmanEngine) CleanupLabelled(key, value string) {
	e.t.Cleanup(func() {
		if err := e.RemoveLabelled(key, value); err != nil {
			e.t.Errorf("podman cleanup of %s=%s: %v", key, value, err)
		}
	})
}

// RemoveAgent force-removes the containers (with their anonymous volumes)
// and the volumes labelled with agentUUID.
func (e *PodmanEngine) RemoveAgent(agentUUID string) error {
	return e.RemoveLabelled(PodmanAgentLabel, agentUUID)
}

// RemoveLabelled is RemoveAgent for another label.
func (e *PodmanEngine) RemoveLabelled(key, value string) error {
	if key == "" || value == "" {
		return fmt.Errorf("BUG: label %q=%q would match containers of other tests", key, value)
	}
	filter := "label=" + key + "=" + value
	ids, err := e.Command("ps", "-a", "-q", "--filter", filter).Output()
	if err != nil {
		return fmt.Errorf("podman ps --filter %s: %w", filter, err)
	}
	if f := strings.Fields(string(ids)); len(f) > 0 {
		if out, err := e.Command(append([]string{"rm", "-f", "-v", "-t", "0"}, f...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("podman rm: %w: %s", err, out)
		}
	}
	vols, err := e.Command("volume", "ls", "-q", "--filter", filter).Output()
	if err != nil {
		return fmt.Errorf("podman volume ls --filter %s: %w", filter, err)
	}
	if f := strings.Fields(string(vols)); len(f) > 0 {
		if out, err := e.Command(append([]string{"volume", "rm", "-f"}, f...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("podman volume rm: %w: %s", err, out)
		}
	}
	return nil
}

// Command is the podman CLI with the engine's containers.conf.
func (e *PodmanEngine) Command(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+e.Conf)
	return cmd
}

// get decodes the JSON (or, for /_ping, text) answer of GET path.
func (e *PodmanEngine) get(path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://d"+path, nil)
	if err != nil {
		return err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	if s, ok := out.(*string); ok {
		*s = string(body)
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("get %s: decode: %w", path, err)
	}
	return nil
}

// busyboxPath is where Debian's busybox-static installs its binary.
const busyboxPath = "/bin/busybox"

// checkStaticBusybox refuses a dynamically linked busybox (Debian's plain
// busybox package): the image has no C library for it.
func checkStaticBusybox(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; install busybox-static", path)
		}
	}
	return nil
}

// ensureImages imports the images this helper built, unless present at
// the current revision. The storage is machine-wide, so test binaries of
// several packages may get here at once: a lock file serialises them.
func (e *PodmanEngine) ensureImages() error {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "edgeplat-coretest-podman.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()

	images := []struct {
		name    string
		changes []string
	}{
		{PodmanBusybox, nil},
		{PodmanTicker, []string{`CMD ["/bin/sh","-c",` + jsonString(tickerCmd) + `]`}},
	}
	var rootfs []byte
	for _, img := range images {
		out, err := e.Command("image", "inspect", "--format", `{{index .Config.Labels "`+podmanImageLabel+`"}}`, img.name).Output()
		if err == nil && strings.TrimSpace(string(out)) == podmanImageRev {
			continue
		}
		if rootfs == nil {
			if rootfs, err = busyboxRootfs(busyboxPath); err != nil {
				return err
			}
		}
		args := []string{"import", "--quiet", "--change", "LABEL " + podmanImageLabel + "=" + podmanImageRev}
		for _, c := range img.changes {
			args = append(args, "--change", c)
		}
		cmd := e.Command(append(args, "-", img.name)...)
		cmd.Stdin = bytes.NewReader(rootfs)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("podman import %s: %w: %s", img.name, err, out)
		}
	}
	return nil
}

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic("BUG: marshal a string: " + err.Error())
	}
	return string(b)
}

// busyboxRootfs is a tar of a root file system holding busybox as
// /bin/busybox and a symlink /bin/<applet> for each of its applets.
func busyboxRootfs(path string) ([]byte, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	list, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", path, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, d := range []struct {
		name string
		mode int64
	}{{"bin/", 0o755}, {"etc/", 0o755}, {"tmp/", 0o1777}, {"root/", 0o700}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, ModTime: now}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin)), ModTime: now}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	for _, applet := range strings.Fields(string(list)) {
		// The binary itself is the one name that must not become a link
		// (a link to itself is what breaks hand-made images).
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777, ModTime: now}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
