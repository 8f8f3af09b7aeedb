-- System config (docs/system-config.md): the settings an admin changes
-- while the API runs. One row per overridden key, installation-wide; a
-- key without a row keeps its value from the file, the environment or the
-- built-in default. value is the setting as JSON text; replicas poll the
-- whole table, which holds a handful of rows.
CREATE TABLE system_config (
    key        text        PRIMARY KEY,
    value      text        NOT NULL,
    updated_at timestamptz NOT NULL,
    updated_by text        NOT NULL DEFAULT ''
);
