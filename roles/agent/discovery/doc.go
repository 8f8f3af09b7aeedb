// Package discovery finds devices on the network for the edge agent
// (docs/discovery.md): one Scanner per protocol (Modbus TCP, OPC-UA,
// MQTT; BACnet's comes with its adapter), the one-off scans of
// POST /v1/discover, and the discovery rules a lifecycle service runs on
// their schedule, which may create an endpoint for each new device.
//
// Scans are bounded on every side: addresses, ports, unit ids and topics
// are capped, probes are rate-limited and run with bounded concurrency,
// each probe has its own time-out and the whole scan an overall one, so
// discovery never floods a plant network nor outlives its request.
package discovery
