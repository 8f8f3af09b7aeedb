-- query: readings{metric_name="boiler.temp", agent_uuid="3F2B8C1E-9D4A-4B7E-8F00-1A2B3C4D5E6F", device_name!="", unit=~"°C|K", protocol!~"opc.*", quality="good"}
-- range: 2024-03-10T10:00:00Z .. 2024-03-10T11:00:00Z step 1m0s
SELECT agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit, time, value
FROM readings
WHERE tenant_id = $1
  AND time >= $2
  AND time <= $3
  AND value IS NOT NULL
  AND metric_name = $4
  AND agent_uuid = $5
  AND COALESCE(device_name, '') <> $6
  AND COALESCE(unit, '') ~ $7
  AND COALESCE(protocol, '') !~ $8
  AND COALESCE(quality, '') = $9
ORDER BY 1, 2, 3, 4, 5, 6
LIMIT $10
-- args:
-- $1 = "tenant-a"
-- $2 = 2024-03-10T10:00:00Z (time)
-- $3 = 2024-03-10T11:00:00Z (time)
-- $4 = "boiler.temp"
-- $5 = "3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f"
-- $6 = ""
-- $7 = "^(?:(?:\\u00B0C|K))$"
-- $8 = "^(?:opc(?:[^\\n])*)$"
-- $9 = "good"
-- $10 = 2000001
