-- query: readings{agent_uuid=~"3f2b.*", agent_uuid!="00000000-0000-0000-0000-000000000000"}
-- range: 2024-03-10T10:00:00Z .. 2024-03-10T11:00:00Z step 1m0s
SELECT agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit, time, value
FROM readings
WHERE tenant_id = $1
  AND time >= $2
  AND time <= $3
  AND value IS NOT NULL
  AND edgeplat_re_match($4, agent_uuid)
  AND agent_uuid <> $5
ORDER BY 1, 2, 3, 4, 5, 6
LIMIT $6
-- args:
-- $1 = "tenant-a"
-- $2 = 1710064800000000
-- $3 = 1710068400000000
-- $4 = "^(?:3f2b.*)$"
-- $5 = "00000000-0000-0000-0000-000000000000"
-- $6 = 2000001
