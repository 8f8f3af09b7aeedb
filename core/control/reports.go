package control

import "time"

// StateReport is what an agent publishes on ReportState every
// intervals.stateReportMs while it is connected (docs/control-channel.md).
// The cloud keeps the latest per agent, derives the agent's status and
// device health from it, and serves it on GET /agents/:uuid/current-state.
type StateReport struct {
	// Timestamp is when the report was made, Unix ms.
	Timestamp int64  `json:"timestamp"`
	UUID      string `json:"uuid"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// State is the agent lifecycle state (INITIALIZING, RUNNING).
	State string `json:"state"`
	// Mode is the agent mode: standalone, provisioned-online or
	// provisioned-degraded-offline.
	Mode string `json:"mode"`
	// RunState is RunRunning or RunStopped: whether the agent does its
	// work (its endpoints poll) or keeps its definitions and stops, as
	// its applied target state's runState says (docs/target-state.md,
	// section Run state).
	RunState    string          `json:"runState"`
	TargetState TargetStatus    `json:"targetState"`
	Endpoints   []EndpointState `json:"endpoints"`
	// Buffer is the agent's buffer status object (GET /v1/buffer/status).
	Buffer map[string]any `json:"buffer,omitempty"`
	// Health is the agent's own health, as at provisioning: overall,
	// subsystems, unhealthySubsystems, criticalFailures. A store found
	// corrupt or a full disk is thus known to the cloud, not to the
	// device alone.
	Health map[string]any `json:"health,omitempty"`
}

// TargetStatus is what the agent did with its target state: the version
// it runs, when it applied it, and why the latest one it received was
// refused, if it was.
type TargetStatus struct {
	// Version is the applied target-state version; 0 when none was.
	Version   int64      `json:"version"`
	AppliedAt *time.Time `json:"appliedAt,omitempty"`
	// Refused, with Error, is the newer version that failed validation;
	// the agent keeps running Version.
	Refused int64  `json:"refused,omitempty"`
	Error   string `json:"error,omitempty"`
}

// EndpointState is one protocol endpoint (device) in a state report.
type EndpointState struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Enabled  bool   `json:"enabled"`
	// Status is the endpoint's connection state in lower case:
	// connected, disconnected, connecting, error (or stopped when not
	// enabled).
	Status               string     `json:"status"`
	Connected            bool       `json:"connected"`
	CommunicationQuality float64    `json:"communicationQuality"`
	LastSeen             *time.Time `json:"lastSeen,omitempty"`
	LastPoll             *time.Time `json:"lastPoll,omitempty"`
	LastError            string     `json:"lastError,omitempty"`
	// Polls, PollFailures, ReadsGood and ReadsBad count since the
	// endpoint started.
	Polls        int64 `json:"polls"`
	PollFailures int64 `json:"pollFailures"`
	ReadsGood    int64 `json:"readsGood"`
	ReadsBad     int64 `json:"readsBad"`
}

// MetricsReport is what an agent publishes on ReportMetrics: its host's
// system metrics. Fields the host cannot give are omitted (temperature
// without /sys/class/thermal).
type MetricsReport struct {
	Timestamp      int64    `json:"timestamp"`
	CPUUsage       float64  `json:"cpu_usage"`
	MemoryPercent  float64  `json:"memory_percent"`
	MemoryUsed     uint64   `json:"memory_used"`
	MemoryTotal    uint64   `json:"memory_total"`
	StoragePercent float64  `json:"storage_percent"`
	StorageUsed    uint64   `json:"storage_used"`
	StorageTotal   uint64   `json:"storage_total"`
	Temperature    *float64 `json:"temperature,omitempty"`
	// Uptime is the host's uptime in seconds; AgentUptime the agent
	// process's.
	Uptime      float64 `json:"uptime"`
	AgentUptime float64 `json:"agent_uptime"`
	Hostname    string  `json:"hostname,omitempty"`
}
