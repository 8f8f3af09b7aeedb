package bench

import (
	"bytes"
	"context"
	"encoding/json"
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
	"text/tabwriter"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

// Footprint targets of the agent (issue: 10 Modbus devices x 100
// registers polled every second).
const (
	agentRSSTargetMB  = 30
	agentCPUTargetPct = 5
	benchAgentWarmup  = 10 * time.Second
	// anomalyCPURatioTarget: detection adds at most 10 % to the agent's CPU.
	anomalyCPURatioTarget = 1.10
	benchAgentSampleGap   = time.Second
)

type AgentOptions struct {
	Modbus    string
	Devices   int
	Registers int
	Interval  time.Duration
	Duration  time.Duration
	FirstUnit int
	JSON      bool
	KeepDir   bool
	// Anomaly runs the agent with anomaly detection on (its default) or
	// off, to measure what detection costs.
	Anomaly bool
	// CompareAnomaly runs two agents at once, one without detection and
	// one with it, and compares them (Anomaly is then ignored).
	CompareAnomaly bool
}

func (o AgentOptions) validate() error {
	if o.Modbus == "" {
		return errors.New("--modbus is required: the host:port of a Modbus TCP server")
	}
	if _, _, err := net.SplitHostPort(o.Modbus); err != nil {
		return fmt.Errorf("--modbus %q: %w", o.Modbus, err)
	}
	switch {
	case o.Devices < 1 || o.Devices > 247:
		return fmt.Errorf("--devices must be 1..247, got %d", o.Devices)
	case o.Registers < 1 || o.Registers > 65536:
		return fmt.Errorf("--registers must be 1..65536, got %d", o.Registers)
	case o.FirstUnit < 1 || o.FirstUnit+o.Devices-1 > 247:
		return fmt.Errorf("--first-unit %d with %d devices runs past unit id 247", o.FirstUnit, o.Devices)
	case o.Interval < 10*time.Millisecond:
		return fmt.Errorf("--interval must be at least 10ms, got %s", o.Interval)
	case o.Duration < time.Second:
		return fmt.Errorf("--duration must be at least 1s, got %s", o.Duration)
	}
	return nil
}

// agentReport is the outcome of one run; --json prints it as is.
type agentReport struct {
	Devices          int     `json:"devices"`
	Registers        int     `json:"registersPerDevice"`
	IntervalMS       int64   `json:"intervalMs"`
	DurationS        float64 `json:"durationS"`
	Polls            int64   `json:"polls"`
	ReadingsGood     int64   `json:"readingsGood"`
	ReadingsBad      int64   `json:"readingsBad"`
	RequestsPerPoll  float64 `json:"requestsPerPoll"`
	BlocksPerPoll    int     `json:"blocksPerPoll"`
	RegistersPerPoll int     `json:"registersPerPoll"`
	RSSMaxMB         float64 `json:"rssMaxMb"`
	RSSAvgMB         float64 `json:"rssAvgMb"`
	CPUPercent       float64 `json:"cpuPercentOfOneCore"`
	RSSTargetMB      float64 `json:"rssTargetMb"`
	CPUTargetPercent float64 `json:"cpuTargetPercent"`
	AnomalyDetection bool    `json:"anomalyDetection"`
	// AnomalyPoints are the points the detector scored during the run.
	AnomalyPoints int64 `json:"anomalyPoints"`
	Pass          bool  `json:"pass"`
}

// RunAgent runs `edgeplat bench agent`.
func RunAgent(ctx context.Context, o AgentOptions, env Env) error {
	if err := o.validate(); err != nil {
		return &UsageError{err}
	}
	progress := env.Stderr
	conn, err := net.DialTimeout("tcp", o.Modbus, 3*time.Second)
	if err != nil {
		return fmt.Errorf("--modbus %s is not reachable: %w", o.Modbus, err)
	}
	_ = conn.Close()

	// --compare-anomaly runs an agent without detection and one with it
	// side by side: both see the same machine load in the same seconds,
	// which two runs one after the other on a shared machine do not.
	modes := []bool{o.Anomaly}
	if o.CompareAnomaly {
		modes = []bool{false, true}
	}
	runs := make([]*agentRun, len(modes))
	for i, on := range modes {
		child, err := startBenchAgent(ctx, o.KeepDir, progress)
		if err != nil {
			return err
		}
		defer child.stop()
		runs[i] = &agentRun{child: child, anomaly: on}
	}
	for i, r := range runs {
		// The second agent's polls start half an interval after the
		// first's, so that neither waits for the server to answer the
		// other: polled at the same moments, the agent second in line
		// measured 5 % more CPU than the first with both agents alike.
		if i > 0 && !lifecycle.Sleep(ctx, o.Interval/2) {
			return ctx.Err()
		}
		if err := r.child.configure(ctx, o, r.anomaly); err != nil {
			return err
		}
	}
	fmt.Fprintf(progress, "%d endpoints created per agent; warming up for %s\n", o.Devices, benchAgentWarmup)
	if !lifecycle.Sleep(ctx, benchAgentWarmup) {
		return ctx.Err()
	}

	for _, r := range runs {
		if err := r.begin(ctx, o.Devices); err != nil {
			return err
		}
	}
	t0 := time.Now()
	nextProgress := t0.Add(30 * time.Second)
	for time.Since(t0) < o.Duration {
		if !lifecycle.Sleep(ctx, benchAgentSampleGap) {
			return ctx.Err()
		}
		for _, r := range runs {
			ps, err := r.sample()
			if err != nil {
				return err
			}
			if time.Now().After(nextProgress) {
				fmt.Fprintf(progress, "%s/%s: anomaly %s: rss %.1f MB, cpu %.2f%% of one core\n", time.Since(t0).Round(time.Second), o.Duration,
					onOff[r.anomaly], mb(ps.RSSBytes), (ps.CPUSeconds-r.start.CPUSeconds)/time.Since(t0).Seconds()*100)
			}
		}
		if time.Now().After(nextProgress) {
			nextProgress = nextProgress.Add(30 * time.Second)
		}
	}
	wall := time.Since(t0).Seconds()
	reps := make([]agentReport, len(runs))
	for i, r := range runs {
		if reps[i], err = r.finish(ctx, o, wall); err != nil {
			return err
		}
	}
	if !o.CompareAnomaly {
		return printAgentReport(env.Stdout, reps[0], o.JSON)
	}
	return printAnomalyComparison(env.Stdout, compareAnomaly(reps[0], reps[1]), o.JSON)
}

// configure sets the child's anomaly detection and creates the endpoints.
func (b *benchAgent) configure(ctx context.Context, o AgentOptions, anomaly bool) error {
	if err := b.call(ctx, "PATCH", "/v1/anomaly/config", map[string]any{"enabled": anomaly}, nil, http.StatusOK); err != nil {
		return fmt.Errorf("set anomaly detection: %w", err)
	}
	host, port, _ := net.SplitHostPort(o.Modbus)
	portN, _ := strconv.Atoi(port)
	for i := range o.Devices {
		dps := make([]map[string]any, o.Registers)
		for r := range o.Registers {
			dps[r] = map[string]any{"name": fmt.Sprintf("r%d", r), "register": fmt.Sprintf("holding:%d", r), "type": "uint16"}
		}
		ep := map[string]any{
			"name": fmt.Sprintf("bench-%d", i+1), "protocol": "modbus", "poll_interval": o.Interval.Milliseconds(),
			"connection":  map[string]any{"host": host, "port": portN, "unitId": o.FirstUnit + i},
			"data_points": dps,
		}
		if err := b.call(ctx, "POST", "/v1/endpoints", ep, nil, http.StatusCreated); err != nil {
			return fmt.Errorf("create endpoint %d: %w", i+1, err)
		}
	}
	return nil
}

// agentRun is one agent's measurement: its figures at the start and its
// resident set sampled since.
type agentRun struct {
	child          *benchAgent
	anomaly        bool
	start          sysinfo.ProcessStat
	before         agentTotals
	pointsBefore   int64
	rssMax, rssSum uint64
	samples        int
}

func (r *agentRun) begin(ctx context.Context, devices int) error {
	var err error
	if r.start, err = sysinfo.ReadProcess("/proc", r.child.pid()); err != nil {
		return fmt.Errorf("read the agent's /proc figures: %w", err)
	}
	if r.before, err = r.child.totals(ctx, devices); err != nil {
		return err
	}
	r.pointsBefore, err = r.child.anomalyPoints(ctx)
	return err
}

func (r *agentRun) sample() (sysinfo.ProcessStat, error) {
	ps, err := sysinfo.ReadProcess("/proc", r.child.pid())
	if err != nil {
		return ps, fmt.Errorf("the agent exited during the run: %w", err)
	}
	r.rssMax = max(r.rssMax, ps.RSSBytes)
	r.rssSum += ps.RSSBytes
	r.samples++
	return ps, nil
}

func (r *agentRun) finish(ctx context.Context, o AgentOptions, wall float64) (agentReport, error) {
	end, err := sysinfo.ReadProcess("/proc", r.child.pid())
	if err != nil {
		return agentReport{}, fmt.Errorf("the agent exited during the run: %w", err)
	}
	after, err := r.child.totals(ctx, o.Devices)
	if err != nil {
		return agentReport{}, err
	}
	pointsAfter, err := r.child.anomalyPoints(ctx)
	if err != nil {
		return agentReport{}, err
	}
	rep := agentReport{
		AnomalyDetection: r.anomaly, AnomalyPoints: pointsAfter - r.pointsBefore,
		Devices: o.Devices, Registers: o.Registers, IntervalMS: o.Interval.Milliseconds(), DurationS: wall,
		Polls: after.polls - r.before.polls, ReadingsGood: after.good - r.before.good, ReadingsBad: after.bad - r.before.bad,
		BlocksPerPoll: after.blocks, RegistersPerPoll: o.Devices * o.Registers,
		RSSMaxMB: mb(r.rssMax), CPUPercent: (end.CPUSeconds - r.start.CPUSeconds) / wall * 100,
		RSSTargetMB: agentRSSTargetMB, CPUTargetPercent: agentCPUTargetPct,
	}
	if r.samples > 0 {
		rep.RSSAvgMB = mb(r.rssSum / uint64(r.samples))
	}
	if polls := rep.Polls; polls > 0 {
		// Requests per poll of all devices together: one poll round is one
		// poll of every device.
		rep.RequestsPerPoll = float64(after.requests-r.before.requests) / float64(polls) * float64(o.Devices)
	}
	rep.Pass = rep.RSSMaxMB <= agentRSSTargetMB && rep.CPUPercent <= agentCPUTargetPct &&
		rep.RequestsPerPoll <= float64(rep.BlocksPerPoll)+0.01 && rep.ReadingsBad == 0 && rep.Polls > 0 &&
		// Detection on scores every reading (the two counts are read a
		// moment apart, hence the 1 %); off, none.
		(rep.AnomalyPoints*100 >= rep.ReadingsGood*99) == r.anomaly
	return rep, nil
}

// anomalyComparison is the outcome of --compare-anomaly.
type anomalyComparison struct {
	Off agentReport `json:"off"`
	On  agentReport `json:"on"`
	// CPURatio is the CPU of the agent with detection over the one
	// without, measured over the same seconds.
	CPURatio       float64 `json:"cpuRatio"`
	CPURatioTarget float64 `json:"cpuRatioTarget"`
	RSSMaxDeltaMB  float64 `json:"rssMaxDeltaMb"`
	Pass           bool    `json:"pass"`
}

func compareAnomaly(off, on agentReport) anomalyComparison {
	c := anomalyComparison{Off: off, On: on, CPURatioTarget: anomalyCPURatioTarget, RSSMaxDeltaMB: on.RSSMaxMB - off.RSSMaxMB}
	if off.CPUPercent > 0 {
		c.CPURatio = on.CPUPercent / off.CPUPercent
	}
	c.Pass = off.Pass && on.Pass && c.CPURatio > 0 && c.CPURatio <= anomalyCPURatioTarget
	return c
}

func printAnomalyComparison(w io.Writer, c anomalyComparison, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(c)
	}
	for _, r := range []agentReport{c.Off, c.On} {
		if err := printAgentReport(w, r, false); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "anomaly detection, CPU on / off\t%.3f (%.2f%% / %.2f%%, target <= %.2f)\t%s\n", c.CPURatio, c.On.CPUPercent, c.Off.CPUPercent,
		c.CPURatioTarget, verdict(c.CPURatio > 0 && c.CPURatio <= c.CPURatioTarget))
	fmt.Fprintf(tw, "anomaly detection, RSS max on - off\t%+.1f MB\n", c.RSSMaxDeltaMB)
	return tw.Flush()
}

