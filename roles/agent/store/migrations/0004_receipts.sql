-- Delivery receipts (docs/agent-delivery.md, section Delivery receipts): a
-- record sent to a destination with receipts on stays queued, "awaiting",
-- until the cloud's receipt covers its msgId. msg_kid and msg_seq are the
-- parts of a v2 msgId ("v2_{kid}_{seq}") with a sequence below 10^18
-- (store.MaxReceiptSeq), NULL for any other id, so a receipt's ranges find
-- their records through an index.
ALTER TABLE offline_queue ADD COLUMN awaiting INTEGER NOT NULL DEFAULT 0;
ALTER TABLE offline_queue ADD COLUMN msg_kid TEXT;
ALTER TABLE offline_queue ADD COLUMN msg_seq INTEGER;
UPDATE offline_queue SET msg_kid = substr(msg_id, 4, 8), msg_seq = CAST(substr(msg_id, 13) AS INTEGER)
    WHERE length(msg_id) BETWEEN 13 AND 30 AND substr(msg_id, 1, 3) = 'v2_' AND substr(msg_id, 12, 1) = '_'
      AND substr(msg_id, 13) NOT GLOB '*[^0-9]*';
CREATE INDEX offline_queue_receipt ON offline_queue (destination, msg_kid, msg_seq) WHERE msg_kid IS NOT NULL;

ALTER TABLE offline_queue_state ADD COLUMN awaiting  INTEGER NOT NULL DEFAULT 0; -- of records, those sent and awaiting a receipt
ALTER TABLE offline_queue_state ADD COLUMN kept      INTEGER NOT NULL DEFAULT 0; -- sent directly, then kept awaiting a receipt
ALTER TABLE offline_queue_state ADD COLUMN receipted INTEGER NOT NULL DEFAULT 0; -- of delivered, deleted on a receipt
ALTER TABLE offline_queue_state ADD COLUMN resent    INTEGER NOT NULL DEFAULT 0; -- sent again after the receipt wait
