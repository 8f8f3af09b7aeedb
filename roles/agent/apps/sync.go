package apps

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/edgeplat/edgeplat/core/control"
)

// healthWait bounds how long a new container of a blue-green swap may
// take to run (and to turn healthy, when its image has a healthcheck)
// before the swap is given up and the old container kept.
const healthWait = 60 * time.Second

// stableAfter is how long a service must have been left alone after a
// failed attempt before finding it in its target state clears the
// failure: a container that exits again at once keeps its back-off.
const stableAfter = 30 * time.Second

// engine is the container operations of one connection to the runtime.
type engine struct{ cli *client.Client }

func on(cli *client.Client) engine { return engine{cli} }

// owned lists the containers with the agent's label, running or not.
func (e engine) owned(ctx context.Context, agent string) ([]container.Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	res, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelAgent+"="+agent)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return res.Items, nil
}

func keyOf(c container.Summary) (svcKey, bool) {
	id, err := strconv.Atoi(c.Labels[LabelAppID])
	if err != nil || c.Labels[LabelService] == "" {
		return svcKey{}, false
	}
	return svcKey{id, c.Labels[LabelService]}, true
}

// want is the state a service should be in: stopped while the run state
// stops the agent, else the override of a start/stop action, else its
// own.
func (m *Manager) want(k svcKey, svc control.TargetService) string {
	if m.stopped {
		return control.ServiceStopped
	}
	if o, ok := m.overrides[k]; ok {
		return o
	}
	if svc.State == "" {
		return control.ServiceRunning
	}
	return svc.State
}

// reconcile brings the runtime to the target once; m.work is held. It
// reports whether a service failed (kept for its back-off) and returns an
// error for a failure that is not one service's (listing failed).
func (m *Manager) reconcile(ctx context.Context, cli *client.Client) (bool, error) {
	m.mu.Lock()
	agent, target := m.agent, slices.Clone(m.target)
	m.mu.Unlock()
	have, err := on(cli).owned(ctx, agent)
	if err != nil {
		return false, err
	}
	byKey := map[svcKey][]container.Summary{}
	for _, c := range have {
		if k, ok := keyOf(c); ok {
			byKey[k] = append(byKey[k], c)
		}
	}
	failed := false
	wanted := map[svcKey]bool{}
	for _, app := range target {
		for _, svc := range app.Services {
			k := svcKey{app.AppID, svc.ServiceName}
			wanted[k] = true
			if ctx.Err() != nil {
				return failed, nil
			}
			hash := ConfigHash(svc.Config)
			m.mu.Lock()
			f := m.failures[k]
			if f != nil && f.hash != hash {
				delete(m.failures, k)
				f = nil
			}
			want := m.want(k, svc)
			m.mu.Unlock()
			if f != nil && time.Now().Before(f.next) {
				failed = true
				continue
			}
			log := m.log.With("app", app.AppName, "service", svc.ServiceName)
			acted, err := m.syncService(ctx, cli, agent, app, svc, hash, want, byKey[k], log)
			if err != nil && client.IsErrConnectionFailed(err) {
				// The runtime went away: not this service's failure.
				return failed, err
			}
			if err != nil && ctx.Err() == nil {
				m.fail(k, hash, err, log)
				failed = true
				continue
			}
			m.mu.Lock()
			if f := m.failures[k]; f != nil && !acted && time.Since(f.at) > stableAfter {
				delete(m.failures, k)
			}
			m.mu.Unlock()
		}
	}
	for k, cs := range byKey {
		if wanted[k] {
			continue
		}
		for _, c := range cs {
			m.log.Info("removing container of a service no longer in the target", "container", name(c), "app_id", k.app, "service", k.service)
			if err := on(cli).remove(ctx, c.ID); err != nil {
				m.log.Warn("remove container", "container", name(c), "err", err)
				failed = true
			}
		}
		m.mu.Lock()
		delete(m.failures, k)
		m.mu.Unlock()
	}
	return failed, nil
}

