// Package registry owns the Cloud API's edge agents: the agent registry
// (/agents), fleets (/fleets, docs/fleets-and-jobs.md) and the target
// state their members receive, provisioning keys and self-registration
// (/provisioning, /provision/agent), and device API keys with their MQTT
// passwords, which authenticate agents over HTTP (X-Device-API-Key) and
// at the broker (it implements brokerauth.Store).
package registry
