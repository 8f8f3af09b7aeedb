package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

// clusterChild is one serve-api or ingest process of a cluster run.
type clusterChild struct {
	role     string // "serve-api" or "ingest"
	index    int
	port     int
	clientID string // serve-api's MQTT client id, the same over a restart
	env      []string
	logPath  string
	cmd      *exec.Cmd
	exited   chan struct{}
	// killed is set (under clusterRun.mu) before the SIGKILL; restarted
	// once a new process took its place.
	killed, restarted bool
}

func (c *clusterRun) clientID(i int) string { return c.group + "-api-" + strconv.Itoa(i) }

func (c *clusterRun) newChild(role string, i int) *clusterChild {
	ch := &clusterChild{role: role, index: i, port: freeLoopbackPort(), logPath: filepath.Join(c.dir, fmt.Sprintf("%s-%d.log", role, i))}
	d, s, m := c.cfg.DB, c.cfg.StreamStore, c.mqtt
	// The bench's resolved settings (flags and --config included) go to the
	// children as environment, which ranks above their file.
	ch.env = append(os.Environ(),
		"DB_HOST="+d.Host, "DB_PORT="+strconv.Itoa(d.Port), "DB_USER="+d.User, "DB_PASSWORD="+d.Password.Reveal(), "DB_SSL="+d.SSL,
		"DB_NAME="+c.dbName,
		"STREAMSTORE_HOST="+s.Host, "STREAMSTORE_PORT="+strconv.Itoa(s.Port), "STREAMSTORE_PASSWORD="+s.Password.Reveal(),
		"STREAMSTORE_DB="+strconv.Itoa(s.DB),
		"MQTT_BROKER_URL="+m.BrokerURL, "MQTT_USERNAME="+m.Username, "MQTT_PASSWORD="+m.Password.Reveal(),
		"INGESTION_PROFILE="+c.cfg.Ingest.Profile,
		"RECLAIM_IDLE_MS="+strconv.FormatInt(c.o.ReclaimIdle.Milliseconds(), 10),
		// Two processes of one host must not share a spool directory.
		"DISK_SPOOL_ENABLED=false",
		"LOG_LEVEL=warn", "EDGEPLAT_LOG_FORMAT=json")
	if role == "serve-api" {
		ch.clientID = c.clientID(i)
		ch.env = append(ch.env, "MQTT_CLIENT_ID="+ch.clientID, "MQTT_SHARED_SUBSCRIPTION_GROUP="+c.group, "DEDUP_TTL=1h",
			// As docs/configuration.md asks of separate roles: the producer
			// refuses appends at the ingest profile's stream length.
			"STREAMSTORE_INGESTION_STREAM_MAXLEN="+strconv.Itoa(s.IngestionStreamMaxLen))
		if os.Getenv("JWT_SECRET") == "" && os.Getenv("JWT_PRIVATE_KEY") == "" && os.Getenv("JWT_PUBLIC_KEY") == "" {
			// No REST calls are made, but the role needs a token key.
			ch.env = append(ch.env, "JWT_SECRET="+randomHex(32))
		}
	}
	return ch
}

// freeLoopbackPort returns a port of 127.0.0.1 that was free a moment ago.
func freeLoopbackPort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs the child and waits until its /health answers 200.
func (c *clusterRun) start(ctx context.Context, ch *clusterChild) error {
	if err := c.spawn(ch); err != nil {
		return err
	}
	return ch.waitHealthy(ctx)
}

// spawn starts the child's process.
func (c *clusterRun) spawn(ch *clusterChild) error {
	logf, err := os.OpenFile(ch.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	ch.cmd = exec.Command(c.bin, ch.role, "--port", strconv.Itoa(ch.port), "--bind", "127.0.0.1")
	ch.cmd.Env = ch.env
	ch.cmd.Stdout, ch.cmd.Stderr = logf, logf
	err = ch.cmd.Start()
	_ = logf.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("start %s %d: %w", ch.role, ch.index, err)
	}
	ch.exited, ch.killed = make(chan struct{}), false
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(ch.cmd, ch.exited)
	c.mu.Lock()
	c.children = append(c.children, ch)
	c.mu.Unlock()
	fmt.Fprintf(c.progress, "%s %d started (pid %d, port %d)\n", ch.role, ch.index, ch.cmd.Process.Pid, ch.port)
	return nil
}

