// Package promapi answers Prometheus's HTTP query API under /api/v1/prom
// (query, query_range, series, labels, label values) from the readings,
// so that Grafana's Prometheus data source and promtool can read them. A
// PromQL subset is parsed here and mapped onto the query language of
// roles/api/query, which plans and runs it: metric names are the
// readings' metric_name (__name__), with the labels agent, device,
// protocol and unit; answers and errors are in Prometheus's JSON shapes.
// See docs/prometheus-api.md for the mapping and the Grafana set-up.
//
//	prom := engine.Group("/api/v1/prom", promapi.BasicAPIKey, auth, limit)
//	promapi.Register(prom, promapi.Deps{DB: b.DB, Tenant: tenantKey})
package promapi
