-- Discovery rules and their runs (docs/discovery.md, section Rules).
-- params_json and target_json are JSON text or NULL; times are Unix ms.
-- A rule keeps its newest 50 runs (discovery.RunsKept); deleting a rule
-- deletes its runs in the same transaction. devices is the JSON array of
-- the devices the run found.
CREATE TABLE discovery_rules (
    uuid             TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    protocol         TEXT NOT NULL,
    interval_seconds INTEGER NOT NULL,
    enabled          INTEGER NOT NULL,
    auto_enable      INTEGER NOT NULL,
    params_json      TEXT,
    target_json      TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE TABLE discovery_runs (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid              TEXT NOT NULL UNIQUE,
    rule_uuid         TEXT NOT NULL,
    started_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    status            TEXT NOT NULL,
    devices_found     INTEGER NOT NULL,
    endpoints_created INTEGER NOT NULL,
    error             TEXT NOT NULL,
    devices           TEXT NOT NULL
);
CREATE INDEX discovery_runs_rule ON discovery_runs (rule_uuid, seq);
