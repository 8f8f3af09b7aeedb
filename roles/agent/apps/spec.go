package apps

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"

	"github.com/edgeplat/edgeplat/core/control"
)

// Labels the reconciler puts on every container it creates. It lists
// only containers with its agent label and never touches any other.
const (
	LabelAgent      = "io.edgeplat.agent"
	LabelAppID      = "io.edgeplat.app-id"
	LabelAppName    = "io.edgeplat.app-name"
	LabelService    = "io.edgeplat.service"
	LabelConfigHash = "io.edgeplat.config-hash"
)

// ConfigHash is the hash of what makes a service's container: image,
// ports, environment, volumes and restart policy. A container whose
// label differs from its service's hash is replaced (blue-green).
func ConfigHash(cfg control.ServiceConfig) string {
	// Ports and volumes are sets to the runtime: their order in the
	// document does not make another container.
	ports := slices.Sorted(slices.Values(cfg.Ports))
	vols := slices.Sorted(slices.Values(cfg.Volumes))
	env := cfg.Environment
	if env == nil {
		env = map[string]string{}
	}
	b, err := json.Marshal(struct {
		Image   string            `json:"image"`
		Ports   []string          `json:"ports"`
		Env     map[string]string `json:"env"`
		Volumes []string          `json:"volumes"`
		Restart string            `json:"restart"`
	}{cfg.Image, ports, env, vols, cfg.Restart})
	if err != nil {
		panic("BUG: service config does not encode: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// nameSafe makes s usable in a container or volume name: runes outside
// [A-Za-z0-9_.-] become '-'.
func nameSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '-'
	}, s)
}

// ContainerName is edgeplat_<app>_<service>_<short hash>: unique per
// configuration, so the old and the new container of a blue-green swap
// exist side by side.
func ContainerName(app, service, hash string) string {
	return "edgeplat_" + nameSafe(app) + "_" + nameSafe(service) + "_" + hash[:12]
}

// VolumeName is the runtime's name of an app's named volume.
func VolumeName(app, volume string) string {
	return "edgeplat_" + nameSafe(app) + "_" + volume
}

// CheckVolumes checks the host paths of every service's volumes against
// the allowed roots; errors name the field under at (for example
// "apps[0]" or "" for an app body).
func CheckVolumes(at string, app control.TargetApp, roots []string) error {
	var errs []error
	for i, s := range app.Services {
		sp := fmt.Sprintf("services[%d]", i)
		if at != "" {
			sp = at + "." + sp
		}
		if err := CheckServiceVolumes(sp, s, roots); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckServiceVolumes is CheckVolumes for one service at sp.
func CheckServiceVolumes(sp string, s control.TargetService, roots []string) error {
	var errs []error
	for j, vs := range s.Config.Volumes {
		v, err := control.ParseVolume(vs)
		if err != nil || v.Named() {
			continue // the parser reported it; named volumes are the runtime's
		}
		if !underRoots(v.Source, roots) {
			field := fmt.Sprintf("config.volumes[%d]", j)
			if sp != "" {
				field = sp + "." + field
			}
			errs = append(errs, &control.PathError{Path: field,
				Msg: fmt.Sprintf("host path %s is outside the allowed roots %s (agent.apps_volume_roots)", v.Source, strings.Join(roots, ", "))})
		}
	}
	return errors.Join(errs...)
}

// underRoots reports whether the clean absolute path p is one of roots or
// lies below one. The check is lexical: a symbolic link under a root
// that points elsewhere is the device owner's choice.
func underRoots(p string, roots []string) bool {
	for _, r := range roots {
		r = path.Clean(r)
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// createOptions is the container of svc of app: labels, ports, volumes,
// restart policy, an init process.
func createOptions(agent string, app control.TargetApp, svc control.TargetService, hash string) (container.Config, container.HostConfig, error) {
	cfg := container.Config{
		Image: svc.ImageName,
		Labels: map[string]string{
			LabelAgent: agent, LabelAppID: strconv.Itoa(app.AppID), LabelAppName: app.AppName,
			LabelService: svc.ServiceName, LabelConfigHash: hash,
		},
		ExposedPorts: network.PortSet{},
	}
	for _, k := range slices.Sorted(maps.Keys(svc.Config.Environment)) {
		cfg.Env = append(cfg.Env, k+"="+svc.Config.Environment[k])
	}
	init := true
	hc := container.HostConfig{
		PortBindings:  network.PortMap{},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyMode(svc.Config.Restart)},
		Init:          &init,
	}
	for _, ps := range svc.Config.Ports {
		pm, err := control.ParsePort(ps)
		if err != nil {
			return cfg, hc, fmt.Errorf("port %q: %w", ps, err)
		}
		port, err := network.ParsePort(strconv.Itoa(pm.ContainerPort) + "/" + pm.Protocol)
		if err != nil {
			return cfg, hc, fmt.Errorf("port %q: %w", ps, err)
		}
		b := network.PortBinding{HostPort: strconv.Itoa(pm.HostPort)}
		if pm.HostIP != "" {
			if b.HostIP, err = netip.ParseAddr(pm.HostIP); err != nil {
				return cfg, hc, fmt.Errorf("port %q: %w", ps, err)
			}
		}
		cfg.ExposedPorts[port] = struct{}{}
		hc.PortBindings[port] = append(hc.PortBindings[port], b)
	}
	for _, vs := range svc.Config.Volumes {
		v, err := control.ParseVolume(vs)
		if err != nil {
			return cfg, hc, fmt.Errorf("volume %q: %w", vs, err)
		}
		m := mount.Mount{Type: mount.TypeBind, Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly}
		if v.Named() {
			m.Type, m.Source = mount.TypeVolume, VolumeName(app.AppName, v.Source)
		}
		hc.Mounts = append(hc.Mounts, m)
	}
	return cfg, hc, nil
}

// hostPorts are the protocol/port pairs a service binds on the host.
func hostPorts(svc control.TargetService) map[string]bool {
	out := map[string]bool{}
	for _, ps := range svc.Config.Ports {
		if pm, err := control.ParsePort(ps); err == nil {
			out[pm.Protocol+"/"+strconv.Itoa(pm.HostPort)] = true
		}
	}
	return out
}

// boundPorts are the protocol/port pairs a container's host config binds.
func boundPorts(hc *container.HostConfig) map[string]bool {
	out := map[string]bool{}
	if hc == nil {
		return out
	}
	for p, bs := range hc.PortBindings {
		for _, b := range bs {
			if b.HostPort != "" {
				out[string(p.Proto())+"/"+b.HostPort] = true
			}
		}
	}
	return out
}
