-- Applications of the standalone agent (docs/apps.md): one row per app
-- the local API created, its services as the JSON array of the target
-- state's services. Apps of the cloud's target state are kept with the
-- applied document, not here. Names are unique, checked by Apps.Put in
-- the writing statement (no index: a table this small does not need one).
-- The runtime configuration is the agent_meta key apps.runtime.
CREATE TABLE apps (
    app_id     INTEGER PRIMARY KEY,
    app_name   TEXT NOT NULL,
    services   TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
