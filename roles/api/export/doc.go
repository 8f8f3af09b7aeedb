// Package export is the Cloud API's export of readings as CSV and Parquet
// (docs/export.md), behind the licence feature "export": a streamed
// download (GET /export/readings) and background jobs (POST /export/jobs)
// that write the file under a directory and hand out download links with
// an expiring signed token.
//
// The rows come from roles/api/readings (ScanSelection), which selects
// them with the readings endpoints' walk, ownership rule and buckets, one
// database cursor row at a time; the encoders here write each row on as it
// comes, so memory does not grow with an export's size. Parquet row groups
// are cut every rowGroupRows rows, which bounds what the writer holds.
//
//	export.Register(protected, public, export.Deps{DB: b.DB, Caller: caller,
//		WriteError: WriteError, Feature: lic.CheckFeature, Settings: export.SettingsFrom(cfg.API)})
//
// Every user of the tenant may stream an export, a member as well as an
// admin: it reads what the readings endpoints already show the user, and
// changes nothing of the tenant's. Background jobs are for admins.
package export