// fail records a failed attempt and its back-off: 1 s, doubling, up to
// 5 min.
func (m *Manager) fail(k svcKey, hash string, err error, log *slog.Logger) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.failures[k]
	if f == nil {
		f = &failure{hash: hash}
		m.failures[k] = f
	}
	f.retries++
	wait := retryFirst << min(f.retries-1, 20)
	wait = min(wait, retryMax)
	f.err, f.at, f.next = err.Error(), time.Now(), time.Now().Add(wait)
	log.Error("service not reconciled; retrying", "err", err, "retries", f.retries, "retry_in", wait)
}

// pullingFunc marks k as pulling its image, for State.
func (m *Manager) pullingFunc(k svcKey) func(bool) {
	return func(busy bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if busy {
			m.pulling[k] = true
		} else {
			delete(m.pulling, k)
		}
	}
}

func name(c container.Summary) string {
	if len(c.Names) > 0 {
		return strings.TrimPrefix(c.Names[0], "/")
	}
	return c.ID[:min(12, len(c.ID))]
}

func running(c container.Summary) bool {
	return c.State == container.StateRunning || c.State == container.StateRestarting
}

// syncService brings one service's containers to the target: the
// container of the current configuration in state want, none of another
// configuration. It reports whether it changed anything.
func (m *Manager) syncService(ctx context.Context, cli *client.Client, agent string, app control.TargetApp, svc control.TargetService,
	hash, want string, have []container.Summary, log *slog.Logger) (bool, error) {
	var cur *container.Summary
	var old []container.Summary
	for i := range have {
		c := have[i]
		switch {
		case c.Labels[LabelConfigHash] != hash:
			old = append(old, c)
		case cur == nil:
			cur = &have[i]
		case running(c) && !running(*cur):
			// Two of the same configuration (a swap cut short): keep the
			// running one.
			old = append(old, *cur)
			cur = &have[i]
		default:
			old = append(old, c)
		}
	}
	acted := false
	if cur == nil {
		if err := on(cli).ensureImage(ctx, svc.ImageName, m.pullingFunc(svcKey{app.AppID, svc.ServiceName}), log); err != nil {
			return true, err
		}
		clash := false
		if want == control.ServiceRunning {
			clash = on(cli).portClash(ctx, svc, old)
		}
		if clash {
			// The new container cannot bind a host port the old one
			// holds: stop the old first, and accept the gap.
			log.Info("host port held by the old container: stop, then start the new one")
			for _, c := range old {
				if err := on(cli).stop(ctx, c.ID); err != nil {
					return true, err
				}
			}
		}
		id, err := on(cli).create(ctx, agent, app, svc, hash)
		if err != nil {
			return true, err
		}
		log.Info("container created", "container", ContainerName(app.AppName, svc.ServiceName, hash), "id", id[:12], "replaces", len(old))
		if want == control.ServiceRunning {
			if err := on(cli).startAndWait(ctx, id); err != nil {
				// The old container goes on serving: remove the new one.
				_ = on(cli).remove(ctx, id)
				if clash {
					for _, c := range old {
						_ = on(cli).start(ctx, c.ID)
					}
				}
				return true, err
			}
			log.Info("container started", "id", id[:12])
		}
		for _, c := range old {
			if err := on(cli).remove(ctx, c.ID); err != nil {
				return true, err
			}
			log.Info("old container removed", "container", name(c))
		}
		return true, nil
	}
	switch {
	case want == control.ServiceRunning && !running(*cur):
		if cur.State == container.StateExited {
			log.Warn("container not running; starting it", "container", name(*cur), "status", cur.Status)
		}
		if err := on(cli).startAndWait(ctx, cur.ID); err != nil {
			return true, err
		}
		acted = true
	case want == control.ServiceStopped && running(*cur):
		if err := on(cli).stop(ctx, cur.ID); err != nil {
			return true, err
		}
		log.Info("container stopped", "container", name(*cur))
		acted = true
	}
	for _, c := range old {
		if err := on(cli).remove(ctx, c.ID); err != nil {
			return true, err
		}
		log.Info("old container removed", "container", name(c))
		acted = true
	}
	return acted, nil
}

