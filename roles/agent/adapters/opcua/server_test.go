package opcua

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// opcServer is a node-opcua server started from testdata/server.js.
type opcServer struct {
	t    *testing.T
	port int
	pki  string
	cmd  *exec.Cmd
	done chan struct{}
}

// nodeModules finds node-opcua the way the build machines install it.
func nodeModules(t *testing.T) string {
	t.Helper()
	_, mods := coretest.NodePackage(t, "node-opcua")
	return mods
}

// pkiDir is a PKI folder kept between runs: node-opcua's first start
// creates its certificates, which takes seconds.
func pkiDir(t *testing.T) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "edgeplat", "opcua-test-pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return t.TempDir()
	}
	return dir
}

func startServer(t *testing.T) *opcServer {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	s := &opcServer{t: t, port: coretest.FreePort(t), pki: pkiDir(t)}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *opcServer) url() string { return fmt.Sprintf("opc.tcp://127.0.0.1:%d", s.port) }

func (s *opcServer) start() {
	t := s.t
	t.Helper()
	mods := nodeModules(t)
	cmd := exec.Command("node", filepath.Join("testdata", "server.js"), fmt.Sprint(s.port), s.pki)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		coretest.Unavailable(t, "node-opcua", "node", err)
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY ") {
				close(ready)
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case <-ready:
	case <-done:
		t.Fatalf("node-opcua server exited before it was ready: %s", stderr.String())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("node-opcua server not ready after 60s: %s", stderr.String())
	}
	s.cmd, s.done = cmd, done
}

// stop kills the server the hard way, as a crash or power loss would.
func (s *opcServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
