package apps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/edgeplat/edgeplat/core/control"
)

// Service states of ServiceState.State beyond the runtime's own.
const (
	StatePulling = "pulling"
	StateMissing = "missing"
	StateUnknown = "unknown"
	StateStopped = "stopped"
)

// State merges the target with what the runtime reports. It answers
// when the runtime is down: every service is then "unknown".
func (m *Manager) State(ctx context.Context) control.AppsState {
	m.mu.Lock()
	agent, target, cli, rs := m.agent, m.target, m.cli, m.runtime
	m.mu.Unlock()
	var have []container.Summary
	if cli != nil {
		var err error
		if have, err = on(cli).owned(ctx, agent); err != nil {
			rs = control.RuntimeState{Status: StatusUnreachable, Error: err.Error(), Since: time.Now().UnixMilli()}
			cli = nil
		}
	}
	byKey := map[svcKey][]container.Summary{}
	for _, c := range have {
		if k, ok := keyOf(c); ok {
			byKey[k] = append(byKey[k], c)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := control.AppsState{Runtime: rs, Apps: make([]control.AppState, 0, len(target))}
	for _, app := range target {
		as := control.AppState{AppID: app.AppID, AppName: app.AppName, Services: make([]control.ServiceState, 0, len(app.Services))}
		for _, svc := range app.Services {
			k := svcKey{app.AppID, svc.ServiceName}
			ss := control.ServiceState{ServiceName: svc.ServiceName, ImageName: svc.ImageName, Target: m.want(k, svc), Config: svc.Config, State: StateUnknown}
			if cli != nil {
				ss.State = StateMissing
				if c, ok := pick(byKey[k], ConfigHash(svc.Config)); ok {
					ss.ContainerID, ss.Status, ss.State = c.ID, c.Status, string(c.State)
					if c.State == container.StateExited && ss.Target == control.ServiceStopped {
						ss.State = StateStopped
					}
				}
				if m.pulling[k] {
					ss.State = StatePulling
				}
			}
			if f := m.failures[k]; f != nil && f.hash == ConfigHash(svc.Config) {
				ss.Error, ss.Retries, ss.NextRetry = f.err, f.retries, f.next.UnixMilli()
			}
			as.Services = append(as.Services, ss)
		}
		out.Apps = append(out.Apps, as)
	}
	return out
}

// pick is the container that stands for a service: the one of its
// current configuration, else a running one, else any.
func pick(cs []container.Summary, hash string) (container.Summary, bool) {
	for _, c := range cs {
		if c.Labels[LabelConfigHash] == hash {
			return c, true
		}
	}
	for _, c := range cs {
		if running(c) {
			return c, true
		}
	}
	if len(cs) > 0 {
		return cs[0], true
	}
	return container.Summary{}, false
}

// find returns the target app and, when service is set, checks it has
// that service.
func (m *Manager) find(appID int, service string) (control.TargetApp, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.target {
		if a.AppID != appID {
			continue
		}
		if service == "" {
			return a, nil
		}
		for _, s := range a.Services {
			if s.ServiceName == service {
				return a, nil
			}
		}
		return a, fmt.Errorf("%w: app %d has no service %q", ErrNotFound, appID, service)
	}
	return control.TargetApp{}, fmt.Errorf("%w: no app with id %d", ErrNotFound, appID)
}

// Actions of Act.
const (
	ActionStart   = "start"
	ActionStop    = "stop"
	ActionRestart = "restart"
)

// Act starts, stops or restarts a service (every service of the app when
// service is "") and waits until the runtime did it. start and stop hold
// until the service's target changes, so the reconciler keeps them;
// force clears a failed service's back-off so it is tried at once.
func (m *Manager) Act(ctx context.Context, appID int, service, action string, force bool) (control.AppState, error) {
	app, err := m.find(appID, service)
	if err != nil {
		return control.AppState{}, err
	}
	if action != ActionStart && action != ActionStop && action != ActionRestart {
		return control.AppState{}, fmt.Errorf("unknown action %q", action)
	}
	cli, err := m.client()
	if err != nil {
		return control.AppState{}, err
	}
	m.mu.Lock()
	for _, s := range app.Services {
		if service != "" && s.ServiceName != service {
			continue
		}
		k := svcKey{appID, s.ServiceName}
		switch action {
		case ActionStart, ActionRestart:
			if action == ActionStart || m.overrides[k] == control.ServiceStopped {
				m.overrides[k] = control.ServiceRunning
			}
		case ActionStop:
			m.overrides[k] = control.ServiceStopped
		}
		if force {
			delete(m.failures, k)
		}
	}
	m.mu.Unlock()
	if action == ActionRestart {
		if err := m.restart(ctx, cli, app, service); err != nil {
			return control.AppState{}, err
		}
	}
	if _, err := m.pass(ctx, cli); err != nil {
		return control.AppState{}, fmt.Errorf("%w: %v", ErrRuntimeDown, err)
	}
	return m.appState(ctx, appID), nil
}

// restart restarts the running containers of the app's services.
func (m *Manager) restart(ctx context.Context, cli *client.Client, app control.TargetApp, service string) error {
	m.work.Lock()
	defer m.work.Unlock()
	have, err := on(cli).owned(ctx, m.agentID())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRuntimeDown, err)
	}
	t := stopTimeoutSecs
	for _, c := range have {
		k, ok := keyOf(c)
		if !ok || k.app != app.AppID || (service != "" && k.service != service) || !running(c) {
			continue
		}
		if _, err := cli.ContainerRestart(ctx, c.ID, client.ContainerRestartOptions{Timeout: &t}); err != nil {
			return fmt.Errorf("restart container %s: %w", name(c), err)
		}
		m.log.Info("container restarted", "container", name(c))
	}
	return nil
}