// waitHealthy waits up to a minute for the child's /health to answer 200.
func (ch *clusterChild) waitHealthy(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ch.healthy(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch.exited:
			return fmt.Errorf("%s %d exited at start (%v): %s", ch.role, ch.index, ch.cmd.ProcessState, tailOf(ch.logPath))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %d was not healthy after 60s: %s", ch.role, ch.index, tailOf(ch.logPath))
		}
	}
}

func (ch *clusterChild) url(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(ch.port) + path
}

func (ch *clusterChild) healthy(ctx context.Context) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ch.url("/health"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// metric sums the series of one metric on the child's /metrics whose
// labels contain match ("" for all).
func (ch *clusterChild) metric(ctx context.Context, name, match string) (float64, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, ch.url("/metrics"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics of %s %d: %s", ch.role, ch.index, resp.Status)
	}
	return sumMetricText(resp.Body, name, match)
}

// sumMetricText adds up the samples of name in Prometheus text exposition
// whose label set contains match.
func sumMetricText(r io.Reader, name, match string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || len(line) == len(name) {
			continue
		}
		rest := line[len(name):]
		labels := ""
		switch rest[0] {
		case '{':
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		case ' ':
		default:
			continue // another metric with name as its prefix
		}
		if match != "" && !strings.Contains(labels, match) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", name, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// alive returns the role's children that have not exited.
func (c *clusterRun) alive(role string) []*clusterChild {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*clusterChild
	for _, ch := range c.children {
		if ch.role != role {
			continue
		}
		select {
		case <-ch.exited:
		default:
			out = append(out, ch)
		}
	}
	return out
}

// exitedEarly reports a child that exited without being killed.
func (c *clusterRun) exitedEarly() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.children {
		select {
		case <-ch.exited:
			if !ch.killed {
				return fmt.Errorf("%s %d exited (%v): %s", ch.role, ch.index, ch.cmd.ProcessState, tailOf(ch.logPath))
			}
		default:
		}
	}
	return nil
}

// sampleBaseCPU records each child's CPU time when the clock starts.
func (c *clusterRun) sampleBaseCPU() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.children {
		if ps, err := sysinfo.ReadProcess("/proc", ch.cmd.Process.Pid); err == nil {
			c.baseCPU[ch] = ps.CPUSeconds
		}
	}
}

// childCPU is the CPU time the children used since sampleBaseCPU, by
// role: /proc for the live ones, the kernel's rusage for those that
// exited (killed ones included), whole for those started since.
func (c *clusterRun) childCPU() (api, ingest float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.children {
		var used float64
		select {
		case <-ch.exited:
			ps := ch.cmd.ProcessState
			used = (ps.UserTime() + ps.SystemTime()).Seconds()
		default:
			st, err := sysinfo.ReadProcess("/proc", ch.cmd.Process.Pid)
			if err != nil {
				continue
			}
			used = st.CPUSeconds
		}
		used -= c.baseCPU[ch]
		if ch.role == "serve-api" {
			api += used
		} else {
			ingest += used
		}
	}
	return api, ingest
}

// kill ends the first live serve-api and ingest processes with
// --kill-signal: SIGKILL, as a crash of their host would, or SIGTERM, as
// a scale-down does, waiting for the graceful stop within the shutdown
// grace period (then SIGKILL).
func (c *clusterRun) kill() {
	sig, name := syscall.SIGKILL, "SIGKILL"
	if c.o.killSignal() == "TERM" {
		sig, name = syscall.SIGTERM, "SIGTERM"
	}
	for _, role := range []string{"serve-api", "ingest"} {
		live := c.alive(role)
		if len(live) == 0 {
			continue
		}
		ch := live[0]
		c.mu.Lock()
		ch.killed = true
		c.mu.Unlock()
		t0 := time.Now()
		_ = ch.cmd.Process.Signal(sig)
		grace := c.cfg.Lifecycle.ShutdownGrace + 5*time.Second
		select {
		case <-ch.exited:
		case <-time.After(grace):
			_ = ch.cmd.Process.Kill()
			<-ch.exited
			fmt.Fprintf(c.progress, "%s %d ignored %s for %s and was killed\n", ch.role, ch.index, name, grace)
		}
		fmt.Fprintf(c.progress, "%s %d (pid %d) ended with %s in %s\n", ch.role, ch.index, ch.cmd.Process.Pid, name,
			time.Since(t0).Round(time.Millisecond))
	}
}

