-- See migrations/postgres/0017_readings_anomaly_score.sql.
ALTER TABLE readings ADD COLUMN anomaly_score REAL;
