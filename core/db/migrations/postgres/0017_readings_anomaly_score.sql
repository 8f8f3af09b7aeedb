-- The agent's anomaly score of a reading (docs/anomaly-cloud.md, section
-- Edge anomaly scores): a nullable column rather than a sidecar table, so a
-- score costs no second key, index or join, and a reading without one
-- costs a bit of the row's null bitmap. Adding a nullable column without a
-- default rewrites nothing, hypertable or not.
ALTER TABLE readings ADD COLUMN anomaly_score double precision;
