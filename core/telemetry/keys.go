package telemetry

import (
	"fmt"
	"strings"
)

// Stream and channel names shared by producers (Cloud API) and consumers
// (ingestion workers); docs/stream-contract.md, "Keys".

// IngestionStream is the stream a tenant's device telemetry is appended to.
func IngestionStream(tenant string) string { return "tenant:" + tenant + ":agent:devices:ingestion" }

// DLQStream holds a tenant's telemetry that could not be written.
func DLQStream(tenant string) string { return "tenant:" + tenant + ":agent:devices:dlq" }

// LogsStream carries a tenant's agent log batches.
func LogsStream(tenant string) string { return "tenant:" + tenant + ":agent:logs" }

// MetricsChannel is the pub/sub channel of one agent's real-time values.
func MetricsChannel(tenant, agent string) string {
	return "tenant:" + tenant + ":device:" + agent + ":metrics"
}

// WriterGroup is the consumer group of a tenant's ingestion workers.
func WriterGroup(tenant string) string { return tenant + ":device-writers" }

// IngestionStreamPattern matches every tenant's ingestion stream.
const IngestionStreamPattern = "tenant:*:agent:devices:ingestion"

// TenantOfStream returns the tenant of a stream named by IngestionStream,
// DLQStream or LogsStream.
func TenantOfStream(stream string) (string, error) {
	rest, ok := strings.CutPrefix(stream, "tenant:")
	if ok {
		if i := strings.Index(rest, ":agent:"); i > 0 {
			return rest[:i], nil
		}
	}
	return "", fmt.Errorf("stream %q is not a tenant stream", stream)
}

// LogWriterGroup is the consumer group that writes a tenant's agent logs.
func LogWriterGroup(tenant string) string { return tenant + ":log-writers" }

// LogsStreamPattern matches every tenant's agent logs stream.
const LogsStreamPattern = "tenant:*:agent:logs"
