package triggers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The trigger informers' metrics, served on the controller-runtime
// registry with the controllers' own (docs/metrics.md).
var (
	informersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wrapup_trigger_informers",
		Help: "Informers running for trigger kinds (one per kind in use), by kind; a kind whose informer stopped has no series."}, []string{"kind"})

	informersSyncedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wrapup_trigger_informer_synced",
		Help: "1 once a trigger kind's informer has listed its objects, 0 until its first list succeeds (a list that is refused or keeps failing stays 0), by kind."}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(informersGauge, informersSyncedGauge)
}

// ServedMetrics maps the series the trigger informers serve to their
// label names.
func ServedMetrics() map[string][]string {
	return map[string][]string{"wrapup_trigger_informers": {"kind"}, "wrapup_trigger_informer_synced": {"kind"}}
}
