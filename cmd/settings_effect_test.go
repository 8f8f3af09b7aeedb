package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore/memory"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
)

// runStuckRole runs, through runRole as every role command does, a role
// whose one service ignores cancellation, with env set; it cancels the run
// once the service runs and returns the command's error and stderr.
func runStuckRole(t *testing.T, env map[string]string) (stderr string, err error) {
	t.Helper()
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	running, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	spec := roleSpec{role: config.RoleAgent, build: func(*config.Config, *rt.Runtime) ([]lifecycle.Service, error) {
		return []lifecycle.Service{&lifecycle.Funcs{ServiceName: "stuck", RunFunc: func(context.Context) error {
			close(running)
			<-release
			return nil
		}}}, nil
	}}
	root := newRootCmd()
	root.AddCommand(roleCommand("stuck", "", "", spec, nil))
	root.SetArgs([]string{"stuck"})
	var errb syncBuffer
	root.SetOut(io.Discard)
	root.SetErr(&errb)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("the role ended before its service ran: %v\n%s", err, errb.String())
	}
	cancel()
	err = <-done
	return errb.String(), err
}

// TestLogAndShutdownSettings: EDGEPLAT_LOG_LEVEL and EDGEPLAT_LOG_FORMAT
// shape what a role logs, and EDGEPLAT_LIFECYCLE_SHUTDOWN_GRACE is how long
// it waits for a service that does not stop.
func TestLogAndShutdownSettings(t *testing.T) {
	t.Run("debug, json, 1.5s", func(t *testing.T) {
		stderr, err := runStuckRole(t, map[string]string{"EDGEPLAT_LOG_LEVEL": "debug", "EDGEPLAT_LOG_FORMAT": "json",
			"EDGEPLAT_LIFECYCLE_SHUTDOWN_GRACE": "1500ms"})
		if err == nil || !strings.Contains(err.Error(), "after the 1.5s grace period") {
			t.Errorf("run = %v, want the 1.5s grace period to run out", err)
		}
		var sawDebug bool
		for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("EDGEPLAT_LOG_FORMAT=json, but a line is not JSON: %q", line)
			}
			sawDebug = sawDebug || rec["level"] == "DEBUG"
		}
		if !sawDebug {
			t.Errorf("EDGEPLAT_LOG_LEVEL=debug logged no debug record:\n%s", stderr)
		}
	})
	t.Run("warn, text, 1s", func(t *testing.T) {
		stderr, err := runStuckRole(t, map[string]string{"EDGEPLAT_LOG_LEVEL": "warn", "EDGEPLAT_LOG_FORMAT": "text",
			"EDGEPLAT_LIFECYCLE_SHUTDOWN_GRACE": "1s"})
		if err == nil || !strings.Contains(err.Error(), "after the 1s grace period") {
			t.Errorf("run = %v, want the 1s grace period to run out", err)
		}
		if strings.Contains(stderr, "level=INFO") || strings.Contains(stderr, "level=DEBUG") || strings.HasPrefix(stderr, "{") {
			t.Errorf("EDGEPLAT_LOG_LEVEL=warn with text format logged:\n%s", stderr)
		}
		if !strings.Contains(stderr, "level=ERROR") {
			t.Errorf("the failed stop is not logged as text:\n%s", stderr)
		}
	})
}

// TestStreamStoreDriverSetting: EDGEPLAT_STREAMSTORE_DRIVER picks the
// stream store the roles share.
func TestStreamStoreDriverSetting(t *testing.T) {
	for driver, want := range map[string]string{"memory": fmt.Sprintf("%T", &memory.Store{}), "redis": fmt.Sprintf("%T", &redisstore.Store{})} {
		t.Run(driver, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("EDGEPLAT_STREAMSTORE_DRIVER", driver)
			cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
			if err != nil {
				t.Fatal(err)
			}
			b, err := newBackends(cfg, &rt.Runtime{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer b.store.Close()
			if got := fmt.Sprintf("%T", b.store); got != want {
				t.Errorf("store = %s, want %s", got, want)
			}
		})
	}
}

// TestAllInOneAutoProvisionSetting: EDGEPLAT_ALL_IN_ONE_AUTO_PROVISION=false
// leaves the provisioning service out of all-in-one.
func TestAllInOneAutoProvisionSetting(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(strconv.FormatBool(on), func(t *testing.T) {
			clearEnv(t)
			t.Setenv("EDGEPLAT_ALL_IN_ONE_DATA_DIR", t.TempDir())
			t.Setenv("EDGEPLAT_ALL_IN_ONE_AUTO_PROVISION", strconv.FormatBool(on))
			cfg, err := config.Load(config.LoadOptions{Role: config.RoleAllInOne})
			if err != nil {
				t.Fatal(err)
			}
			r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
			services, err := buildAllInOne(cfg, r, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			has := false
			for _, s := range services {
				has = has || s.Name() == "agent-auto-provision"
			}
			if has != on {
				t.Errorf("auto_provision %v: provisioning service present = %v", on, has)
			}
		})
	}
}

// TestAllInOneDataDirAndBrokerAddress: all-in-one keeps its database in
// EDGEPLAT_ALL_IN_ONE_DATA_DIR, and its broker listens on
// EDGEPLAT_ALL_IN_ONE_MQTT_BIND and _MQTT_PORT (where its own API's client
// finds it).
func TestAllInOneDataDirAndBrokerAddress(t *testing.T) {
	if err := coretest.Dialable("127.0.0.2:9"); err != nil && strings.Contains(err.Error(), "assign requested address") {
		t.Skip("127.0.0.2 is not a loopback address here")
	}
	clearEnv(t)
	p := freeAIOPorts(t)
	dataDir := filepath.Join(t.TempDir(), "plant")
	t.Setenv("EDGEPLAT_ALL_IN_ONE_DATA_DIR", dataDir)
	t.Setenv("EDGEPLAT_ALL_IN_ONE_MQTT_PORT", strconv.Itoa(p.mqtt))
	t.Setenv("EDGEPLAT_ALL_IN_ONE_MQTT_BIND", "127.0.0.2")
	ctx, cancel := context.WithCancel(t.Context())
	exit := make(chan int, 1)
	var stderr syncBuffer
	go func() {
		exit <- execute(ctx, []string{"all-in-one", "--log-format", "json", "--auto-provision=false", "--api-port", strconv.Itoa(p.api),
			"--ingest-port", strconv.Itoa(p.ingest), "--agent-port", strconv.Itoa(p.agent)}, io.Discard, &stderr)
	}()
	defer func() {
		cancel()
		if code := <-exit; code != 0 {
			t.Errorf("all-in-one exited %d:\n%s", code, stderr.String())
		}
	}()
	var health string
	coretest.Eventually(t, 30*time.Second, "all-in-one's /health to answer 200 with mqtt up", func() bool {
		code, body, err := get(fmt.Sprintf("http://127.0.0.1:%d/health", p.api))
		health = body
		return err == nil && code == http.StatusOK && strings.Contains(body, `"mqtt":"up"`)
	})
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(p.mqtt))); err != nil {
		t.Errorf("broker not on 127.0.0.2:%d: %v (health %s)", p.mqtt, err, health)
	} else {
		c.Close()
	}
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.mqtt))); err == nil {
		c.Close()
		t.Errorf("broker answers on 127.0.0.1:%d although bound to 127.0.0.2", p.mqtt)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "edgeplat.db")); err != nil {
		t.Errorf("database not under the data directory: %v", err)
	}
}
