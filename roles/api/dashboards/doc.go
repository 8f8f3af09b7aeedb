// Package dashboards is the Cloud API's dashboard layouts
// (docs/dashboards.md): per agent, named grids of widgets the web console
// renders, with one default per agent, optimistic concurrency through a
// version, and a generated default for an agent that has none stored.
//
// The layout document is schema-versioned (SchemaVersion); DecodeLayout
// reads what clients send strictly and names the JSON path of every
// problem, and Validate holds a layout built in code to the same rules.
// Layouts live in dashboard_layouts (migration 0014_dashboard_layouts);
// every write of one agent's layouts takes that agent's row lock on
// PostgreSQL first, so the default flag moves in one transaction and never
// lands on two layouts.
//
// Reads are for every user of the tenant; writes for every role that is
// not read-only (admin and member: the accounts package has no read-only
// role yet, and a role it adds is refused writes until it is listed in
// writerRoles).
//
//	dashboards.Register(protected, dashboards.Deps{DB: b.DB, Caller: caller,
//		WriteError: WriteError, Audit: a.audit})
package dashboards
