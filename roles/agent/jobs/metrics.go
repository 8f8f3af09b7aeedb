package jobs

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/control"
)

type metrics struct {
	runs       *prometheus.CounterVec
	duplicates prometheus.Counter
}

const unknownHandler = "unknown"

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_agent_job_runs_total",
			Help: `Job executions the agent ran, by handler ("unknown" for names it does not know) and final status.`,
		}, []string{"handler", "status"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeplat_agent_job_duplicates_total",
			Help: "Job dispatches received for a jobId the agent knew already, and not run again.",
		}),
	}
	for _, h := range slices.Concat(control.JobHandlers, []string{unknownHandler}) {
		for _, st := range []control.ExecStatus{control.ExecSucceeded, control.ExecFailed, control.ExecTimedOut, control.ExecCancelled} {
			m.runs.WithLabelValues(h, string(st))
		}
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.duplicates)
	}
	return m
}

// run counts one handler run; the handler label is never a name from
// the wire that is not one of control.JobHandlers.
func (m *metrics) run(handler, status string) {
	if !control.KnownHandler(handler) {
		handler = unknownHandler
	}
	m.runs.WithLabelValues(handler, status).Inc()
}
