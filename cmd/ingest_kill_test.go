package cmd

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestIngestSurvivesSIGKILLIntegration kills an `edgeplat ingest` process
// with SIGKILL in the middle of its work, starts a new one, and checks that
// every message became rows exactly once.
func TestIngestSurvivesSIGKILLIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	dbc := coretest.Postgres(t)
	// Private: this test's ingest processes ingest every tenant stream
	// they find, other tests' and other runs' included.
	redisAddr := coretest.PrivateRedis(t).Addr()
	bin := buildBinary(t)
	ctx := context.Background()

	host, port, _ := net.SplitHostPort(redisAddr)
	store, err := redisstore.New(redisstore.Options{Addrs: []string{redisAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var u codec.UUID
	_, _ = rand.Read(u[:])
	tenant := codec.EncodeID(u)
	stream := telemetry.IngestionStream(tenant)
	defer store.Delete(ctx, stream, telemetry.DLQStream(tenant))

	const messages, readings = 4000, 10
	base := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for start := 0; start < messages; start += 500 {
		var batch []map[string]string
		for i := start; i < start+500; i++ {
			m := telemetry.Message{AgentUUID: "0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11", DeviceName: "dev" + strconv.Itoa(i%20),
				Protocol: "modbus", Timestamp: telemetry.TimestampOf(base.Add(time.Duration(i) * time.Millisecond))}
			for r := range readings {
				v := float64(i + r)
				m.Readings = append(m.Readings, telemetry.Reading{Name: "r" + strconv.Itoa(r), Value: &v})
			}
			b, _ := json.Marshal(m)
			batch = append(batch, map[string]string{telemetry.StreamField: string(b)})
		}
		if _, err := store.AddBatch(ctx, stream, batch, 0); err != nil {
			t.Fatal(err)
		}
	}

	env := append(os.Environ(),
		"DB_HOST="+dbc.Host, "DB_PORT="+strconv.Itoa(dbc.Port), "DB_NAME="+dbc.Name, "DB_USER="+dbc.User, "DB_SSL=disable",
		"STREAMSTORE_HOST="+host, "STREAMSTORE_PORT="+port,
		"INGESTION_PROFILE=streaming", "WORKER_COUNT=2", "BATCH_SIZE=50", "RECLAIM_IDLE_MS=1000",
		"DISK_SPOOL_ENABLED=false", "EDGEPLAT_LOG_FORMAT=json")
	start := func(logName string) *exec.Cmd {
		c := exec.Command(bin, "ingest", "--port", strconv.Itoa(coretest.FreePort(t)))
		c.Env = env
		path := filepath.Join(t.TempDir(), logName)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		c.Stdout, c.Stderr = f, f
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Process.Kill()
			_, _ = c.Process.Wait()
			f.Close()
			if t.Failed() {
				// A failure here is about what the processes did: show it.
				if b, err := os.ReadFile(path); err == nil {
					t.Logf("%s (last 4 KiB):\n%s", logName, b[max(0, len(b)-4096):])
				}
			}
		})
		return c
	}

	d, err := db.Open(ctx, dbc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	count := func() int64 {
		var n int64
		// The table appears once the first process has migrated.
		if err := d.SQL().QueryRowContext(ctx, `SELECT count(*) FROM readings WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
			return -1
		}
		return n
	}

	first := start("first.log")
	coretest.Eventually(t, 60*time.Second, "the first process to write some rows", func() bool { return count() > 0 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()
	killedAt := count()
	if killedAt >= messages*readings {
		t.Fatalf("the first process finished everything (%d rows) before it was killed; the test proves nothing", killedAt)
	}
	g, err := store.Group(ctx, stream, telemetry.WriterGroup(tenant))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed with %d of %d rows written, %d entries pending", killedAt, messages*readings, g.Pending)

	second := start("second.log")
	secondAt, lastLog := time.Now(), time.Time{}
	coretest.Eventually(t, 120*time.Second, "every message to become rows", func() bool {
		g, err := store.Group(ctx, stream, telemetry.WriterGroup(tenant))
		done := err == nil && g.Pending == 0 && count() == messages*readings
		if !done && time.Since(secondAt) > 110*time.Second && time.Since(lastLog) > 2*time.Second {
			lastLog = time.Now()
			t.Logf("still waiting: group %+v (err %v), %d rows", g, err, count())
		}
		return done
	})
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.Wait(); err != nil {
		t.Errorf("second process after SIGTERM: %v", err)
	}
	if n := count(); n != messages*readings {
		t.Errorf("rows = %d, want exactly %d", n, messages*readings)
	}
	if n, _ := store.Len(ctx, telemetry.DLQStream(tenant)); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
}

// buildBinary builds edgeplat once per test binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "edgeplat")
	c := exec.Command("go", "build", "-o", bin, "..")
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("build edgeplat: %v\n%s", err, out)
	}
	return bin
}
