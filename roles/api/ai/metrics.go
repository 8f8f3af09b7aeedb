package ai

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests  *prometheus.CounterVec
	tokens    prometheus.Counter
	toolCalls *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_api_ai_requests_total",
			Help: "AI assistant requests by route (chat, suggestions) and outcome (ok or the error code; suggestions: rules, model, rejected, failed).",
		}, []string{"route", "outcome"}),
		tokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeplat_api_ai_tokens_total",
			Help: "Tokens the AI provider counted (or that were estimated when it sent no count), across all requests.",
		}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_api_ai_tool_calls_total",
			Help: "Tool calls the model asked for, by tool (unknown for a name that is no tool) and outcome.",
		}, []string{"tool", "outcome"}),
	}
	// Register runs once per role, so the collectors are new to reg.
	if reg != nil {
		reg.MustRegister(m.requests, m.tokens, m.toolCalls)
	}
	return m
}

// toolLabel keeps the tool label bounded: a model may name anything.
func toolLabel(name string) string {
	if slices.Contains(toolNames, name) {
		return name
	}
	return "unknown"
}
