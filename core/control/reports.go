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
	// Apps is the current state of the agent's apps (docs/apps.md);
	// absent when the agent manages none.
	Apps *AppsState `json:"apps,omitempty"`
}

// AppsState is what the agent knows of its apps: the container runtime's
// state and each app's services, the target merged with what the runtime
// reports (GET /v1/apps answers the same).
type AppsState struct {
	Runtime RuntimeState `json:"runtime"`
	Apps    []AppState   `json:"apps"`
}

// RuntimeState is the container runtime as the agent last saw it.
type RuntimeState struct {
	// Status is "connected", "unreachable" or "unconfigured".
	Status string `json:"status"`
	// Error says why the runtime is unreachable.
	Error   string `json:"error,omitempty"`
	Version string `json:"version,omitempty"`
	// Since is when Status last changed, Unix ms.
	Since int64 `json:"since,omitempty"`
}

// AppState is one app: its target and its services' current state.
type AppState struct {
	AppID    int            `json:"appId"`
	AppName  string         `json:"appName"`
	Services []ServiceState `json:"services"`
}

// ServiceState is one service: what it should be (ImageName, Config,
// Target) and what the runtime says it is.
type ServiceState struct {
	ServiceName string `json:"serviceName"`
	ImageName   string `json:"imageName"`
	// Target is the state the service should be in: running or stopped.
	Target string `json:"target"`
	// State is the current state: running, stopped, created, restarting,
	// exited, pulling, starting, missing (no container) or unknown
	// (runtime unreachable).
	State string `json:"state"`
	// Status is the runtime's own status text ("Up 3 minutes").
	Status      string        `json:"status,omitempty"`
	ContainerID string        `json:"containerId,omitempty"`
	Config      ServiceConfig `json:"config"`
	// Error is the last failure reconciling the service (a failed pull,
	// a start refused), until it succeeds; Retries counts the attempts and
	// NextRetry is when the next is due, Unix ms.
	Error     string `json:"error,omitempty"`
	Retries   int    `json:"retries,omitempty"`
	NextRetry int64  `json:"nextRetry,omitempty"`
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