func (m *Manager) agentID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.agent
}

func (m *Manager) appState(ctx context.Context, appID int) control.AppState {
	for _, a := range m.State(ctx).Apps {
		if a.AppID == appID {
			return a
		}
	}
	return control.AppState{AppID: appID}
}

// Purge removes the app's named volumes; its definition stays. Its
// containers are removed first (the runtime keeps a volume in use) and
// made again by the reconciler. Without force an app with a running
// service is refused (ErrRunning).
func (m *Manager) Purge(ctx context.Context, appID int, force bool) error {
	app, err := m.find(appID, "")
	if err != nil {
		return err
	}
	cli, err := m.client()
	if err != nil {
		return err
	}
	if !force {
		for _, s := range m.appState(ctx, appID).Services {
			if s.State == string(container.StateRunning) {
				return fmt.Errorf("%w: service %q runs; stop it or purge with force", ErrRunning, s.ServiceName)
			}
		}
	}
	m.work.Lock()
	have, err := on(cli).owned(ctx, m.agentID())
	if err == nil {
		for _, c := range have {
			if k, ok := keyOf(c); ok && k.app == appID {
				if err = on(cli).remove(ctx, c.ID); err != nil {
					break
				}
			}
		}
	}
	if err == nil {
		for _, s := range app.Services {
			for _, vs := range s.Config.Volumes {
				v, perr := control.ParseVolume(vs)
				if perr != nil || !v.Named() {
					continue
				}
				vol := VolumeName(app.AppName, v.Source)
				if _, rerr := cli.VolumeRemove(ctx, vol, client.VolumeRemoveOptions{Force: true}); rerr != nil && !cerrdefs.IsNotFound(rerr) {
					err = fmt.Errorf("remove volume %s: %w", vol, rerr)
					break
				}
				m.log.Info("volume removed", "app", app.AppName, "volume", vol)
			}
		}
	}
	m.work.Unlock()
	signal(m.kick)
	return err
}

// LogOptions select a service's log lines.
type LogOptions struct {
	Tail       int
	Follow     bool
	Timestamps bool
}

// LogLine is one line of a container's output; Stream is stdout or
// stderr.
type LogLine struct {
	Msg    string
	Stream string
}

// maxLogLine bounds one log line; longer ones are cut.
const maxLogLine = 64 << 10

// maxFrame bounds one frame of the log stream.
const maxFrame = 16 << 20

// Logs sends the service container's log lines to emit: the last Tail,
// then, with Follow, new ones until ctx ends or the container stops.
func (m *Manager) Logs(ctx context.Context, appID int, service string, opts LogOptions, emit func(LogLine) error) error {
	app, err := m.find(appID, service)
	if err != nil {
		return err
	}
	cli, err := m.client()
	if err != nil {
		return err
	}
	var svc control.TargetService
	for _, s := range app.Services {
		if s.ServiceName == service {
			svc = s
		}
	}
	have, err := on(cli).owned(ctx, m.agentID())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRuntimeDown, err)
	}
	var cs []container.Summary
	for _, c := range have {
		if k, ok := keyOf(c); ok && k == (svcKey{appID, service}) {
			cs = append(cs, c)
		}
	}
	c, ok := pick(cs, ConfigHash(svc.Config))
	if !ok {
		return fmt.Errorf("%w: service %q has no container yet", ErrNotFound, service)
	}
	rc, err := cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true,
		Follow: opts.Follow, Timestamps: opts.Timestamps, Tail: strconv.Itoa(opts.Tail)})
	if err != nil {
		return fmt.Errorf("logs of %s: %w", name(c), err)
	}
	defer rc.Close()
	return demux(rc, emit)
}

// demux splits the runtime's multiplexed log stream (8-byte frame
// headers: stream, 0, 0, 0, big-endian size) into lines per stream.
func demux(r io.Reader, emit func(LogLine) error) error {
	br := bufio.NewReaderSize(r, 32<<10)
	partial := map[byte][]byte{}
	streams := map[byte]string{1: "stdout", 2: "stderr"}
	flush := func(st byte, final bool) error {
		buf := partial[st]
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			if err := emit(LogLine{Msg: string(buf[:i]), Stream: streams[st]}); err != nil {
				return err
			}
			buf = buf[i+1:]
		}
		if len(buf) > maxLogLine || (final && len(buf) > 0) {
			if err := emit(LogLine{Msg: string(buf[:min(len(buf), maxLogLine)]), Stream: streams[st]}); err != nil {
				return err
			}
			buf = nil
		}
		partial[st] = append([]byte(nil), buf...)
		return nil
	}
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			for st := range streams {
				if ferr := flush(st, true); ferr != nil {
					return ferr
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("read log stream: %w", err)
		}
		st := hdr[0]
		if _, ok := streams[st]; !ok {
			st = 1 // stdin echo or an unknown stream: shown as stdout
		}
		size := binary.BigEndian.Uint32(hdr[4:])
		if size > maxFrame {
			return fmt.Errorf("read log stream: frame of %d bytes is over %d", size, maxFrame)
		}
		chunk := make([]byte, size)
		if _, err := io.ReadFull(br, chunk); err != nil {
			return fmt.Errorf("read log stream: %w", err)
		}
		partial[st] = append(partial[st], chunk...)
		if err := flush(st, false); err != nil {
			return err
		}
	}
}
