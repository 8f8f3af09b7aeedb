package publish

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Publishing metrics are read from the workers and the offline queue when
// scraped rather than counted twice: the queue's counters are already
// exact and survive restarts. Labels are the destination's name and type,
// both bounded by the agent's configuration; never a device.
var (
	destLabels     = []string{"destination", "type"}
	descPublished  = prometheus.NewDesc("edgeplat_agent_published_messages_total", "Messages a destination acknowledged, sent directly or replayed from the offline queue.", append(destLabels, "path"), nil)
	descPubBytes   = prometheus.NewDesc("edgeplat_agent_published_bytes_total", "Payload bytes a destination acknowledged, by path.", append(destLabels, "path"), nil)
	descPubFailed  = prometheus.NewDesc("edgeplat_agent_publish_failures_total", "Messages not delivered: transient send failures (queued to retry) and refusals by the destination.", append(destLabels, "reason"), nil)
	descQRecords   = prometheus.NewDesc("edgeplat_agent_queue_records", "Records in the destination's offline queue.", destLabels, nil)
	descQBytes     = prometheus.NewDesc("edgeplat_agent_queue_bytes", "Payload bytes in the destination's offline queue.", destLabels, nil)
	descQOldest    = prometheus.NewDesc("edgeplat_agent_queue_oldest_record_age_seconds", "Age of the oldest record in the offline queue; 0 when empty.", destLabels, nil)
	descQDropped   = prometheus.NewDesc("edgeplat_agent_queue_dropped_records_total", "Records lost to the offline queue, by reason: evicted for a limit, refused (full or too large), dead-lettered, or a storage error such as a full disk.", append(destLabels, "reason"), nil)
	descQFlushes   = prometheus.NewDesc("edgeplat_agent_queue_flushes_total", "Flush cycles of the offline queue, by result: delivered records, found none ready, or failed.", append(destLabels, "result"), nil)
	descQAwaiting  = prometheus.NewDesc("edgeplat_agent_queue_awaiting_receipt_records", "Of the offline queue's records, those sent and awaiting the cloud's delivery receipt.", destLabels, nil)
	descReceipted  = prometheus.NewDesc("edgeplat_agent_receipted_records_total", "Records a delivery receipt of the cloud covered, deleted from the offline queue or from those held in memory.", destLabels, nil)
	descResent     = prometheus.NewDesc("edgeplat_agent_receipt_resent_records_total", "Records sent again because no delivery receipt came within the receipt wait.", destLabels, nil)
	descHeld       = prometheus.NewDesc("edgeplat_agent_receipt_held_records", "Direct sends acknowledged by the destination and held in memory for their receipt; those without one within 2 s are written to the offline queue.", destLabels, nil)
	descReceipts   = prometheus.NewDesc("edgeplat_agent_receipts_applied_total", "Delivery receipts of the cloud applied to the destination's queue since the agent started.", destLabels, nil)
	publishingDesc = []*prometheus.Desc{descPublished, descPubBytes, descPubFailed, descQRecords, descQBytes, descQOldest, descQDropped, descQFlushes,
		descQAwaiting, descReceipted, descResent, descReceipts, descHeld}
)

// scrapeTimeout bounds the queue reads of one scrape.
const scrapeTimeout = 2 * time.Second

// Collector exports every running destination's worker and queue; the
// agent registers it with its other metrics.
func (p *Router) Collector() prometheus.Collector { return publishingCollector{p: p} }

type publishingCollector struct{ p *Router }

func (c publishingCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range publishingDesc {
		ch <- d
	}
}

func (c publishingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, r := range c.p.running() {
		name, typ := r.row.Name, r.row.Type
		m, ws := r.w.Metrics()
		counter(descPublished, ws.Delivered, name, typ, "direct")
		counter(descPublished, ws.Replayed, name, typ, "replay")
		counter(descPubBytes, m.DeliveredBytes, name, typ, "direct")
		counter(descPubBytes, m.ReplayedBytes, name, typ, "replay")
		counter(descPubFailed, m.SendFailures, name, typ, "transient")
		counter(descPubFailed, m.Rejections, name, typ, "rejected")
		counter(descQFlushes, m.FlushDelivered, name, typ, "delivered")
		counter(descQFlushes, m.FlushEmpty, name, typ, "empty")
		counter(descQFlushes, m.FlushFailed, name, typ, "failed")
		counter(descQDropped, m.StoreErrors, name, typ, "store_error")
		counter(descReceipts, m.Receipts, name, typ)
		gauge(descHeld, float64(ws.HeldForReceipt), name, typ)
		st, err := r.w.Status(ctx)
		if err != nil {
			// The store is closing or failing; its health says which.
			continue
		}
		qc := st.Counters
		gauge(descQRecords, float64(st.Records), name, typ)
		gauge(descQBytes, float64(st.Bytes), name, typ)
		gauge(descQOldest, float64(st.OldestAgeMS)/1000, name, typ)
		counter(descQDropped, qc.EvictedRecords, name, typ, "evicted_max_records")
		counter(descQDropped, qc.EvictedBytes, name, typ, "evicted_max_bytes")
		counter(descQDropped, qc.Refused, name, typ, "refused")
		counter(descQDropped, qc.FullErrors, name, typ, "full_error")
		counter(descQDropped, qc.DeadLettered, name, typ, "dead_lettered")
		gauge(descQAwaiting, float64(st.Awaiting), name, typ)
		counter(descReceipted, qc.Receipted, name, typ)
		counter(descResent, qc.Resent, name, typ)
	}
}
