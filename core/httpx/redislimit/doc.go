// Package redislimit counts httpx rate limits in Redis, so that every
// serve-api replica sees one count per key and a documented limit holds
// for the installation rather than per replica. The algorithm is the
// in-memory limiter's (GCRA: one arrival time per key), run as one Lua
// script per decision on one key, so it works unchanged on a single
// server, Sentinel and Redis Cluster. Limits stay in each process
// (SetLimit), counts live in Redis. While Redis fails, decisions fall back
// to the process's own counts for a short while. See docs/access.md,
// section Rate limits across replicas.
package redislimit