// restart starts the killed children again: the serve-api with its client
// id, so the broker delivers what it queued for its session, the ingest as
// a new consumer (the survivors or it reclaim the dead one's entries).
func (c *clusterRun) restart(ctx context.Context) error {
	c.mu.Lock()
	var dead []*clusterChild
	for _, ch := range c.children {
		if ch.killed && !ch.restarted {
			ch.restarted = true
			dead = append(dead, ch)
		}
	}
	c.mu.Unlock()
	// All at once, before waiting for any: a serve-api whose appends the
	// full stream refuses reports unhealthy (its MQTT client reconnects to
	// get the unacknowledged messages redelivered) until an ingest process
	// drains the stream.
	var again []*clusterChild
	for _, ch := range dead {
		a := &clusterChild{role: ch.role, index: ch.index, port: freeLoopbackPort(), clientID: ch.clientID, env: ch.env,
			logPath: ch.logPath}
		if err := c.spawn(a); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		again = append(again, a)
	}
	for _, a := range again {
		if err := a.waitHealthy(ctx); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
	}
	return nil
}

// stopAll stops every live child with SIGTERM and waits, killing those
// that outlive the shutdown grace period.
func (c *clusterRun) stopAll() {
	c.mu.Lock()
	children := append([]*clusterChild(nil), c.children...)
	c.mu.Unlock()
	for _, ch := range children {
		_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	}
	grace := c.cfg.Lifecycle.ShutdownGrace + 5*time.Second
	for _, ch := range children {
		select {
		case <-ch.exited:
		case <-time.After(grace):
			_ = ch.cmd.Process.Kill()
			<-ch.exited
			fmt.Fprintf(c.progress, "%s %d ignored SIGTERM for %s and was killed\n", ch.role, ch.index, grace)
		}
	}
}

// tailOf returns the last lines of a child's log for an error message.
func tailOf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	const limit = 2048
	if len(b) > limit {
		b = b[len(b)-limit:]
	}
	return strings.TrimSpace(string(b))
}

// clusterBroker is a private Mosquitto for --own-broker.
type clusterBroker struct {
	url    string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// clusterBrokerConf are the settings docs/scaling.md gives for a broker
// with serve-api subscribers: room for a subscriber's bursts and for the
// queue of a session whose process is restarting, so the broker drops
// nothing it acknowledged.
const clusterBrokerConf = `allow_anonymous true
persistence false
max_inflight_messages 100
max_queued_messages 1000000
set_tcp_nodelay true
log_dest stderr
log_type error
log_type warning
`

// startClusterBroker starts mosquitto (PATH or /usr/sbin) on a free port
// of 127.0.0.1.
func startClusterBroker(progress io.Writer) (*clusterBroker, error) {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/mosquitto"); serr != nil {
			return nil, errors.New("--own-broker: no mosquitto binary in PATH or /usr/sbin")
		}
		bin = "/usr/sbin/mosquitto"
	}
	dir, err := os.MkdirTemp("", "edgeplat-bench-mosquitto-")
	if err != nil {
		return nil, err
	}
	port := freeLoopbackPort()
	conf := fmt.Sprintf("listener %d 127.0.0.1\n", port) + clusterBrokerConf
	if os.Geteuid() == 0 {
		conf += "user root\n" // mosquitto drops root for a user that cannot read the temporary directory
	}
	confPath := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "mosquitto.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	b := &clusterBroker{url: "tcp://127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: exec.Command(bin, "-c", confPath), exited: make(chan struct{})}
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	err = b.cmd.Start()
	_ = logf.Close()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("--own-broker: start %s: %w", bin, err)
	}
	go func() { _ = b.cmd.Wait(); close(b.exited) }()
	m := config.MQTT{BrokerURL: b.url}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if cl, err := pipelineConnect(m, "edgeplat-bench-ping-"+randomHex(4), true); err == nil {
			cl.Disconnect(100)
			break
		}
		select {
		case <-b.exited:
			return nil, fmt.Errorf("--own-broker: mosquitto exited at start: %s", tailOf(filepath.Join(dir, "mosquitto.log")))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, errors.New("--own-broker: mosquitto did not accept a connection within 10s")
		}
	}
	fmt.Fprintf(progress, "own broker: mosquitto (pid %d) at %s, max_inflight_messages 100, max_queued_messages 1000000\n", b.cmd.Process.Pid, b.url)
	return b, nil
}

func (b *clusterBroker) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	_ = os.RemoveAll(b.dir)
}
