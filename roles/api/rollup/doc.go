// Package rollup keeps the hourly and daily rollups of readings
// (readings_hourly, readings_daily; migration 0022) and tells readers
// which part of a time range they cover. See docs/readings-api.md,
// section Rollups.
//
// The Worker, a lifecycle service of serve-api, rolls each hour up from
// raw readings once it has been over for Settle, rolls each day up from
// its hours once the day's hours are done, re-rolls the hours that late
// readings landed in (a trigger on readings marks them in
// readings_rollup_late) and deletes rollups past their retention. API
// replicas take turns through a PostgreSQL advisory lock; SQLite has one
// process.
//
// A row summarises one series (tenant, agent, metric, device, protocol,
// unit) in one bucket: count, sum, min, max, the first and last sample's
// time and value, and the increase with counter resets. These combine
// exactly: the counts, minima and maxima of several buckets are those of
// their samples, sums are equal up to floating-point rounding, and an
// increase over several buckets is theirs plus the steps between one
// bucket's last value and the next one's first.
//
// Readers (roles/api/readings, roles/api/query) call Load for the
// Coverage, then Coverage.Split to cut a range into spans read from a
// rollup and spans read from raw readings, so answers are complete and
// the same as over raw readings whatever the worker has done so far.
package rollup
