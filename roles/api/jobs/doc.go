// Package jobs is the Cloud API's jobs capability (docs/fleets-and-jobs.md,
// section Jobs): job templates with declared parameters, dispatch of a job
// to one agent, a list, a fleet or a tag query, its rollout, abort and
// per-agent timeout, the agents' poll and status routes, cancellation,
// reads, audit records and a live channel per tenant.
//
// The state lives in three tables (migration 0013_jobs). Every move of a
// job or an execution is a conditional UPDATE ... WHERE status = ...
// (RETURNING what it moved), so several API replicas on one database can
// run the scheduler and serve agents at once: exactly one wins each move
// and announces it. Nothing is published to MQTT or the stream store while
// a transaction is open; a replica that dies between a move and its
// announcement loses that announcement, which the agent's poll of
// GET /agents/:uuid/jobs/next makes up for.
//
// The package declares what it needs from the rest of the role (Targets,
// Publisher, the device authenticator) in Deps; roles/api wires the real
// ones:
//
//	jobs.Register(protected, e.Group("/api/v1"), deps)
//	svc := jobs.NewScheduler(deps, 250*time.Millisecond)
package jobs
