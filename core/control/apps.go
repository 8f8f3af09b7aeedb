package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Limits of the apps section (docs/apps.md).
const (
	maxTargetApps      = 100
	maxAppServices     = 20
	maxServicePorts    = 50
	maxServiceVolumes  = 50
	maxServiceEnv      = 200
	maxEnvValueBytes   = 32 << 10
	maxImageNameLen    = 255
	maxServiceNameLen  = 63
	maxAppID           = 1<<31 - 1
	defaultRestartRule = "unless-stopped"
)

// Service states of a target service; ServiceRunning is the default.
const (
	ServiceRunning = "running"
	ServiceStopped = "stopped"
)

// RestartPolicies are the container restart policies a service may name,
// as the Docker Engine API knows them.
var RestartPolicies = []string{"no", "always", "on-failure", "unless-stopped"}

// TargetApp is one application of the target state: a group of services,
// each one container, that the agent reconciles against the container
// runtime (docs/apps.md).
type TargetApp struct {
	AppID    int             `json:"appId"`
	AppName  string          `json:"appName"`
	Services []TargetService `json:"services"`
}

// TargetService is one service of an app: the container the agent keeps
// in State.
type TargetService struct {
	ServiceName string        `json:"serviceName"`
	ImageName   string        `json:"imageName"`
	State       string        `json:"state,omitempty"`
	Config      ServiceConfig `json:"config"`
}

// ServiceConfig is how a service's container is made. Image, when set,
// equals the service's ImageName (the parser fills it in otherwise).
type ServiceConfig struct {
	Image       string            `json:"image,omitempty"`
	Ports       []string          `json:"ports,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
	Volumes     []string          `json:"volumes,omitempty"`
	Restart     string            `json:"restart,omitempty"`
}

// PortMapping is one parsed "[ip:]host:container[/proto]" port.
type PortMapping struct {
	HostIP        string
	HostPort      int
	ContainerPort int
	Protocol      string // "tcp" or "udp"
}

// VolumeMount is one parsed "host:container[:ro]" volume. A Source that
// is not an absolute path is a named volume of the runtime.
type VolumeMount struct {
	Source   string
	Target   string
	ReadOnly bool
}

// Named reports whether the mount is a named volume, not a host path.
func (v VolumeMount) Named() bool { return !strings.HasPrefix(v.Source, "/") }

var (
	serviceNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	envKeyRe      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	volumeNameRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	// imageRe is a Docker image reference: [registry/]path[:tag][@digest],
	// loosely (the runtime has the last word); no spaces or control bytes.
	imageRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`)
)

// ParsePort parses a port mapping: "8080:80", "8080:80/udp" or
// "127.0.0.1:8080:80".
func ParsePort(s string) (PortMapping, error) {
	pm := PortMapping{Protocol: "tcp"}
	spec, proto, hasProto := strings.Cut(s, "/")
	if hasProto {
		if proto != "tcp" && proto != "udp" {
			return pm, fmt.Errorf("protocol must be tcp or udp, got %q", clip(proto))
		}
		pm.Protocol = proto
	}
	parts := strings.Split(spec, ":")
	switch len(parts) {
	case 2:
	case 3:
		if net.ParseIP(parts[0]) == nil {
			return pm, fmt.Errorf("host address %q is not an IP address", clip(parts[0]))
		}
		pm.HostIP = parts[0]
		parts = parts[1:]
	default:
		return pm, fmt.Errorf("%q must be host:container, host:container/udp or ip:host:container", clip(s))
	}
	var err error
	if pm.HostPort, err = portNumber(parts[0]); err != nil {
		return pm, fmt.Errorf("host port: %w", err)
	}
	if pm.ContainerPort, err = portNumber(parts[1]); err != nil {
		return pm, fmt.Errorf("container port: %w", err)
	}
	return pm, nil
}

func portNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strings.HasPrefix(s, "0") || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%q is not a port number 1..65535", clip(s))
	}
	return n, nil
}

