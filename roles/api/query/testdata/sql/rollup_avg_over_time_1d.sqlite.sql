-- query: avg_over_time(readings{device_name=~"pump.*"}[1d])
-- range: 2024-03-07T22:00:00Z .. 2024-03-12T02:00:00Z step 24h0m0s
SELECT agent_uuid, metric_name, device_name, protocol, unit, b,
  CAST(SUM(n) AS BIGINT), SUM(total), MIN(lo), MAX(hi), MIN(t0), MAX(t1)
FROM (
SELECT agent_uuid, metric_name, device_name, protocol, unit, (bucket - (((bucket - 946857600000000) % 86400000000) + 86400000000) % 86400000000) AS b,
  SUM(count) AS n, SUM(sum) AS total, MIN(min) AS lo, MAX(max) AS hi, MIN(first_time) AS t0, MAX(last_time) AS t1
FROM readings_daily
WHERE tenant_id = $1
  AND bucket >= $2
  AND bucket < $3
  AND edgeplat_re_match($4, COALESCE(device_name, ''))
GROUP BY 1, 2, 3, 4, 5, 6
UNION ALL
SELECT agent_uuid, metric_name, device_name, protocol, unit, (bucket - (((bucket - 946857600000000) % 86400000000) + 86400000000) % 86400000000) AS b,
  SUM(count) AS n, SUM(sum) AS total, MIN(min) AS lo, MAX(max) AS hi, MIN(first_time) AS t0, MAX(last_time) AS t1
FROM readings_hourly
WHERE tenant_id = $5
  AND bucket >= $6
  AND bucket < $7
  AND edgeplat_re_match($8, COALESCE(device_name, ''))
GROUP BY 1, 2, 3, 4, 5, 6
UNION ALL
SELECT agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit, (time - (((time - 946857600000000) % 86400000000) + 86400000000) % 86400000000) AS b,
  COUNT(*) AS n, SUM(value) AS total, MIN(value) AS lo, MAX(value) AS hi, MIN(time) AS t0, MAX(time) AS t1
FROM readings
WHERE tenant_id = $9
  AND time >= $10
  AND time < $11
  AND value IS NOT NULL
  AND edgeplat_re_match($12, COALESCE(device_name, ''))
GROUP BY 1, 2, 3, 4, 5, 6
) AS u
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 1, 2, 3, 4, 5, 6
LIMIT $13
-- args:
-- $1 = "tenant-a"
-- $2 = 1709769600000000
-- $3 = 1710028800000000
-- $4 = "^(?:pump.*)$"
-- $5 = "tenant-a"
-- $6 = 1710028800000000
-- $7 = 1710136800000000
-- $8 = "^(?:pump.*)$"
-- $9 = "tenant-a"
-- $10 = 1710136800000000
-- $11 = 1710201600000000
-- $12 = "^(?:pump.*)$"
-- $13 = 2501
