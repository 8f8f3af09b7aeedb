package coretest

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/edgeplat/edgeplat/config"
)

// PGServer is a private PostgreSQL server a test may stop and start, for
// outage tests that must not disturb the shared server other tests use.
type PGServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	run  []string // prefix that runs a command as the postgres user
}

// PrivatePostgres initialises and starts a throwaway PostgreSQL cluster on a
// free port. It needs the server binaries (Debian's postgresql package);
// without them the test is skipped, or failed under CI. Running as root, it
// runs the server as the postgres user, since PostgreSQL refuses root.
func PrivatePostgres(t testing.TB) *PGServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		Unavailable(t, "PostgreSQL server binaries", "/usr/lib/postgresql/*/bin", os.ErrNotExist)
	}
	sort.Strings(bins)
	s := &PGServer{t: t, bin: filepath.Dir(bins[len(bins)-1]), port: FreePort(t)}
	// Not t.TempDir: its parents are private to root, and the server runs
	// as postgres.
	dir, err := os.MkdirTemp("", "edgeplat-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { s.stop(); _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			Unavailable(t, "postgres system user", "/etc/passwd", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		s.run = []string{"runuser", "-u", "postgres", "--"}
	}
	s.cmd("initdb", "-D", filepath.Join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	s.Start()
	return s
}

func (s *PGServer) cmd(name string, args ...string) {
	s.t.Helper()
	argv := append(append([]string{}, s.run...), append([]string{filepath.Join(s.bin, name)}, args...)...)
	c := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		s.t.Fatalf("%s: %v\n%s", name, err, out.String())
	}
}

// Start starts the server and waits until it accepts connections.
func (s *PGServer) Start() {
	s.t.Helper()
	opts := "-p " + strconv.Itoa(s.port) + " -k " + s.dir + " -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
	s.cmd("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "start")
}

// Stop shuts the server down (fast mode: open connections are cut, as in a
// crash of the database host, but the data stays).
func (s *PGServer) Stop() {
	s.t.Helper()
	s.cmd("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w", "stop")
}

func (s *PGServer) stop() {
	argv := append(append([]string{}, s.run...), filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	_ = exec.Command(argv[0], argv[1:]...).Run()
}

// Config returns settings for the server's postgres database.
func (s *PGServer) Config() config.DB {
	return config.DB{Driver: "postgres", Host: "127.0.0.1", Port: s.port, Name: "postgres", User: "postgres",
		SSL: "disable", PoolSize: 10, StatementTimeoutMS: 30000}
}
