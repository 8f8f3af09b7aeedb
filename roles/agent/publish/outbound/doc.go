// Package outbound runs one publishing Worker per publish destination
// (edge-agent.md §3 publish mode and offline record, §6 batching item 3,
// §8 offline queue). A Worker owns its destination's publish mode and
// drains that destination's offline queue, so an unreachable or slow
// destination never holds up another one: each has its own input buffer,
// its own goroutines and its own queue rows.
//
// # Publish mode
//
//	          connection lost, or a Send failed transiently
//	direct ──────────────────────────────────────────────▶ buffer-only
//	  ▲                                                      │    ▲
//	  │ a flush cycle found no                connection     │    │ connection lost
//	  │ record ready                          restored       ▼    │ (the cycle stops)
//	  └──────────────────────────────────────────────── recovering
//
// In each mode:
//
//   - direct: offered items are sent at once. Each Send takes whatever is
//     already waiting in the input buffer, up to MaxSendBatch, so
//     publishes pipeline without adding delay. A delivered item is done; an
//     item the destination refused is queued and rejected once, so the
//     queue's retry waits and its maxRetries → dead letter rule apply to it
//     as to any queued record; an item that failed transiently is queued
//     with its msgId and the mode becomes buffer-only.
//   - buffer-only: every item goes to the offline queue, and ephemeral
//     ones (heartbeats) are dropped and counted, which silences them during
//     an outage. Records only wait: a lost connection is not a rejection,
//     so nothing counts towards their retries.
//   - recovering: the connection is back. A flusher goroutine drains the
//     queue in the background while new items go direct again (Transport
//     is used from both goroutines at once). The first flush cycle that
//     finds no record ready ends recovery. Records still waiting out a
//     retry wait do not hold the worker in recovering; the periodic cycles
//     of direct mode send them once their wait is over.
//
// A Worker starts in buffer-only and Run moves it to direct, or to
// recovering when the queue holds records, if the destination is
// connected. A transport may fail a Send transiently and still report
// itself connected, without a change to signal; the periodic flush tick
// then counts as the connection being restored, so such a worker leaves
// buffer-only within one flush interval.
//
// # Flush rules
//
// Cycles run only while connected, and are triggered on connect or
// reconnect, every QueueOptions.FlushIntervalMS, and when the queue's
// depth exceeds FlushTriggerThreshold (checked after the worker queued
// something while connected). A cycle sends at most MaxFlushPerCycle
// records, in Ready batches of FlushBatchSize, each batch in one Send.
// Ready returns only records whose retry wait is over. Per record: a
// delivery is collected for one Ack of the batch; a refusal is Rejected
// (retry wait, or dead letter past maxRetries); a transient failure ends
// the cycle once the batch's results are recorded. A cycle that stopped at
// MaxFlushPerCycle with more records ready is followed by the next one at
// once instead of after the flush interval.
//
// Status reports LastFlushAttempt as the start of the latest cycle (every
// cycle reads the queue and would send what is ready), and
// LastFlushSuccess as the latest moment a cycle had a batch delivered and
// acked, or found no record ready. A cycle that only met refusals or
// failed transiently therefore moves the attempt but not the success.
//
// # Delivery guarantee
//
// Delivery is at least once, never exactly once: a record is Acked
// (deleted) only after Send reported that the destination acknowledged
// it. A crash between that acknowledgement and the Ack leaves the record
// queued, and it is sent again, with its original msgId, after the
// restart. An Ack that fails (a full disk) is kept in memory and retried
// first by the next cycles, which send nothing until it goes through, so
// a full disk neither stops the flush for good nor repeats the same batch
// every cycle. Likewise a direct item
// whose acknowledgement was lost (the peer may have it) is queued and sent
// again. The cloud de-duplicates by msgId. The reverse, deleting a record
// whose delivery was not confirmed, would lose it, which the queue exists
// to prevent.
//
// # Nothing held only in memory is lost
//
// Offer never waits for the destination: when the input buffer is full
// the item goes straight to the queue, and the queue's refusal (a
// *store.FullError, store.ErrRecordTooLarge) is returned and counted. When
// Run returns, its goroutines have ended and every item that was still in
// memory (in the input buffer, or in a Send that did not deliver it) is in
// the queue, ephemeral ones excepted. Offer before Run starts or after it
// ended writes straight to the queue, so an item accepted by Offer is
// durable whenever no Run is there to take it. Run waits for the Sends it
// made, so Transport.Send must return once its context ends.
//
// An item that overflowed to the queue while connected is a queued record
// like any other: it goes out with the next flush trigger, not ahead of
// the items that followed it.
package outbound
