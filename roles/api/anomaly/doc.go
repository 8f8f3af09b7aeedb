// Package anomaly is the Cloud API's anomaly detection
// (docs/anomaly-cloud.md): tenants' rules (threshold, z-score, rate of
// change, and multi-metric correlation where the licence grants
// correlation_rules), the incidents they open and close, alert rules that
// notify a webhook, an e-mail address or the live stream, the agents' own
// events (anomaly alerts and schema drift), and the aggregates dashboards
// show.
//
// Rules are judged on the ingest path: the pipeline hands each appended
// publish to Evaluator.Observe, which never blocks (a full queue drops
// and counts), and one goroutine keeps the rules, compiled and matched by
// metric name, and a bounded window per series in memory. Incidents are
// rows (migration 0016_anomaly) with one open per rule and series, which
// a partial unique index keeps true across API replicas; notifications
// leave through the Dispatcher's queue and retries, never the evaluator.
//
//	x := anomaly.New(anomaly.Deps{DB: b.DB, Caller: caller, WriteError: WriteError, ...})
//	x.Register(protected)
//	svcs = append(svcs, x.Services()...)
//	pipe.observe = x.Observe
package anomaly
