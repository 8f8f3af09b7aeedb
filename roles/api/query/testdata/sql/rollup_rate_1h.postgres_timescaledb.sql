-- query: rate(readings{metric_name="energy"}[1h])
-- range: 2024-03-09T03:40:00Z .. 2024-03-11T09:00:00Z step 1h0m0s
SELECT * FROM (
SELECT agent_uuid, metric_name, device_name, protocol, unit, bucket AS b,
  count, sum, min, max, first_time, last_time, first_value, last_value, increase
FROM readings_hourly
WHERE tenant_id = $1
  AND bucket >= $2
  AND bucket < $3
  AND metric_name = $4
UNION ALL
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
SELECT agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit, time_bucket('3600000000 microseconds'::interval, time) AS b, time, value
FROM readings
WHERE tenant_id = $5
  AND time >= $6
  AND time < $7
  AND value IS NOT NULL
  AND metric_name = $8
) AS r
WINDOW p AS (PARTITION BY agent_uuid, metric_name, device_name, protocol, unit, b),
  w AS (PARTITION BY agent_uuid, metric_name, device_name, protocol, unit, b ORDER BY time)
) AS s
GROUP BY 1, 2, 3, 4, 5, 6
) AS u
ORDER BY 1, 2, 3, 4, 5, 6
LIMIT $9
-- args:
-- $1 = "tenant-a"
-- $2 = 2024-03-09T03:00:00Z (time)
-- $3 = 2024-03-11T06:00:00Z (time)
-- $4 = "energy"
-- $5 = "tenant-a"
-- $6 = 2024-03-11T06:00:00Z (time)
-- $7 = 2024-03-11T09:00:00Z (time)
-- $8 = "energy"
-- $9 = 27001
