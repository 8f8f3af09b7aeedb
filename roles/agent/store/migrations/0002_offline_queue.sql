-- Offline queues, one per publish destination (the destination's integer
-- id), with their dead letters and per-destination totals. Times are Unix
-- milliseconds.

-- AUTOINCREMENT keeps ids from ever being reused after a delete, so the id
-- is the insertion order and an Ack for an old id can never hit a newer
-- record that happened to get the same number.
CREATE TABLE offline_queue (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    destination     INTEGER NOT NULL,
    msg_id          TEXT    NOT NULL,
    topic           TEXT    NOT NULL,
    payload         BLOB    NOT NULL,
    size            INTEGER NOT NULL,
    critical        INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    last_error      TEXT    NOT NULL DEFAULT ''
);
-- Oldest ready records of a destination: walked in id order, filtered on
-- next_attempt_at (nearly every record is ready, so the walk stops early).
CREATE INDEX offline_queue_dest_id ON offline_queue (destination, id, next_attempt_at);
-- Eviction: the oldest ordinary records first, critical ones after.
CREATE INDEX offline_queue_dest_evict ON offline_queue (destination, critical, id);

CREATE TABLE offline_dead_letters (
    id          INTEGER PRIMARY KEY, -- the record's id in offline_queue
    destination INTEGER NOT NULL,
    msg_id      TEXT    NOT NULL,
    topic       TEXT    NOT NULL,
    payload     BLOB    NOT NULL,
    size        INTEGER NOT NULL,
    critical    INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    reason      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    dead_at     INTEGER NOT NULL
);
CREATE INDEX offline_dead_letters_dest ON offline_dead_letters (destination, id);

-- Depth and counters per destination, changed in the same transaction as
-- the rows they describe, so they stay exact across crashes.
CREATE TABLE offline_queue_state (
    destination      INTEGER PRIMARY KEY,
    records          INTEGER NOT NULL DEFAULT 0,
    bytes            INTEGER NOT NULL DEFAULT 0,
    enqueued         INTEGER NOT NULL DEFAULT 0,
    evicted_records  INTEGER NOT NULL DEFAULT 0, -- evicted for maxBufferRecords
    evicted_bytes    INTEGER NOT NULL DEFAULT 0, -- evicted for the byte limit
    evicted_critical INTEGER NOT NULL DEFAULT 0, -- of the two above, critical records
    refused          INTEGER NOT NULL DEFAULT 0, -- new records turned away (dropPolicy newest, or too large)
    full_errors      INTEGER NOT NULL DEFAULT 0, -- new records answered with an error (dropPolicy error)
    rejected         INTEGER NOT NULL DEFAULT 0, -- broker rejections while connected
    dead_lettered    INTEGER NOT NULL DEFAULT 0,
    delivered        INTEGER NOT NULL DEFAULT 0
);
