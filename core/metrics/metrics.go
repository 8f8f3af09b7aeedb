// Package metrics owns the process's Prometheus registry. cmd builds exactly
// one per process and hands it to every role as a parameter, never a global,
// so all-in-one serves one coherent /metrics and tests can use their own.
package metrics

import (
	"net/http"

	"github.com/edgeplat/edgeplat/core/buildinfo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry with the Go runtime and process collectors
// and an edgeplat_build_info gauge, which dashboards join on to show the
// running version.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	bi := buildinfo.Get()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "edgeplat_build_info",
		Help: "Build information of the running edgeplat binary; always 1.",
	}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(bi.Version, bi.Commit, bi.GoVersion).Set(1)
	reg.MustRegister(build)
	return reg
}

// Handler serves reg in the text exposition format.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: false})
}
