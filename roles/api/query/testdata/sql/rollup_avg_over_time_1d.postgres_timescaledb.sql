-- query: avg_over_time(readings{device_name=~"pump.*"}[1d])
-- range: 2024-03-07T22:00:00Z .. 2024-03-12T02:00:00Z step 24h0m0s
SELECT agent_uuid, metric_name, device_name, protocol, unit, b,
  CAST(SUM(n) AS BIGINT), SUM(total), MIN(lo), MAX(hi), MIN(t0), MAX(t1)
FROM (
SELECT agent_uuid, metric_name, device_name, protocol, unit, time_bucket('86400000000 microseconds'::interval, bucket) AS b,
  SUM(count) AS n, SUM(sum) AS total, MIN(min) AS lo, MAX(max) AS hi, MIN(first_time) AS t0, MAX(last_time) AS t1
FROM readings_daily
WHERE tenant_id = $1
  AND bucket >= $2
  AND bucket < $3
  AND COALESCE(device_name, '') ~ $4
GROUP BY 1, 2, 3, 4, 5, 6
UNION ALL
SELECT agent_uuid, metric_name, device_name, protocol, unit, time_bucket('86400000000 microseconds'::interval, bucket) AS b,
  SUM(count) AS n, SUM(sum) AS total, MIN(min) AS lo, MAX(max) AS hi, MIN(first_time) AS t0, MAX(last_time) AS t1
FROM readings_hourly
WHERE tenant_id = $5
  AND bucket >= $6
  AND bucket < $7
  AND COALESCE(device_name, '') ~ $8
GROUP BY 1, 2, 3, 4, 5, 6
UNION ALL
SELECT agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit, time_bucket('86400000000 microseconds'::interval, time) AS b,
  COUNT(*) AS n, SUM(value) AS total, MIN(value) AS lo, MAX(value) AS hi, MIN(time) AS t0, MAX(time) AS t1
FROM readings
WHERE tenant_id = $9
  AND time >= $10
  AND time < $11
  AND value IS NOT NULL
  AND COALESCE(device_name, '') ~ $12
GROUP BY 1, 2, 3, 4, 5, 6
) AS u
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 1, 2, 3, 4, 5, 6
LIMIT $13
-- args:
-- $1 = "tenant-a"
-- $2 = 2024-03-07T00:00:00Z (time)
-- $3 = 2024-03-10T00:00:00Z (time)
-- $4 = "^(?:pump(?:[^\\n])*)$"
-- $5 = "tenant-a"
-- $6 = 2024-03-10T00:00:00Z (time)
-- $7 = 2024-03-11T06:00:00Z (time)
-- $8 = "^(?:pump(?:[^\\n])*)$"
-- $9 = "tenant-a"
-- $10 = 2024-03-11T06:00:00Z (time)
-- $11 = 2024-03-12T00:00:00Z (time)
-- $12 = "^(?:pump(?:[^\\n])*)$"
-- $13 = 2501
