// Package admin is the Cloud API's installation administration
// (docs/system-config.md, docs/admin-health.md): GET /admin/health, one
// object that reports each dependency with its figures and answers 200
// even when a part is down, and GET/PUT /admin/system-config, the
// settings an admin may change while the API runs (rate limits, log
// level, de-duplication TTL).
//
// Stored settings (table system_config, migration 0020) override the
// file, the environment and the built-in defaults; a key without a row
// keeps its configured value. The replica that takes a PUT applies it at
// once; the others read the table every DefaultRefreshEvery (SystemConfig
// is a lifecycle service) and on start, before the HTTP server takes
// requests. Applying is the role's business (SystemConfigOptions.Apply):
// this package validates, stores, audits and hands over the effective
// Settings.
//
// Every route is for admins only. The settings and the health figures
// are the installation's, not one tenant's: they carry no tenant ids.
package admin