// portClash reports whether svc binds a host port a running old
// container holds.
func (e engine) portClash(ctx context.Context, svc control.TargetService, old []container.Summary) bool {
	want := hostPorts(svc)
	if len(want) == 0 {
		return false
	}
	for _, c := range old {
		if !running(c) {
			continue
		}
		res, err := e.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			continue
		}
		for p := range boundPorts(res.Container.HostConfig) {
			if want[p] {
				return true
			}
		}
	}
	return false
}

// ensureImage pulls the image when the runtime does not have it
// (IfNotPresent), logging the pull's progress.
func (e engine) ensureImage(ctx context.Context, image string, pulling func(bool), log *slog.Logger) error {
	if _, err := e.cli.ImageInspect(ctx, image); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", image, err)
	}
	pulling(true)
	defer pulling(false)
	log.Info("pulling image", "image", image)
	start := time.Now()
	resp, err := e.cli.ImagePull(ctx, image, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("pull %s: %w", image, err)
	}
	last := time.Time{}
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return fmt.Errorf("pull %s: %w", image, err)
		}
		if msg.Error != nil {
			return fmt.Errorf("pull %s: %s", image, msg.Error.Message)
		}
		// Progress comes many times a second per layer: a line every
		// few seconds says the pull moves.
		if time.Since(last) > 5*time.Second && msg.Status != "" {
			last = time.Now()
			log.Info("pulling image", "image", image, "status", msg.Status, "layer", msg.ID)
		}
	}
	if _, err := e.cli.ImageInspect(ctx, image); err != nil {
		return fmt.Errorf("pull %s: image missing after the pull: %w", image, err)
	}
	log.Info("image pulled", "image", image, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (e engine) create(ctx context.Context, agent string, app control.TargetApp, svc control.TargetService, hash string) (string, error) {
	cfg, hc, err := createOptions(agent, app, svc, hash)
	if err != nil {
		return "", err
	}
	res, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: ContainerName(app.AppName, svc.ServiceName, hash), Config: &cfg, HostConfig: &hc})
	if err != nil {
		return "", fmt.Errorf("create container: %w", err)
	}
	return res.ID, nil
}

func (e engine) start(ctx context.Context, id string) error {
	if _, err := e.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start container %.12s: %w", id, err)
	}
	return nil
}

// startAndWait starts a container and waits until it runs, and is
// healthy when it has a healthcheck.
func (e engine) startAndWait(ctx context.Context, id string) error {
	if err := e.start(ctx, id); err != nil {
		return err
	}
	deadline := time.Now().Add(healthWait)
	for wait := 20 * time.Millisecond; ; wait = min(wait*2, time.Second) {
		res, err := e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("inspect container %.12s: %w", id, err)
		}
		st := res.Container.State
		switch {
		case st == nil:
		case st.Running && healthy(st.Health):
			return nil
		case st.Health != nil && st.Health.Status == container.Unhealthy:
			return fmt.Errorf("container %.12s is unhealthy", id)
		case !st.Running && !st.Restarting && st.Status != container.StateCreated:
			return fmt.Errorf("container %.12s exited with code %d at start: %s", id, st.ExitCode, st.Error)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container %.12s not running and healthy after %s", id, healthWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (e engine) stop(ctx context.Context, id string) error {
	t := stopTimeoutSecs
	if _, err := e.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &t}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("stop container %.12s: %w", id, err)
	}
	return nil
}

// remove stops and removes a container; one that is gone already is no
// error.
func (e engine) remove(ctx context.Context, id string) error {
	if err := e.stop(ctx, id); err != nil {
		return err
	}
	if _, err := e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %.12s: %w", id, err)
	}
	return nil
}

// healthy reports whether a running container may take traffic: it has
// no healthcheck (podman reports an empty health then) or passes it.
func healthy(h *container.Health) bool {
	return h == nil || h.Status == "" || h.Status == container.Healthy || h.Status == container.NoHealthcheck
}
