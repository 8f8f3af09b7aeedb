// Package mqttx is the MQTT client that the Cloud API and the edge agent
// share. It wraps paho.mqtt.golang but keeps reconnecting, the ordered
// pending publish queue, acknowledgement (a message is acknowledged only
// after its handlers succeeded) and handler order in its own hands; the
// connection states are a pure state machine (machine, in state.go).
// See docs/mqtt-client.md.
package mqttx
