package control

import (
	"strings"
	"testing"
)

func TestParsePort(t *testing.T) {
	tests := map[string]struct {
		in   string
		want PortMapping
		err  string
	}{
		"plain":          {in: "8080:80", want: PortMapping{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}},
		"udp":            {in: "5353:53/udp", want: PortMapping{HostPort: 5353, ContainerPort: 53, Protocol: "udp"}},
		"host address":   {in: "127.0.0.1:8080:80", want: PortMapping{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}},
		"one number":     {in: "80", err: "must be host:container"},
		"zero":           {in: "0:80", err: "host port"},
		"too big":        {in: "8080:70000", err: "container port"},
		"leading zero":   {in: "080:80", err: "host port"},
		"sign":           {in: "+80:80", err: "host port"},
		"bad protocol":   {in: "80:80/sctp", err: "tcp or udp"},
		"bad address":    {in: "host:80:80", err: "not an IP address"},
		"four parts":     {in: "1:2:3:4", err: "must be host:container"},
		"range":          {in: "8000-8010:80", err: "host port"},
		"empty":          {in: "", err: "must be host:container"},
		"spaces":         {in: " 80:80", err: "host port"},
		"ipv6 unbracket": {in: "::1:80:80", err: "must be host:container"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePort(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParsePort(%q) = %v, %v; want error with %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParsePort(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseVolume(t *testing.T) {
	tests := map[string]struct {
		in    string
		want  VolumeMount
		named bool
		err   string
	}{
		"named":          {in: "data:/var/lib/app", want: VolumeMount{Source: "data", Target: "/var/lib/app"}, named: true},
		"host read-only": {in: "/srv/app:/data:ro", want: VolumeMount{Source: "/srv/app", Target: "/data", ReadOnly: true}},
		"host rw":        {in: "/srv/app:/data:rw", want: VolumeMount{Source: "/srv/app", Target: "/data"}},
		"no target":      {in: "data", err: "source:target"},
		"bad mode":       {in: "data:/x:rx", err: "source:target"},
		"relative path":  {in: "./data:/x", err: "absolute host path or a volume name"},
		"dotdot":         {in: "/srv/../etc:/x", err: "must be clean"},
		"root target":    {in: "data:/", err: "not /"},
		"relative tgt":   {in: "data:x", err: "clean absolute path"},
		"trailing slash": {in: "/srv/app/:/x", err: "must be clean"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseVolume(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseVolume(%q) = %v, %v; want error with %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want || got.Named() != tt.named {
				t.Fatalf("ParseVolume(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseTargetStateApps(t *testing.T) {
	good := `{"schemaVersion":1,"apps":[{"appId":7,"appName":"logger","services":[
		{"serviceName":"main","imageName":"localhost/busybox:test","config":{"ports":["8080:80"],"environment":{"GREETING":"hi"},"volumes":["data:/data"]}},
		{"serviceName":"side","imageName":"localhost/busybox:test","state":"stopped","config":{"image":"localhost/busybox:test","restart":"always"}}]}]}`
	d, err := ParseTargetState([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Apps) != 1 || len(d.Apps[0].Services) != 2 {
		t.Fatalf("apps = %+v", d.Apps)
	}
	main, side := d.Apps[0].Services[0], d.Apps[0].Services[1]
	if main.State != ServiceRunning || main.Config.Image != "localhost/busybox:test" || main.Config.Restart != "unless-stopped" {
		t.Errorf("defaults not filled in: %+v", main)
	}
	if side.State != ServiceStopped || side.Config.Restart != "always" {
		t.Errorf("side = %+v", side)
	}
	// What was parsed encodes to a document that parses the same.
	b, err := d.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseTargetState(b)
	if err != nil {
		t.Fatalf("re-parse: %v\n%s", err, b)
	}
	if b2, _ := again.MarshalJSON(); string(b2) != string(b) {
		t.Errorf("re-encode differs:\n%s\n%s", b, b2)
	}
	// An empty list is kept: the agent then manages apps and runs none.
	if d, err := ParseTargetState([]byte(`{"schemaVersion":1,"apps":[]}`)); err != nil || d.Apps == nil {
		t.Errorf("empty apps: %v, %v", d.Apps, err)
	}

	svc := func(s string) string {
		return `{"schemaVersion":1,"apps":[{"appId":1,"appName":"a","services":[` + s + `]}]}`
	}
	bad := map[string]struct{ doc, want string }{
		"bad port":          {svc(`{"serviceName":"s","imageName":"i","config":{"ports":["80"]}}`), "apps[0].services[0].config.ports[0]: "},
		"duplicate service": {svc(`{"serviceName":"s","imageName":"i"},{"serviceName":"s","imageName":"i"}`), "apps[0].services[1].serviceName: service \"s\" is named already"},
		"port clash":        {svc(`{"serviceName":"s","imageName":"i","config":{"ports":["80:80"]}},{"serviceName":"t","imageName":"i","config":{"ports":["80:81"]}}`), "apps[0].services[1].config.ports[0]: host port 80/tcp is taken already"},
		"bad volume":        {svc(`{"serviceName":"s","imageName":"i","config":{"volumes":["../x:/x"]}}`), "apps[0].services[0].config.volumes[0]: "},
		"no image":          {svc(`{"serviceName":"s"}`), "apps[0].services[0].imageName: is required"},
		"image mismatch":    {svc(`{"serviceName":"s","imageName":"i","config":{"image":"j"}}`), "config.image: must equal imageName"},
		"bad state":         {svc(`{"serviceName":"s","imageName":"i","state":"paused"}`), "apps[0].services[0].state: must be"},
		"bad restart":       {svc(`{"serviceName":"s","imageName":"i","config":{"restart":"sometimes"}}`), "config.restart: must be one of"},
		"bad env key":       {svc(`{"serviceName":"s","imageName":"i","config":{"environment":{"1A":"x"}}}`), "config.environment.1A: is not a variable name"},
		"bad service name":  {svc(`{"serviceName":"Main Service","imageName":"i"}`), "services[0].serviceName: must be"},
		"unknown field":     {svc(`{"serviceName":"s","imageName":"i","cmd":"x"}`), "services[0].cmd: unknown field"},
		"unknown config":    {svc(`{"serviceName":"s","imageName":"i","config":{"privileged":true}}`), "config.privileged: unknown field"},
		"bad image":         {svc(`{"serviceName":"s","imageName":"bad image"}`), "imageName: \"bad image\" is not an image reference"},
		"app id":            {`{"schemaVersion":1,"apps":[{"appId":0,"appName":"a","services":[]}]}`, "apps[0].appId: must be 1.."},
		"duplicate app id":  {`{"schemaVersion":1,"apps":[{"appId":1,"appName":"a","services":[]},{"appId":1,"appName":"b","services":[]}]}`, "apps[1].appId: app id 1 is used already"},
		"duplicate app":     {`{"schemaVersion":1,"apps":[{"appId":1,"appName":"a","services":[]},{"appId":2,"appName":"a","services":[]}]}`, "apps[1].appName: an app \"a\" is named already"},
		"no services":       {`{"schemaVersion":1,"apps":[{"appId":1,"appName":"a"}]}`, "apps[0].services: is required"},
		"cross-app clash": {`{"schemaVersion":1,"apps":[{"appId":1,"appName":"a","services":[{"serviceName":"s","imageName":"i","config":{"ports":["80:80"]}}]},
			{"appId":2,"appName":"b","services":[{"serviceName":"s","imageName":"i","config":{"ports":["80:80"]}}]}]}`, "apps[1].services[0].config.ports[0]: host port 80/tcp is taken already by apps[0]"},
	}
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTargetState([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseServiceAlone(t *testing.T) {
	s, err := ParseService("", []byte(`{"serviceName":"web","imageName":"localhost/busybox:test"}`))
	if err != nil || s.State != ServiceRunning || s.Config.Image != "localhost/busybox:test" {
		t.Fatalf("%+v, %v", s, err)
	}
	if _, err := ParseService("", []byte(`{"serviceName":"web","imageName":"i","config":{"ports":["x"]}}`)); err == nil || !strings.HasPrefix(err.Error(), "config.ports[0]: ") {
		t.Fatalf("error %v names no field", err)
	}
}

func TestMergeApps(t *testing.T) {
	tmpl, err := ParseTargetStatePart([]byte(`{"schemaVersion":1,"apps":[{"appId":1,"appName":"shared","services":[{"serviceName":"s","imageName":"a"}]},
		{"appId":2,"appName":"other","services":[{"serviceName":"s","imageName":"a"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	own, err := ParseTargetStatePart([]byte(`{"schemaVersion":1,"apps":[{"appId":1,"appName":"shared","services":[{"serviceName":"s","imageName":"b"}]},
		{"appId":3,"appName":"mine","services":[{"serviceName":"s","imageName":"c"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := MergeTargetState(tmpl, own).Apps
	var names, images []string
	for _, a := range got {
		names = append(names, a.AppName)
		images = append(images, a.Services[0].ImageName)
	}
	if strings.Join(names, ",") != "shared,other,mine" || strings.Join(images, ",") != "b,a,c" {
		t.Fatalf("merged apps %v with images %v", names, images)
	}
}