var onOff = map[bool]string{true: "on", false: "off"}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "OVER TARGET"
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

func printAgentReport(w io.Writer, r agentReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "devices x registers\t%d x %d every %dms, %.0fs measured\n", r.Devices, r.Registers, r.IntervalMS, r.DurationS)
	fmt.Fprintf(tw, "polls\t%d (%d readings GOOD, %d BAD)\n", r.Polls, r.ReadingsGood, r.ReadingsBad)
	fmt.Fprintf(tw, "Modbus requests per poll round\t%.2f (contiguous blocks %d, registers %d)\t%s\n", r.RequestsPerPoll, r.BlocksPerPoll, r.RegistersPerPoll,
		verdict(r.RequestsPerPoll <= float64(r.BlocksPerPoll)+0.01))
	fmt.Fprintf(tw, "RSS max / avg\t%.1f / %.1f MB (target <= %.0f MB)\t%s\n", r.RSSMaxMB, r.RSSAvgMB, r.RSSTargetMB, verdict(r.RSSMaxMB <= r.RSSTargetMB))
	fmt.Fprintf(tw, "anomaly detection\t%s (%d points scored)\n", onOff[r.AnomalyDetection], r.AnomalyPoints)
	fmt.Fprintf(tw, "CPU\t%.2f%% of one core (target <= %.0f%%)\t%s\n", r.CPUPercent, r.CPUTargetPercent, verdict(r.CPUPercent <= r.CPUTargetPercent))
	return tw.Flush()
}

