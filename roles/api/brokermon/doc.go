// Package brokermon is the Cloud API's broker monitoring
// (docs/broker-monitoring.md): the broker's status, live rates, totals and
// system figures, read from Mosquitto's $SYS topics through the API's own
// MQTT client or, in all-in-one, from the embedded broker's counters (a
// Source); and, from what the API's subscriber receives, a topic tree with
// counts and last-seen times per level and a JSON Schema per topic
// inferred from sampled payloads. Both are in memory and bounded; the tree
// and the schemas are scoped per tenant, the broker's own figures are for
// admins.
//
//	mon, _ := brokermon.New(brokermon.Options{Connected: ...})
//	brokermon.Register(protected, brokermon.Deps{Monitor: mon, Caller: caller,
//		WriteError: WriteError, AdminGate: adminGate})
package brokermon
