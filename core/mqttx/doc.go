// Package mqttx is the MQTT client that the Cloud API (telemetry in; desired
// state and job dispatch out) and the edge agent (telemetry out; commands in)
// share. It wraps paho.mqtt.golang but keeps in our hands the parts whose
// behaviour the platform promises (docs/stream-contract.md, docs/agent.md):
//
//   - Reconnecting. paho's auto-reconnect and connect-retry are off; Run
//     drives the states connecting → connected → reconnecting → fatal (plus
//     stopped) itself, so delays (1 s, 2 s, 4 s, then 8 s), the count of
//     consecutive failures, fatal after MaxReconnectAttempts and the
//     recovery after FatalRecoveryCooldown are exact and visible (State,
//     Stats, Check, OnStateChange, edgeplat_mqtt_* metrics). The rules are a
//     pure state machine (machine, in state.go).
//   - The pending publish queue. Every Publish goes through one ordered,
//     bounded in-memory queue (1000 messages and 64 MiB by default; over
//     either, the oldest are dropped, counted and logged at most every
//     10 s). One flusher per connection sends it from the front, so what
//     queued during an outage goes out, in order, before anything published
//     after the reconnect. Up to MaxInflight messages are in flight at once
//     on the single connection, which keeps them ordered; whatever was in
//     flight when a connection fails goes back to the front of the queue.
//     Delivery is therefore at least once.
//
// # First connection
//
// Start reads the TLS files and returns an error only for invalid settings;
// it never dials. Run makes the first attempt at once (state connecting). If
// it fails, the client moves to reconnecting exactly as if a connection had
// dropped, so a broker that is down while the process starts costs retries,
// not the process. The first attempt is not a reconnect: it does not count
// towards MaxReconnectAttempts.
//
// # One paho client per connection
//
// Each attempt builds a fresh paho client, used for that connection only.
// paho warns that reusing a client after Disconnect is unsafe, and a fresh
// client carries no in-flight state the queue would then duplicate: our
// queue is the only record of unsent messages. The session itself is the
// broker's: CleanSession is false by default and the client id must be
// stable, so subscriptions and unacknowledged messages survive a
// reconnect. Subscriptions are nevertheless made again on every connection
// (the broker may have lost the session, for example after a restart of a
// broker without persistence). One consequence: a QoS 2 message in flight
// when a connection drops is sent again as a new message (new packet id),
// so across an outage QoS 2 is at-least-once, like QoS 1.
//
// # Acknowledgement
//
// Automatic acknowledgement is off (paho SetAutoAckDisabled): a message is
// acknowledged (PUBACK) only after every handler matching it returned nil.
// MQTT 3.1.1 has no negative acknowledgement: a message left unacknowledged
// is redelivered only when the session resumes on a new connection, and it
// keeps a slot of the broker's in-flight window meanwhile (Mosquitto's
// max_inflight_messages is 20 by default; once that many are held the
// broker sends nothing more). So after ReconnectAfterUnacked (10) QoS>0
// messages of one connection were left unacknowledged, or RedeliverAfter
// (5 s) after the first of them, the client closes that connection on
// purpose and reconnects through the normal backoff; the broker then
// redelivers them with the DUP flag. The timer is there for the lone
// failure: without it one message would wait for nine more failures or an
// ordinary reconnect, which on a healthy connection may never come. 0
// disables either trigger; with both off the messages come back only after
// an ordinary reconnect. A message no
// subscription matches (one left in the persistent session by an earlier
// run) is acknowledged and counted as unrouted, rather than blocking the
// window; register subscriptions before Start so none of ours is taken for
// such a leftover.
//
// # Handler concurrency and order
//
// paho calls our dispatch function on its router goroutine, in order
// (SetOrderMatters). Handlers do not run there: paho reads PUBACKs for our
// publishes on the goroutine that feeds the router, so a slow handler would
// stall publishing. Dispatch hands each message to a worker through a
// bounded buffer (HandlerBuffer; when full, reading from the broker pauses:
// back-pressure; PINGRESPs wait too, so handlers stuck for longer than
// paho's ping timeout end in a reconnect and redelivery). With HandlerWorkers = 1 (the default) handlers run one at
// a time in arrival order. With more, messages are spread over the workers
// by a hash of the topic: messages of one topic (one agent's stream) keep
// their order, different topics run in parallel. A message redelivered
// after a failure arrives after later messages of its topic that succeeded;
// handlers de-duplicate and must not assume strict order across failures.
// A BatchHandler (SubscribeBatch) gets, in one call, the messages of its
// subscription already waiting in the worker's buffer (up to HandlerBatch),
// never waiting for more: under light load it sees one message at a time,
// and when it falls behind it pays one backend round trip for many, which
// is what keeps a subscriber ahead of the broker's per-client queue. Each
// message is acknowledged or left for redelivery by its own result.
// When a connection ends, handlers' contexts are cancelled and buffered
// messages are dropped unacknowledged: their acks could not reach the
// broker anyway, and it redelivers them.
//
// # Shared subscriptions
//
// With SharedGroup set, every filter is subscribed as
// $share/<group>/<filter>, so several replicas with the same group split
// the messages between them (Mosquitto 2, mochi). Routing to handlers
// matches the plain filter.
package mqttx
