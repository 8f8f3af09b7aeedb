// Package detect is the agent's edge anomaly detector as a library: per
// (metric, device) and per hour-of-day baselines, z-score, MAD and
// rate-of-change scoring, Holt's linear forecast, and an in-memory alert
// ring. It performs no I/O and starts no goroutines; every time it uses
// comes from the observations the caller passes in, so the agent decides
// where readings come from and where baselines are persisted.
//
// The algorithms, the sensitivity mapping, the warm-up and the limits are
// described in docs/anomaly.md.
package detect
