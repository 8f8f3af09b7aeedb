-- query: sum without (unit) (max_over_time(readings{device_name=~"(?i)pump"}[1h]))
-- range: 2024-03-10T10:00:00Z .. 2024-03-11T10:00:00Z step 1h0m0s
SELECT agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit, (time - (((time - 946857600000000) % 3600000000) + 3600000000) % 3600000000) AS b,
  COUNT(*), SUM(value), MIN(value), MAX(value), MIN(time), MAX(time)
FROM readings
WHERE tenant_id = $1
  AND time >= $2
  AND time < $3
  AND value IS NOT NULL
  AND edgeplat_re_match($4, COALESCE(device_name, ''))
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 1, 2, 3, 4, 5, 6
LIMIT $5
-- args:
-- $1 = "tenant-a"
-- $2 = 1710061200000000
-- $3 = 1710151200000000
-- $4 = "^(?:(?i)pump)$"
-- $5 = 2000001
