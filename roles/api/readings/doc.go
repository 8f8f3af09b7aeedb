// Package readings is the Cloud API's telemetry REST endpoints under
// /api/v1: latest values, the metric catalog, hourly and daily statistics,
// per-agent time series and aggregates, the query language endpoint
// (roles/api/query), a manual insert for tests, metric names and device
// profiles. docs/readings-api.md is the reference for clients. The same
// SQL runs on PostgreSQL (with or without TimescaleDB) and SQLite; the few
// differences come from core/db's Dialect.
//
//	readings.Register(v1, readings.Deps{
//		DB:         backends.DB,
//		Tenant:     tenantKey,
//		WriteError: WriteError,
//		Limits:     lim,
//	})
//
// # Tenants
//
// Every statement is restricted to the caller's tenant, which Deps.Tenant
// takes from the authenticated principal and never from the request. To
// the reading endpoints an agent of another tenant looks exactly like an
// agent without readings: 200 with empty results, never 403 or 404, so
// they cannot be used to learn which agent ids exist.
//
// POST /readings writes only for an agent in the caller's tenant's agent
// registry (Deps.AgentRegistered), and answers 404 for any other, whether
// another tenant registered it or nobody did. Ownership never comes from
// the readings already stored: when it did, a tenant that wrote first to
// another tenant's agent id took the agent over (the owner's writes were
// refused, its views went empty and its metric names showed to the
// claimant).
//
// The readings key (agent_uuid, metric_name, time) does not contain the
// tenant: an agent's readings are taken to belong to one tenant, the one
// ingest files them under and the registry check enforces for manual
// readings. The endpoints read an agent's tenant from its newest reading
// of its last metric (one index probe, where checking every row would
// read a foreign agent's whole history). Rows another tenant wrote to an
// agent before POST /readings checked the registry can still file that
// agent under the wrong tenant in this walk, until they are deleted; the
// endpoints read only the caller's rows, and GET /metrics lists a series
// only when its newest row is the caller's, so such rows show the other
// tenant nothing of the owner's.
//
// # Access path
//
// The table's only index is its primary key, which leads with the agent:
// no index finds a tenant's rows, and adding one would slow every insert
// of the ingest hot path. So the tenant-wide endpoints do not filter rows
// by tenant; they walk the primary key instead (a loose index scan, written
// as a recursive CTE that runs on both engines): from each agent to the
// next with one index probe, keep the agents the registry gives the
// tenant (or, for an agent it does not know, whose newest reading is the
// tenant's), from each of their metrics to the next, and then read only
// those series: their newest row for /readings/latest, their rows in
// [start, end] for the statistics. The cost is a few index probes per
// agent and per series of the tenant plus the rows asked for, instead of
// a scan of every tenant's history: on two million rows, the latest values
// of one tenant take 20 ms this way and 670 ms with DISTINCT ON. On
// TimescaleDB each probe visits every chunk's index, which stays far below
// a scan but grows with retention; a series table maintained by ingest
// would remove the walk altogether.
//
// # Buckets
//
// Hourly, daily and 1m/1h/1d buckets use Dialect.TimeBucket, aligned to
// whole UTC minutes, hours and days on every engine. A bucket summarises
// the values that fall both in it and in [start, end], both ends included,
// so a range that does not start on a bucket boundary has a partial first
// bucket. The default ranges start on a boundary. Averages are sum/count
// computed in Go, so both engines divide the same two numbers.
//
// # Limits
//
// query.Limits bound the statistics and time series as they bound the
// query language: max_range for end - start, max_points_per_series for
// buckets or raw points of one series, max_series and max_rows for the
// hourly and daily statistics. Past a limit the request fails with 422
// naming it; nothing is ever silently truncated, except /readings/latest,
// whose limit parameter is the client's own choice and whose answer says
// truncated: true.
package readings
