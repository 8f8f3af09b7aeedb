package apps

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/control"
)

func TestConfigHash(t *testing.T) {
	base := control.ServiceConfig{Image: "a:1", Ports: []string{"80:80", "81:81"}, Environment: map[string]string{"A": "1"}, Restart: "always"}
	tests := []struct {
		name string
		edit func(*control.ServiceConfig)
		same bool
	}{
		{"port order", func(c *control.ServiceConfig) { c.Ports = []string{"81:81", "80:80"} }, true},
		{"nil and empty env", func(c *control.ServiceConfig) { c.Environment = nil }, false},
		{"image", func(c *control.ServiceConfig) { c.Image = "a:2" }, false},
		{"env value", func(c *control.ServiceConfig) { c.Environment = map[string]string{"A": "2"} }, false},
		{"volumes", func(c *control.ServiceConfig) { c.Volumes = []string{"d:/d"} }, false},
		{"restart", func(c *control.ServiceConfig) { c.Restart = "no" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.edit(&c)
			if got := ConfigHash(c) == ConfigHash(base); got != tt.same {
				t.Fatalf("same hash = %v, want %v", got, tt.same)
			}
		})
	}
	if n := ContainerName("my app/x", "web", ConfigHash(base)); !strings.HasPrefix(n, "edgeplat_my-app-x_web_") || len(n) != len("edgeplat_my-app-x_web_")+12 {
		t.Fatalf("container name %q", n)
	}
}

func TestCheckVolumes(t *testing.T) {
	roots := []string{"/var/lib/edgeplat/agent/volumes", "/srv/"}
	tests := []struct {
		vol  string
		want string
	}{
		{"data:/data", ""},
		{"/srv/app:/data", ""},
		{"/srv:/data", ""},
		{"/var/lib/edgeplat/agent/volumes/x:/x:ro", ""},
		{"/etc:/etc2", "services[0].config.volumes[0]: host path /etc is outside the allowed roots"},
		{"/srvx/a:/a", "host path /srvx/a is outside"},
	}
	for _, tt := range tests {
		t.Run(tt.vol, func(t *testing.T) {
			app := control.TargetApp{AppID: 1, AppName: "a", Services: []control.TargetService{{ServiceName: "s", Config: control.ServiceConfig{Volumes: []string{tt.vol}}}}}
			err := CheckVolumes("", app, roots)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestRuntimeConfigNormalize(t *testing.T) {
	tests := []struct {
		in      RuntimeConfig
		address string
		err     string
	}{
		{RuntimeConfig{}, "unix:///var/run/docker.sock", ""},
		{RuntimeConfig{Type: "socket", SocketPath: "/run/podman/podman.sock"}, "unix:///run/podman/podman.sock", ""},
		{RuntimeConfig{Type: "socket", SocketPath: "run.sock"}, "", "socketPath:"},
		{RuntimeConfig{Type: "tcp", Host: "10.0.0.2"}, "tcp://10.0.0.2:2375", ""},
		{RuntimeConfig{Type: "tcp+tls", Host: "h"}, "tcp://h:2376", ""},
		{RuntimeConfig{Type: "tcp"}, "", "host: is required"},
		{RuntimeConfig{Type: "tcp", Host: "h", Port: 70000}, "", "port: must be 1..65535"},
		{RuntimeConfig{Type: "tcp+tls", Host: "h", CA: "junk"}, "", "ca: no PEM certificate"},
		{RuntimeConfig{Type: "tcp+tls", Host: "h", Cert: "x"}, "", "cert: cert and key go together"},
		{RuntimeConfig{Type: "ssh"}, "", "type: must be"},
	}
	for _, tt := range tests {
		t.Run(tt.in.Type+tt.in.Host+tt.in.SocketPath, func(t *testing.T) {
			got, err := tt.in.Normalize()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got.Address() != tt.address {
				t.Fatalf("got %s, %v; want %s", got.Address(), err, tt.address)
			}
		})
	}
	for in, want := range map[string]string{"unix:///run/podman/podman.sock": "unix:///run/podman/podman.sock", "tcp://1.2.3.4:2375": "tcp://1.2.3.4:2375"} {
		c, err := ParseDockerHost(in)
		if err != nil || c.Address() != want {
			t.Fatalf("ParseDockerHost(%q) = %+v, %v", in, c, err)
		}
	}
	if _, err := ParseDockerHost("ssh://h"); err == nil {
		t.Fatal("ssh host accepted")
	}
}

func frame(stream byte, s string) []byte {
	h := make([]byte, 8)
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(s)))
	return append(h, s...)
}

func TestDemux(t *testing.T) {
	var in bytes.Buffer
	in.Write(frame(1, "one\ntw"))
	in.Write(frame(2, "err\n"))
	in.Write(frame(1, "o\nlast"))
	var got []string
	err := demux(&in, func(l LogLine) error {
		got = append(got, l.Stream+":"+l.Msg)
		return nil
	})
	want := []string{"stdout:one", "stderr:err", "stdout:two", "stdout:last"}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("demux = %q, %v; want %q", got, err, want)
	}
	stop := errors.New("enough")
	in.Reset()
	in.Write(frame(1, "a\nb\n"))
	if err := demux(&in, func(LogLine) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("emit error not returned: %v", err)
	}
}
