// Package anomaly runs the agent's edge anomaly detection
// (docs/anomaly-agent.md): one lifecycle service owning a detect.Detector,
// fed with every numeric reading of every endpoint batch (one Observe per
// batch, before the batch is published, so the custom and ml payloads
// carry the enrichment), with the host's system metrics on a timer, and
// configured by the agent's settings. Each new alert also goes to the
// cloud as a critical event; baselines are saved to the agent's store
// every 5 minutes, on request and at stop, and restored at start.
//
// When detection is off, a batch costs one atomic load and nothing more.
package anomaly
