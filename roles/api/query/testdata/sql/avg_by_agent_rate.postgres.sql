-- query: avg by (agent_uuid) (rate(readings{metric_name=~"boiler.*"}[5m]))
-- range: 2024-03-10T10:00:00Z .. 2024-03-10T11:00:00Z step 1m0s
SELECT agent_uuid, metric_name, device_name, protocol, unit, b,
  COUNT(*), SUM(value), MIN(value), MAX(value), MIN(time), MAX(time),
  MAX(CASE WHEN rn = 1 THEN value END),
  MAX(CASE WHEN rn = n THEN value END),
  SUM(CASE WHEN d IS NULL THEN 0 WHEN d < 0 THEN value ELSE d END)
FROM (
SELECT agent_uuid, metric_name, device_name, protocol, unit, b, time, value,
  value - LAG(value) OVER w AS d,
  ROW_NUMBER() OVER w AS rn,
  COUNT(*) OVER p AS n
FROM (
SELECT agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit, date_bin('60000000 microseconds'::interval, time, timestamptz '2000-01-03 00:00:00+00') AS b, time, value
FROM readings
WHERE tenant_id = $1
  AND time >= $2
  AND time < $3
  AND value IS NOT NULL
  AND metric_name ~ $4
) AS r
WINDOW p AS (PARTITION BY agent_uuid, metric_name, device_name, protocol, unit, b),
  w AS (PARTITION BY agent_uuid, metric_name, device_name, protocol, unit, b ORDER BY time)
) AS s
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 1, 2, 3, 4, 5, 6
LIMIT $5
-- args:
-- $1 = "tenant-a"
-- $2 = 2024-03-10T09:55:00Z (time)
-- $3 = 2024-03-10T11:00:00Z (time)
-- $4 = "^(?:boiler(?:[^\\n])*)$"
-- $5 = 2000001