// ParseVolume parses a volume: "data:/var/lib/app", "/srv/app:/data" or
// either with ":ro". Whether a host path is allowed is the agent's policy
// (docs/apps.md, "Volumes"), not the document's.
func ParseVolume(s string) (VolumeMount, error) {
	var v VolumeMount
	parts := strings.Split(s, ":")
	switch {
	case len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw"):
		v.ReadOnly = parts[2] == "ro"
	case len(parts) == 2:
	default:
		return v, fmt.Errorf("%q must be source:target or source:target:ro", clip(s))
	}
	v.Source, v.Target = parts[0], parts[1]
	if strings.HasPrefix(v.Source, "/") {
		if path.Clean(v.Source) != v.Source {
			return v, fmt.Errorf("host path %q must be clean (no .., //, trailing /)", clip(v.Source))
		}
	} else if !volumeNameRe.MatchString(v.Source) || len(v.Source) > 128 {
		return v, fmt.Errorf("source %q must be an absolute host path or a volume name ([A-Za-z0-9][A-Za-z0-9_.-]*)", clip(v.Source))
	}
	if !strings.HasPrefix(v.Target, "/") || path.Clean(v.Target) != v.Target || v.Target == "/" {
		return v, fmt.Errorf("target %q must be a clean absolute path in the container, not /", clip(v.Target))
	}
	return v, nil
}

// ParseApps reads an apps section on its own, as the agent's local routes
// take it; errors name paths under "apps".
func ParseApps(b []byte) ([]TargetApp, error) {
	p := &parser{}
	apps := p.apps("apps", b)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return apps, nil
}

// ParseService reads one service object at path (for example
// "services[0]" or "" for a body that is the service itself).
func ParseService(at string, b []byte) (TargetService, error) {
	p := &parser{}
	s, _ := p.service(at, b)
	if len(p.errs) > 0 {
		return TargetService{}, errors.Join(p.errs...)
	}
	return s, nil
}

func (p *parser) apps(at string, raw json.RawMessage) []TargetApp {
	items, ok := p.array(at, raw, maxTargetApps)
	if !ok {
		return nil
	}
	out := make([]TargetApp, 0, len(items))
	names := map[string]int{}
	ids := map[int]int{}
	hostPorts := map[string]string{}
	for i, it := range items {
		ap := fmt.Sprintf("%s[%d]", at, i)
		var a TargetApp
		var svcs []json.RawMessage
		okEntry := p.entry(ap, it, []field{{"appId", &a.AppID}, {"appName", &a.AppName}, {"services", &svcs}})
		p.name(ap+".appName", "an app", a.AppName, names)
		if _, dup := names[a.AppName]; a.AppName != "" && !dup {
			names[a.AppName] = i
		}
		switch j, dup := ids[a.AppID]; {
		case a.AppID < 1 || a.AppID > maxAppID:
			p.addf(ap+".appId", "must be 1..%d, got %d", maxAppID, a.AppID)
		case dup:
			p.addf(ap+".appId", "app id %d is used already at index %d", a.AppID, j)
		default:
			ids[a.AppID] = i
		}
		if svcs == nil && okEntry {
			p.addf(ap+".services", "is required (an array of services)")
		}
		if len(svcs) > maxAppServices {
			p.addf(ap+".services", "at most %d services, got %d", maxAppServices, len(svcs))
			svcs = nil
		}
		// Never nil: an app of no services re-encodes as [], not null.
		a.Services = make([]TargetService, 0, len(svcs))
		seen := map[string]int{}
		for j, sr := range svcs {
			sp := fmt.Sprintf("%s.services[%d]", ap, j)
			s, ok := p.service(sp, sr)
			if !ok {
				okEntry = false
				continue
			}
			if k, dup := seen[s.ServiceName]; dup {
				p.addf(sp+".serviceName", "service %q is named already at index %d", s.ServiceName, k)
				okEntry = false
			}
			seen[s.ServiceName] = j
			for k, port := range s.Config.Ports {
				pm, _ := ParsePort(port)
				key := pm.Protocol + "/" + pm.HostIP + ":" + strconv.Itoa(pm.HostPort)
				where := fmt.Sprintf("%s.config.ports[%d]", sp, k)
				if other, clash := hostPorts[key]; clash {
					p.addf(where, "host port %d/%s is taken already by %s", pm.HostPort, pm.Protocol, other)
					okEntry = false
				}
				hostPorts[key] = where
			}
			a.Services = append(a.Services, s)
		}
		if okEntry {
			out = append(out, a)
		}
	}
	return out
}

