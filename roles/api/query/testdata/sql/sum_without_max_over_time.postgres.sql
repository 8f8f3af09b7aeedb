-- query: sum without (unit) (max_over_time(readings{device_name=~"(?i)pump"}[1h]))
-- range: 2024-03-10T10:00:00Z .. 2024-03-11T10:00:00Z step 1h0m0s
SELECT agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit, date_bin('3600000000 microseconds'::interval, time, timestamptz '2000-01-03 00:00:00+00') AS b,
  COUNT(*), SUM(value), MIN(value), MAX(value), MIN(time), MAX(time)
FROM readings
WHERE tenant_id = $1
  AND time >= $2
  AND time < $3
  AND value IS NOT NULL
  AND COALESCE(device_name, '') ~ $4
GROUP BY 1, 2, 3, 4, 5, 6
ORDER BY 1, 2, 3, 4, 5, 6
LIMIT $5
-- args:
-- $1 = "tenant-a"
-- $2 = 2024-03-10T09:00:00Z (time)
-- $3 = 2024-03-11T10:00:00Z (time)
-- $4 = "^(?:[Pp][Uu][Mm][Pp])$"
-- $5 = 2000001
