package cmd

import (
	"context"
	"crypto/rand"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

func TestDLQArgumentErrors(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no tenant", []string{"dlq", "list"}, "--tenant is required"},
		{"bad tenant", []string{"dlq", "replay", "--tenant", "acme"}, `--tenant must be a tenant UUID or 22-character id, got "acme"`},
		{"negative count", []string{"dlq", "list", "--tenant", "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a", "--count", "-1"}, "--count must be 0"},
		{"drop without a bound", []string{"dlq", "drop", "--tenant", "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a"}, "drop needs --count N or --all"},
		{"dry run of list", []string{"dlq", "list", "--tenant", "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a", "--dry-run"}, "unknown flag: --dry-run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

func TestDLQUnreachableStoreNamesTheSettings(t *testing.T) {
	clearEnv(t)
	t.Setenv("STREAMSTORE_HOST", "127.0.0.1")
	t.Setenv("STREAMSTORE_PORT", strconv.Itoa(coretest.FreePort(t)))
	code, _, stderr := run(t, "dlq", "list", "--tenant", "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a")
	if code != exitFailure || !strings.Contains(stderr, "STREAMSTORE_HOST, STREAMSTORE_PORT") {
		t.Errorf("exit %d, stderr %q; want %d naming STREAMSTORE_HOST and STREAMSTORE_PORT", code, stderr, exitFailure)
	}
}

// TestDLQListReplayDropIntegration runs the three subcommands on the
// machine's Redis with a tenant of its own: a dry run changes nothing,
// replay moves entries' data to the ingestion stream and out of the DLQ,
// drop removes the rest.
func TestDLQListReplayDropIntegration(t *testing.T) {
	addr := coretest.RedisAddr(t)
	clearEnv(t)
	host, port, _ := net.SplitHostPort(addr)
	t.Setenv("STREAMSTORE_HOST", host)
	t.Setenv("STREAMSTORE_PORT", port)
	store, err := redisstore.New(redisstore.Options{Addrs: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var u codec.UUID
	_, _ = rand.Read(u[:])
	tenant := codec.EncodeID(u)
	ctx := context.Background()
	dlq, ingestion := telemetry.DLQStream(tenant), telemetry.IngestionStream(tenant)
	t.Cleanup(func() { _, _ = store.Delete(context.Background(), dlq, ingestion) })
	const n = 5
	for i := range n {
		if _, err := store.Add(ctx, dlq, map[string]string{"originalId": "1-" + strconv.Itoa(i), "stream": ingestion,
			"data": `{"msg":` + strconv.Itoa(i) + `}`, "reason": "insert failed\nafter 4 attempts", "failedAt": "2026-11-27T12:00:00Z"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	length := func(stream string) int64 {
		t.Helper()
		l, err := store.Len(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	code, out, stderr := run(t, "dlq", "list", "--tenant", u.String())
	if code != 0 || strings.Count(out, "insert failed after 4 attempts") != n || !strings.Contains(stderr, "5 dead letters listed") {
		t.Fatalf("list: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	code, out, stderr = run(t, "dlq", "replay", "--tenant", tenant, "--dry-run")
	if code != 0 || !strings.Contains(out, "would replay 5 dead letters") || length(dlq) != n || length(ingestion) != 0 {
		t.Fatalf("dry run: exit %d, stdout %q, stderr %q, dlq %d, ingestion %d", code, out, stderr, length(dlq), length(ingestion))
	}

	code, out, stderr = run(t, "dlq", "replay", "--tenant", tenant, "--count", "2")
	if code != 0 || !strings.Contains(stderr, "replayed 2 of 2 dead letters") || length(dlq) != n-2 || length(ingestion) != 2 {
		t.Fatalf("replay: exit %d, stdout %q, stderr %q, dlq %d, ingestion %d", code, out, stderr, length(dlq), length(ingestion))
	}
	got, err := store.Range(ctx, ingestion, "-", "+", 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, en := range got {
		if want := `{"msg":` + strconv.Itoa(i) + `}`; en.Values[telemetry.StreamField] != want || len(en.Values) != 1 {
			t.Errorf("replayed entry %d = %v, want only data %s", i, en.Values, want)
		}
	}

	code, out, _ = run(t, "dlq", "drop", "--tenant", tenant, "--all", "--dry-run")
	if code != 0 || !strings.Contains(out, "would drop 3 dead letters") || length(dlq) != n-2 {
		t.Fatalf("drop dry run: exit %d, stdout %q, dlq %d", code, out, length(dlq))
	}
	code, out, _ = run(t, "dlq", "drop", "--tenant", tenant, "--all")
	if code != 0 || !strings.Contains(out, "dropped 3 dead letters") || length(dlq) != 0 {
		t.Fatalf("drop: exit %d, stdout %q, dlq %d", code, out, length(dlq))
	}
	code, out, _ = run(t, "dlq", "list", "--tenant", tenant)
	if code != 0 || !strings.Contains(out, "no dead letters") {
		t.Fatalf("list of an empty DLQ: exit %d, stdout %q", code, out)
	}
}