// benchAgent is the agent child process and a client for its API.
type benchAgent struct {
	cmd  *exec.Cmd
	base string
	dir  string
	keep bool
	done chan error
	log  *bytes.Buffer
}

func startBenchAgent(ctx context.Context, keep bool, progress io.Writer) (*benchAgent, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the edgeplat binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "edgeplat-bench-agent-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	// The agent runs from its own copy of the binary: pages of one file
	// mapped by two processes (this one and the agent) are counted in both
	// resident sets and are not released by the agent's start-up page
	// release, which a device, running the agent alone, does not see.
	// The copy is synced to disk before it runs: a device's binary was
	// installed long before, and the page release cannot drop pages not
	// yet written back (for about 30 s after the copy), which the agent
	// then maps again 64 KiB at a time.
	bin := filepath.Join(dir, "edgeplat-agent")
	if err := copyFile(exe, bin); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("copy the edgeplat binary: %w", err)
	}
	b := &benchAgent{base: "http://127.0.0.1:" + strconv.Itoa(port), dir: dir, keep: keep, done: make(chan error, 1), log: &bytes.Buffer{}}
	b.cmd = exec.Command(bin, "agent", "--port", strconv.Itoa(port), "--data-dir", filepath.Join(dir, "data"))
	b.cmd.Env = append(os.Environ(), "LOG_LEVEL=warn", "API_SECURITY_MODE=LOCALHOST_ONLY")
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start the agent: %w", err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	fmt.Fprintf(progress, "agent started (pid %d, %s, data %s)\n", b.cmd.Process.Pid, b.base, dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := b.call(ctx, "GET", "/v1/readiness", nil, nil, http.StatusOK); err == nil {
			return b, nil
		}
		select {
		case err := <-b.done:
			b.done <- err
			b.stop()
			return nil, fmt.Errorf("the agent exited at start: %v\n%s", err, b.log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("the agent was not ready after 30s:\n%s", b.log)
		}
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func (b *benchAgent) pid() int { return b.cmd.Process.Pid }

// stop asks the agent to shut down cleanly, kills it if it does not, and
// removes its data directory unless kept.
func (b *benchAgent) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.call(ctx, "POST", "/v1/shutdown", nil, nil, http.StatusAccepted)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
	if !b.keep {
		_ = os.RemoveAll(b.dir)
	}
}

