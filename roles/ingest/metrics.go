package ingest

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ingestMetrics are the ingestion_* series of spec §8 plus a few that operators
// need to see the breaker and the spool. Labels are bounded: never a tenant.
type ingestMetrics struct {
	processed     prometheus.Counter
	inserted      prometheus.Counter
	dlqTotal      prometheus.Counter
	spooled       prometheus.Counter
	dlqLength     prometheus.Gauge
	streamLength  prometheus.Gauge
	lagMS         prometheus.Gauge
	workers       prometheus.Gauge
	breakerOpen   prometheus.Gauge
	batchP95      *window
	insertP95     *window
	insertRetries prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *ingestMetrics {
	m := &ingestMetrics{
		processed: prometheus.NewCounter(prometheus.CounterOpts{Name: "ingestion_messages_processed_total",
			Help: "Device telemetry messages (stream entries) consumed and acknowledged."}),
		inserted: prometheus.NewCounter(prometheus.CounterOpts{Name: "ingestion_readings_inserted_total",
			Help: "Reading rows written to the readings table (rows already present are not counted)."}),
		dlqTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "ingestion_dlq_messages_total",
			Help: "Messages written to a dead-letter stream."}),
		spooled: prometheus.NewCounter(prometheus.CounterOpts{Name: "ingestion_spooled_messages_total",
			Help: "Messages written to the disk spool while the database was failing."}),
		insertRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "ingestion_insert_retries_total",
			Help: "Insert attempts repeated after a failure."}),
		dlqLength: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ingestion_dlq_length",
			Help: "Entries in the dead-letter streams of all tenants."}),
		streamLength: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ingestion_stream_length",
			Help: "Entries in the ingestion streams not yet acknowledged (undelivered plus pending)."}),
		lagMS: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ingestion_worker_lag_ms",
			Help: "Age of the oldest unacknowledged ingestion entry, in milliseconds."}),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ingestion_worker_count",
			Help: "Active ingestion workers."}),
		breakerOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ingestion_circuit_breaker_open",
			Help: "1 while the insert circuit breaker is open."}),
		batchP95:  newWindow(1024),
		insertP95: newWindow(1024),
	}
	reg.MustRegister(m.processed, m.inserted, m.dlqTotal, m.spooled, m.insertRetries, m.dlqLength, m.streamLength, m.lagMS, m.workers, m.breakerOpen,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ingestion_batch_duration_p95_ms",
			Help: "95th percentile of the time from reading a batch to acknowledging it, over the last 1024 batches, in milliseconds."},
			m.batchP95.p95ms),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ingestion_db_insert_duration_p95_ms",
			Help: "95th percentile of one insert's time, over the last 1024 inserts, in milliseconds."},
			m.insertP95.p95ms),
	)
	return m
}

// window keeps the last n durations for a percentile gauge: the spec names
// p95 gauges, which a histogram cannot serve without a query language.
type window struct {
	mu   sync.Mutex
	buf  []time.Duration
	next int
	full bool
}

func newWindow(n int) *window { return &window{buf: make([]time.Duration, n)} }

func (w *window) observe(d time.Duration) {
	w.mu.Lock()
	w.buf[w.next] = d
	w.next = (w.next + 1) % len(w.buf)
	if w.next == 0 {
		w.full = true
	}
	w.mu.Unlock()
}

func (w *window) p95ms() float64 {
	w.mu.Lock()
	n := w.next
	if w.full {
		n = len(w.buf)
	}
	vals := slices.Clone(w.buf[:n])
	w.mu.Unlock()
	if n == 0 {
		return 0
	}
	slices.Sort(vals)
	return float64(vals[(n*95+99)/100-1]) / float64(time.Millisecond)
}
