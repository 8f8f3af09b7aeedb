// Package events is the Cloud API's tenant event log (docs/events.md): the
// /events routes that list, search, count and chart what happened to a
// tenant's agents, compare two snapshots of an agent's reported or target
// state, and rebuild a target state from the log and push it again.
//
// The log is a query layer over what is already stored rather than a
// second copy of it: audit_events (API calls, agent status changes, job
// moves, broker refusals, anomaly actions), agent_target_state_history
// (every committed target-state version with its document),
// anomaly_incidents (openings and closings) and agent_state_snapshots, the
// one table of its own (migration 0018), where Snapshots keeps a state
// report only when what the agent reports changed. One UNION ALL query
// orders the sources by (time, source, sequence, key), which is also the
// page cursor, so a page boundary never splits or repeats events that
// share a time.
//
// Pruner bounds the log by age (api.events_retention): state snapshots and
// audit records older than the retention go; target-state history and
// incidents keep their own bounds.
package events
