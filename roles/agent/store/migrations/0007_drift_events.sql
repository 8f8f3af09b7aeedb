-- Schema-drift events (docs/drift.md): what the drift detector found, for
-- GET /v1/drift/events and the admin UI. event is the event's JSON as
-- the route answers it; protocol, kind, field and at are copied out of it
-- for the route's filters. The table keeps the newest rows only
-- (store.DriftKeep).
CREATE TABLE drift_events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    id       TEXT NOT NULL UNIQUE,
    protocol TEXT NOT NULL,
    kind     TEXT NOT NULL,
    field    TEXT NOT NULL,
    at       INTEGER NOT NULL,
    event    TEXT NOT NULL
);
CREATE INDEX drift_events_at ON drift_events (at);
