// Package ai is the Cloud API's AI assistant (docs/ai-assistant.md),
// behind the licence feature ai: POST /ai/chat answers a question about an
// agent or a fleet by letting a model call the platform's own reads as
// tools (agent status, latest readings, the metric catalogue, the query
// language, anomaly incidents, an agent's events) in the OpenAI
// chat-completions format, and POST /dashboard/ai/suggestions proposes a
// dashboard layout for an agent by documented rules, which a model, when
// one is configured, may refine.
//
// The provider is any OpenAI-compatible chat-completions endpoint
// (api.ai_*). The tools only read, and take the tenant from the caller
// when the request starts: no argument a model sends names a tenant, and
// a record of another tenant answers not_found like none at all. A
// model's refined layout is decoded by the dashboard layout routes' own
// strict decoder; one that fails it, or names a metric the agent lacks,
// leaves the deterministic proposal in place.
//
//	ai.Register(protected, ai.Deps{Caller: caller, WriteError: WriteError,
//		Licence: lic.RequireFeature(licence.FeatureAI, WriteError),
//		Agents: agents, Readings: readings.Reader{DB: d}, Incidents: an,
//		Events: ai.AuditEvents{DB: d}, Config: cfg.API})
package ai