// service parses one service at path sp.
func (p *parser) service(sp string, raw json.RawMessage) (TargetService, bool) {
	var s TargetService
	var cfg json.RawMessage
	before := len(p.errs)
	p.entry(sp, raw, []field{{"serviceName", &s.ServiceName}, {"imageName", &s.ImageName}, {"state", &s.State}, {"config", &cfg}})
	dot := sp + "."
	if sp == "" {
		dot = ""
	}
	switch {
	case s.ServiceName == "":
		p.addf(dot+"serviceName", "is required")
	case len(s.ServiceName) > maxServiceNameLen || !serviceNameRe.MatchString(s.ServiceName):
		p.addf(dot+"serviceName", "must be 1..%d characters of a-z, 0-9, '_', '.', '-', starting with a letter or digit", maxServiceNameLen)
	}
	switch s.State {
	case "":
		s.State = ServiceRunning
	case ServiceRunning, ServiceStopped:
	default:
		p.addf(dot+"state", "must be %q or %q, got %q", ServiceRunning, ServiceStopped, clip(s.State))
	}
	if cfg != nil {
		p.entry(dot+"config", cfg, []field{{"image", &s.Config.Image}, {"ports", &s.Config.Ports},
			{"environment", &s.Config.Environment}, {"volumes", &s.Config.Volumes}, {"restart", &s.Config.Restart}})
	}
	if s.ImageName == "" {
		s.ImageName = s.Config.Image
	}
	switch {
	case s.ImageName == "":
		p.addf(dot+"imageName", "is required")
	case len(s.ImageName) > maxImageNameLen || !imageRe.MatchString(s.ImageName):
		p.addf(dot+"imageName", "%q is not an image reference", clip(s.ImageName))
	case s.Config.Image != "" && s.Config.Image != s.ImageName:
		p.addf(dot+"config.image", "must equal imageName %q when set, got %q", clip(s.ImageName), clip(s.Config.Image))
	}
	s.Config.Image = s.ImageName
	if len(s.Config.Ports) > maxServicePorts {
		p.addf(dot+"config.ports", "at most %d ports, got %d", maxServicePorts, len(s.Config.Ports))
	} else {
		seen := map[string]int{}
		for i, port := range s.Config.Ports {
			pm, err := ParsePort(port)
			if err != nil {
				p.addf(fmt.Sprintf("%sconfig.ports[%d]", dot, i), "%v", err)
				continue
			}
			key := pm.Protocol + "/" + pm.HostIP + ":" + strconv.Itoa(pm.HostPort)
			if j, dup := seen[key]; dup {
				p.addf(fmt.Sprintf("%sconfig.ports[%d]", dot, i), "host port %d/%s is mapped already at index %d", pm.HostPort, pm.Protocol, j)
			}
			seen[key] = i
		}
	}
	if len(s.Config.Environment) > maxServiceEnv {
		p.addf(dot+"config.environment", "at most %d variables, got %d", maxServiceEnv, len(s.Config.Environment))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Config.Environment)) {
		switch {
		case !envKeyRe.MatchString(k):
			p.addf(dot+"config.environment."+clip(k), "is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
		case len(s.Config.Environment[k]) > maxEnvValueBytes:
			p.addf(dot+"config.environment."+k, "value of %d bytes is over %d", len(s.Config.Environment[k]), maxEnvValueBytes)
		case strings.ContainsRune(s.Config.Environment[k], 0):
			p.addf(dot+"config.environment."+k, "must not contain NUL")
		}
	}
	if len(s.Config.Volumes) > maxServiceVolumes {
		p.addf(dot+"config.volumes", "at most %d volumes, got %d", maxServiceVolumes, len(s.Config.Volumes))
	} else {
		targets := map[string]int{}
		for i, vs := range s.Config.Volumes {
			v, err := ParseVolume(vs)
			if err != nil {
				p.addf(fmt.Sprintf("%sconfig.volumes[%d]", dot, i), "%v", err)
				continue
			}
			if j, dup := targets[v.Target]; dup {
				p.addf(fmt.Sprintf("%sconfig.volumes[%d]", dot, i), "target %s is mounted already at index %d", v.Target, j)
			}
			targets[v.Target] = i
		}
	}
	if s.Config.Restart == "" {
		s.Config.Restart = defaultRestartRule
	} else if !slices.Contains(RestartPolicies, s.Config.Restart) {
		p.addf(dot+"config.restart", "must be one of %s, got %q", strings.Join(RestartPolicies, ", "), clip(s.Config.Restart))
	}
	return s, len(p.errs) == before
}
