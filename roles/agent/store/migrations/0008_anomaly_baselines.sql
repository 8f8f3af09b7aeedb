-- Baselines of the anomaly detector (docs/anomaly-agent.md, section
-- Persistence): one row per (metric, device, hour-of-day slot), the
-- summary GET /v1/anomaly/baselines shows. Saved as a whole every 5
-- minutes, on POST /v1/anomaly/save-baselines and when the agent stops,
-- and restored at start so a restarted agent does not warm up again.
-- calculated_at is Unix ms.
CREATE TABLE anomaly_baselines (
    metric        TEXT NOT NULL,
    device_id     TEXT NOT NULL,
    time_slot     INTEGER NOT NULL,
    mean          REAL NOT NULL,
    std_dev       REAL NOT NULL,
    median        REAL NOT NULL,
    mad           REAL NOT NULL,
    sample_count  INTEGER NOT NULL,
    calculated_at INTEGER NOT NULL,
    PRIMARY KEY (metric, device_id, time_slot)
);
