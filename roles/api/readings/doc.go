// Package readings is the Cloud API's telemetry REST endpoints under
// /api/v1: latest values, the metric catalog, hourly and daily statistics,
// per-agent time series and aggregates, the query language endpoint
// (roles/api/query), a manual insert for tests, metric names and device
// profiles. The same SQL runs on PostgreSQL (with or without TimescaleDB)
// and SQLite; the few differences come from core/db's Dialect.
//
//	readings.Register(v1, readings.Deps{
//		DB:         backends.DB,
//		Tenant:     tenantKey,
//		WriteError: WriteError,
//		Limits:     lim,
//	})
//
// Every statement is restricted to the tenant Deps.Tenant gives, and the
// tenant-wide endpoints walk the primary key instead of scanning the
// table. Statistics read whole hours and days from the rollups
// (roles/api/rollup) where they hold them and raw readings elsewhere. See
// docs/readings-api.md, sections Common rules, Rollups and How it reads
// the database.
package readings
