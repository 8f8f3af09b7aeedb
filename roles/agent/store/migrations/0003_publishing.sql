-- Where the agent publishes (destinations), which endpoints' batches go
-- there and how they are encoded (subscriptions), and per-protocol output
-- settings for drift detection.
CREATE TABLE publish_destinations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL UNIQUE,
    type        TEXT NOT NULL,
    config_json TEXT, -- JSON object or NULL
    enabled     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE publish_subscriptions (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    publish_destination_id INTEGER NOT NULL REFERENCES publish_destinations (id) ON DELETE CASCADE,
    topics                 TEXT NOT NULL DEFAULT '[]', -- JSON array of MQTT topic filters
    payload_format         TEXT NOT NULL DEFAULT 'custom',
    compression            TEXT NOT NULL DEFAULT 'json',
    enabled                INTEGER NOT NULL DEFAULT 1,
    route_json             TEXT, -- JSON object or NULL
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL
);
CREATE INDEX publish_subscriptions_destination ON publish_subscriptions (publish_destination_id);

CREATE TABLE protocol_outputs (
    protocol       TEXT PRIMARY KEY,
    payload_format TEXT NOT NULL DEFAULT 'custom',
    drift_options  TEXT, -- JSON object or NULL
    updated_at     INTEGER NOT NULL
);