func (b *benchAgent) call(ctx context.Context, method, path string, in, out any, want int) error {
	var body io.Reader
	if in != nil {
		buf, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(raw)))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// anomalyPoints is the number of points the agent's detector scored.
func (b *benchAgent) anomalyPoints(ctx context.Context) (int64, error) {
	var st struct {
		Stats struct {
			TotalDataPoints int64 `json:"totalDataPoints"`
		} `json:"stats"`
	}
	if err := b.call(ctx, "GET", "/v1/anomaly/stats", nil, &st, http.StatusOK); err != nil {
		return 0, fmt.Errorf("anomaly stats: %w", err)
	}
	return st.Stats.TotalDataPoints, nil
}

type agentTotals struct {
	polls, good, bad, requests int64
	blocks                     int
}

// totals adds up the devices' poll statistics and Modbus diagnostics.
func (b *benchAgent) totals(ctx context.Context, devices int) (agentTotals, error) {
	var t agentTotals
	for i := range devices {
		name := fmt.Sprintf("bench-%d", i+1)
		var d struct {
			Diagnostics struct {
				RequestsPerPoll int   `json:"requestsPerPoll"`
				TotalRequests   int64 `json:"totalRequests"`
			} `json:"diagnostics"`
		}
		if err := b.call(ctx, "GET", "/v1/adapters/modbus/devices/"+name, nil, &d, http.StatusOK); err != nil {
			return t, err
		}
		var m struct {
			Polls     int64 `json:"polls"`
			ReadsGood int64 `json:"readsGood"`
			ReadsBad  int64 `json:"readsBad"`
		}
		if err := b.call(ctx, "GET", "/v1/adapters/modbus/devices/"+name+"/metrics", nil, &m, http.StatusOK); err != nil {
			return t, err
		}
		t.polls += m.Polls
		t.good += m.ReadsGood
		t.bad += m.ReadsBad
		t.requests += d.Diagnostics.TotalRequests
		t.blocks += d.Diagnostics.RequestsPerPoll
	}
	return t, nil
}
