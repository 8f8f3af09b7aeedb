// Package outbound runs one publishing Worker per publish destination. A
// Worker owns its destination's publish mode (direct, buffer-only,
// recovering) and drains that destination's offline queue, so an
// unreachable or slow destination never holds up another one. Delivery is
// at least once: a record is Acked only after Send reported the
// destination acknowledged it, and Offer never waits for the destination.
// Run waits for the Sends it made, so Transport.Send must return once its
// context ends. See docs/agent-delivery.md.
package outbound
