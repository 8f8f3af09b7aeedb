package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/breaker"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// readHookStore is the in-process store with a hook after each ReadGroup,
// so a test can act between a worker's reads.
type readHookStore struct {
	streamstore.Store
	reads     atomic.Int64
	afterRead func(n int64)
}

func (s *readHookStore) ReadGroup(ctx context.Context, stream, group, consumer string, count int, block time.Duration) ([]streamstore.Entry, error) {
	out, err := s.Store.ReadGroup(ctx, stream, group, consumer, count, block)
	n := s.reads.Add(1)
	if s.afterRead != nil {
		s.afterRead(n)
	}
	return out, err
}

func addEntries(t *testing.T, st streamstore.Store, stream string, n int) {
	t.Helper()
	batch := make([]map[string]string, n)
	for i := range batch {
		batch[i] = map[string]string{telemetry.StreamField: strconv.Itoa(i)}
	}
	if _, err := st.AddBatch(context.Background(), stream, batch, 0); err != nil {
		t.Fatal(err)
	}
}

// TestReadBatchSettings: BATCH_SIZE caps a read, and FLUSH_INTERVAL_MS is
// whether a worker waits for more entries to fill a batch (not in
// READINGS_BULK_INSERT_MODE=realtime).
func TestReadBatchSettings(t *testing.T) {
	tests := []struct {
		name string
		in   config.Ingest
		// 3 entries wait; 4 more arrive right after the first read.
		want int
	}{
		{"flush interval 0 takes what is there", config.Ingest{BatchSize: 7, FlushIntervalMS: 0, InsertMode: "copy"}, 3},
		{"flush interval 60s waits to fill the batch", config.Ingest{BatchSize: 7, FlushIntervalMS: 60000, InsertMode: "copy"}, 7},
		{"batch size 5 with flush interval 60s", config.Ingest{BatchSize: 5, FlushIntervalMS: 60000, InsertMode: "copy"}, 5},
		{"realtime mode does not wait", config.Ingest{BatchSize: 7, FlushIntervalMS: 60000, InsertMode: "realtime"}, 3},
		{"batch size 2", config.Ingest{BatchSize: 2, FlushIntervalMS: 0, InsertMode: "copy"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem, err := memory.New(memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			tenant := randomID(t)
			stream, group := telemetry.IngestionStream(tenant), telemetry.WriterGroup(tenant)
			if err := mem.EnsureGroup(t.Context(), stream, group, "0"); err != nil {
				t.Fatal(err)
			}
			addEntries(t, mem, stream, 3)
			st := &readHookStore{Store: mem}
			st.afterRead = func(n int64) {
				if n == 1 {
					addEntries(t, mem, stream, 4)
				}
			}
			e := &engine{cfg: tt.in, store: st}
			if got := len(e.readBatch(t.Context(), stream, "c1", 0)); got != tt.want {
				t.Errorf("Ingest %+v: batch of %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

// TestBackpressureSleepSetting: while the pool is saturated, a worker
// waits DB_BACKPRESSURE_SLEEP_MS before each read. Time is synctest's, so
// the test waits for nothing.
func TestBackpressureSleepSetting(t *testing.T) {
	for _, tt := range []struct {
		sleepMS int
		// reads by then
		at   time.Duration
		want bool
	}{
		{60000, 59 * time.Second, false},
		{60000, 61 * time.Second, true},
		{250, time.Second, true},
	} {
		t.Run(fmt.Sprintf("%dms by %s", tt.sleepMS, tt.at), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem, err := memory.New(memory.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer mem.Close()
				tenant := randomID(t)
				stream := telemetry.IngestionStream(tenant)
				if err := mem.EnsureGroup(context.Background(), stream, telemetry.WriterGroup(tenant), "0"); err != nil {
					t.Fatal(err)
				}
				b, err := breaker.New(breaker.Options{})
				if err != nil {
					t.Fatal(err)
				}
				st := &readHookStore{Store: mem}
				e := &engine{cfg: config.Ingest{BatchSize: 10, FlushIntervalMS: 100, DBBackpressureSleepMS: tt.sleepMS},
					store: st, breaker: b, streams: []string{stream}, wake: make(chan struct{}), bufs: newBatchPool(1)}
				e.saturated.Store(true)
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Go(func() { e.work(ctx, "c1", 0) })
				time.Sleep(tt.at)
				synctest.Wait()
				if got := st.reads.Load() > 0; got != tt.want {
					t.Errorf("DB_BACKPRESSURE_SLEEP_MS=%d: read by %s = %v, want %v", tt.sleepMS, tt.at, got, tt.want)
				}
				cancel()
				wg.Wait()
			})
		})
	}
}

// TestSaturationWatermarkSettingIntegration: the pool counts as saturated
// (workers back off) above DB_SATURATION_HIGH_WATERMARK_PCT.
func TestSaturationWatermarkSettingIntegration(t *testing.T) {
	dbc := coretest.Postgres(t)
	dbc.PoolSize = 4
	mem, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dbc, mem)
	// Three of four connections in use: 75 %.
	for range 3 {
		c, err := h.db.Pool().Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	for _, tt := range []struct {
		pct  int
		want bool
	}{{50, true}, {80, false}} {
		h.cfg.Ingest.DBSaturationHighWatermarkPct = tt.pct
		// No scaling in this test.
		h.cfg.Ingest.Autoscale.MinWorkers, h.cfg.Ingest.Autoscale.MaxWorkers = 0, 256
		h.rt.Metrics = metrics.NewRegistry() // each engine registers its metrics
		e := h.startedEngine()
		e.sampleAndScale(t.Context())
		if got := e.saturated.Load(); got != tt.want {
			t.Errorf("pool at 75%%, watermark %d%%: saturated = %v, want %v", tt.pct, got, tt.want)
		}
	}
}

func testRows(n int) []telemetry.Row {
	rows := make([]telemetry.Row, n)
	t0 := time.Now().Truncate(time.Second)
	for i := range rows {
		v := float64(i)
		rows[i] = telemetry.Row{Time: t0.Add(time.Duration(i) * time.Millisecond), AgentUUID: codec.UUID{1}, MetricName: "press.r" + strconv.Itoa(i),
			Value: &v, Protocol: "modbus", Quality: "GOOD", TenantID: "t"}
	}
	return rows
}

// TestWriterSettingsIntegration: READINGS_BULK_INSERT_MODE and
// READINGS_COPY_MIN_ROWS choose between COPY and INSERT, and
// READINGS_REALTIME_ROWS_PER_INSERT sizes the INSERT statements: the
// writer's statement cache shows which ran.
func TestWriterSettingsIntegration(t *testing.T) {
	dbc := coretest.Postgres(t)
	mem, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dbc, mem)
	tests := []struct {
		name string
		in   config.Ingest
		rows int
		// statement sizes used; none for COPY
		want []int
	}{
		{"copy from 5 rows", config.Ingest{InsertMode: "copy", CopyMinRows: 5, RealtimeRowsPerInsert: 10}, 6, nil},
		{"copy from 1000 rows", config.Ingest{InsertMode: "copy", CopyMinRows: 1000, RealtimeRowsPerInsert: 10}, 6, []int{6}},
		{"insert mode", config.Ingest{InsertMode: "insert", CopyMinRows: 5, RealtimeRowsPerInsert: 10}, 6, []int{6}},
		{"2 rows per insert", config.Ingest{InsertMode: "insert", CopyMinRows: 5, RealtimeRowsPerInsert: 2}, 5, []int{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWriter(h.db, tt.in.InsertMode, tt.in.CopyMinRows, tt.in.RealtimeRowsPerInsert).(*pgWriter)
			if _, err := w.Write(t.Context(), testRows(tt.rows)); err != nil {
				t.Fatal(err)
			}
			var got []int
			for n := range w.stmts {
				got = append(got, n)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("statements of %v rows, want %v", got, tt.want)
			}
		})
	}
}

// TestRealtimeMaxRowsSetting: in realtime mode a write commits at most
// READINGS_REALTIME_MAX_ROWS rows at a time.
func TestRealtimeMaxRowsSetting(t *testing.T) {
	mem, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, coretest.SQLite(t), mem)
	for _, tt := range []struct{ maxRows, want int }{{2, 3}, {100, 1}} {
		h.cfg.Ingest.InsertMode = "realtime"
		h.cfg.Ingest.RealtimeMaxRows = tt.maxRows
		h.rt.Metrics = metrics.NewRegistry() // each engine registers its metrics
		e := h.startedEngine()
		if err := e.write(t.Context(), testRows(5), false); err != nil {
			t.Fatal(err)
		}
		var m dto.Metric
		if err := e.m.insertDuration.Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetHistogram().GetSampleCount(); got != uint64(tt.want) {
			t.Errorf("RealtimeMaxRows %d: 5 rows in %d writes, want %d", tt.maxRows, got, tt.want)
		}
	}
}

// TestWorkerCountSetting: the engine starts WORKER_COUNT workers.
func TestWorkerCountSetting(t *testing.T) {
	mem, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, coretest.SQLite(t), mem)
	h.cfg.Ingest.WorkerCount = 3
	// Nothing for the autoscaler to change.
	h.cfg.Ingest.Autoscale.MinWorkers, h.cfg.Ingest.Autoscale.MaxWorkers = 1, 16
	h.cfg.Ingest.Autoscale.ScaleDownStableChecks = 10000
	h.start()
	coretest.Eventually(t, 10*time.Second, "3 workers", func() bool { return h.eng.workerCount() == 3 })
}

// TestListenSettings: ingest serves /health and /metrics on ingest.port
// (PORT) at ingest.bind.
func TestListenSettings(t *testing.T) {
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleIngest})
	if err != nil {
		t.Fatal(err)
	}
	port := coretest.FreePort(t)
	cfg.Ingest.Port, cfg.Ingest.Bind = port, "127.0.0.1"
	r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	svcs, err := New(cfg, r, rt.Backends{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := coretest.Listen(t, svcs), "127.0.0.1:"+strconv.Itoa(port); got != want {
		t.Errorf("listening on %s, want %s", got, want)
	}
}

// TestAutoscaleSettings: each autoscaler setting, changed from its plain
// default (INGESTION_PROFILE=none), changes a decision the default makes.
func TestAutoscaleSettings(t *testing.T) {
	calm := signals{lagMS: 100, poolPct: 10}
	pressed := signals{lagMS: 6000}
	tests := []struct {
		env, val string
		steps    []signals
		every    time.Duration
		workers  int
		def, set []int
	}{
		{"AUTOSCALE_LAG_SCALE_UP_MS", "2000", []signals{{lagMS: 3000}}, time.Second, 2, []int{0}, []int{1}},
		{"AUTOSCALE_MAX_WORKERS", "5", []signals{pressed}, time.Second, 5, []int{1}, []int{0}},
		{"AUTOSCALE_DB_BLOCK_PCT", "60", []signals{{lagMS: 6000, poolPct: 70}}, time.Second, 2, []int{1}, []int{0}},
		{"AUTOSCALE_COOLDOWN_MS", "500", []signals{pressed, pressed}, time.Second, 2, []int{1, 0}, []int{1, 1}},
		{"AUTOSCALE_LAG_CRITICAL_MS", "7000", []signals{{lagMS: 8000}, {lagMS: 8000}}, time.Second, 2, []int{1, 0}, []int{1, 1}},
		{"AUTOSCALE_LAG_TARGET_MS", "200", []signals{{lagMS: 300, poolPct: 10}, {lagMS: 300, poolPct: 10}, {lagMS: 300, poolPct: 10},
			{lagMS: 300, poolPct: 10}, {lagMS: 300, poolPct: 10}, {lagMS: 300, poolPct: 10}}, 4 * time.Second, 3,
			[]int{0, 0, 0, 0, 0, -1}, []int{0, 0, 0, 0, 0, 0}},
		{"AUTOSCALE_SCALE_DOWN_STABLE_CHECKS", "2", []signals{calm, calm}, 4 * time.Second, 3, []int{0, 0}, []int{0, -1}},
		{"AUTOSCALE_MIN_WORKERS", "3", []signals{calm, calm, calm, calm, calm, calm}, 4 * time.Second, 3,
			[]int{0, 0, 0, 0, 0, -1}, []int{0, 0, 0, 0, 0, 0}},
	}
	load := func(t *testing.T, env map[string]string) config.Autoscale {
		t.Helper()
		for _, k := range config.Keys {
			if _, ok := env[k.Env]; !ok && k.Name != "ingest.profile" {
				t.Setenv(k.Env, "") // an empty variable counts as unset
			}
		}
		t.Setenv("INGESTION_PROFILE", "none")
		for k, v := range env {
			t.Setenv(k, v)
		}
		cfg, err := config.Load(config.LoadOptions{Role: config.RoleIngest})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Ingest.Autoscale
	}
	run := func(cfg config.Autoscale, steps []signals, every time.Duration, workers int) []int {
		s := newScaler(cfg)
		now := time.Unix(1_700_000_000, 0)
		s.lastChange = now.Add(-time.Hour)
		var out []int
		for _, sig := range steps {
			d := s.decide(now, sig, workers)
			out = append(out, d)
			workers += d
			now = now.Add(every)
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			if got := run(load(t, nil), tt.steps, tt.every, tt.workers); !slices.Equal(got, tt.def) {
				t.Fatalf("defaults decide %v, want %v", got, tt.def)
			}
			if got := run(load(t, map[string]string{tt.env: tt.val}), tt.steps, tt.every, tt.workers); !slices.Equal(got, tt.set) {
				t.Errorf("%s=%s decides %v, want %v", tt.env, tt.val, got, tt.set)
			}
		})
	}
}
