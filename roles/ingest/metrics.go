package ingest

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ingestMetrics are the ingestion series docs/metrics.md lists, plus a few
// that operators need to see the breaker and the spool. Durations are
// histograms in seconds, so percentiles can be taken over any window and
// summed across replicas; the p95-over-the-last-1024 gauges they replace
// could be neither. Labels are bounded: never a tenant.
type ingestMetrics struct {
	processed      prometheus.Counter
	inserted       prometheus.Counter
	dlqTotal       prometheus.Counter
	spooled        prometheus.Counter
	dlqLength      prometheus.Gauge
	streamLength   prometheus.Gauge
	lag            prometheus.Gauge
	workers        prometheus.Gauge
	breakerOpen    prometheus.Gauge
	batchDuration  prometheus.Histogram
	insertDuration prometheus.Histogram
	insertRetries  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *ingestMetrics {
	m := &ingestMetrics{
		processed: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_ingestion_messages_processed_total",
			Help: "Device telemetry messages (stream entries) consumed and acknowledged."}),
		inserted: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_ingestion_readings_inserted_total",
			Help: "Reading rows written to the readings table (rows already present are not counted)."}),
		dlqTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_ingestion_dlq_messages_total",
			Help: "Messages written to a dead-letter stream."}),
		spooled: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_ingestion_spooled_messages_total",
			Help: "Messages written to the disk spool while the database was failing."}),
		insertRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_ingestion_insert_retries_total",
			Help: "Insert attempts repeated after a failure."}),
		dlqLength: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_ingestion_dlq_length",
			Help: "Entries in the dead-letter streams of all tenants."}),
		streamLength: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_ingestion_stream_length",
			Help: "Entries in the ingestion streams not yet acknowledged (undelivered plus pending)."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_ingestion_worker_lag_seconds",
			Help: "Age of the oldest unacknowledged ingestion entry, in seconds."}),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_ingestion_workers",
			Help: "Active ingestion workers."}),
		breakerOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_ingestion_circuit_breaker_open",
			Help: "1 while the insert circuit breaker is open."}),
		batchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "edgeplat_ingestion_batch_duration_seconds",
			Help:    "Time from reading a batch from the stream to acknowledging it.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}),
		insertDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "edgeplat_ingestion_db_insert_duration_seconds",
			Help:    "Time of one insert of a batch's rows into the readings table.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}),
	}
	reg.MustRegister(m.processed, m.inserted, m.dlqTotal, m.spooled, m.insertRetries, m.dlqLength, m.streamLength, m.lag, m.workers, m.breakerOpen,
		m.batchDuration, m.insertDuration)
	return m
}
