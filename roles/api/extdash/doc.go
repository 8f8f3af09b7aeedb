// Package extdash is the Cloud API's external dashboards
// (docs/external-dashboards.md): the dashboards and alert rules of a
// Grafana, read and changed through Grafana's HTTP API (dashboard search,
// alerting provisioning), with api.grafana_url and api.grafana_token.
//
// Every user may list; changing an alert threshold is for admins. The
// Grafana is the installation's, not a tenant's: every tenant's users see
// the same dashboards and rules. Without a URL the routes answer 503;
// Grafana's failures answer 502 (a missing rule 404), never with
// Grafana's own body, which may echo the request.
package extdash
