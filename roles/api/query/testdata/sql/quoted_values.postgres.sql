-- query: readings{metric_name="it's \"quoted\"; DROP TABLE readings; --", device_name=~"a'b|\\d+"}
-- range: 2024-03-10T10:00:00Z .. 2024-03-10T11:00:00Z step 1m0s
SELECT agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit, time, value
FROM readings
WHERE tenant_id = $1
  AND time >= $2
  AND time <= $3
  AND value IS NOT NULL
  AND metric_name = $4
  AND COALESCE(device_name, '') ~ $5
ORDER BY 1, 2, 3, 4, 5, 6
LIMIT $6
-- args:
-- $1 = "tenant-a"
-- $2 = 2024-03-10T10:00:00Z (time)
-- $3 = 2024-03-10T11:00:00Z (time)
-- $4 = "it's \"quoted\"; DROP TABLE readings; --"
-- $5 = "^(?:(?:a\\u0027b|(?:[0-9])+))$"
-- $6 = 2000001
