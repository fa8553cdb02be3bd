package gc

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// Prometheus metrics, served on the controller-runtime registry.
var (
	outcomesTotal = counterVec("wrapup_outcomes_total",
		"AppWrappers whose trigger finished, by rule and outcome (Succeeded, Failed).", "rule", "outcome")

	actionsTotal = counterVec("wrapup_actions_total",
		"Actions taken on finished AppWrappers, by rule and action (Deleted, WouldDelete, StatusOnly).", "rule", "action")

	historyWrittenTotal = counterVec("wrapup_history_records_written_total",
		"CompletionRecords written of a new outcome (created, or in place of a cleared one), by rule.", "rule")

	historyWriteFailuresTotal = counterVec("wrapup_history_write_failures_total",
		"Failed attempts to write a CompletionRecord (other than a conflict with another write), by rule; nothing is recorded or deleted until it is written.", "rule")

	historyExpiredTotal = counterVec("wrapup_history_records_expired_total",
		"CompletionRecords deleted by their retention, by rule and reason (TTL, Limit).", "rule", "reason")

	evaluationErrorsTotal = counterVec("wrapup_evaluation_errors_total",
		"CEL evaluations that failed at run time (treated as not finished), by rule.", "rule")

	finalChecksTotal = counterVec("wrapup_final_checks_total",
		"Final checks: decisions made again on what the API server says, before a write or a delete.")

	evaluationSeconds = histogram("wrapup_evaluation_duration_seconds",
		"Time to evaluate a rule's expressions against one trigger.", prometheus.ExponentialBuckets(1e-6, 4, 10))

	triggerToActionSeconds = histogramVec("wrapup_trigger_to_action_seconds",
		"Time from the trigger being seen finished to the AppWrapper deletion request, TTL included, by rule.",
		prometheus.ExponentialBuckets(0.01, 4, 10), "rule")

	deletionLatenessSeconds = histogramVec("wrapup_deletion_lateness_seconds",
		"Time from when an AppWrapper's deletion was due (wrapup recorded its outcome, plus the TTL and any hold) to the deletion request, by rule: wrapup's own delay after the record.",
		prometheus.ExponentialBuckets(0.01, 4, 10), "rule")

	workerReachableGauge = gaugeVec("wrapup_worker_reachable",
		"1 if wrapup could last read a MultiKueue worker cluster (its kubeconfig Secret and its API server), 0 if not; by MultiKueueCluster. While 0, nothing dispatched there is recorded or deleted.", "cluster")

	ruleReadyGauge = gaugeVec("wrapup_rule_ready",
		"1 if a CompletionRule is Ready, 0 if not (its status says why), by rule; the leader serves it.", "rule")
)

// served are the series wrapup's metrics serve, by name, with their labels;
// collectors are the metrics. The constructors below fill both.
var (
	served     = map[string][]string{}
	collectors []prometheus.Collector
)

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	served[name], collectors = labels, append(collectors, c)
	return c
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	served[name], collectors = labels, append(collectors, g)
	return g
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	serveHistogram(name, nil)
	collectors = append(collectors, h)
	return h
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	serveHistogram(name, labels)
	collectors = append(collectors, h)
	return h
}

// serveHistogram records a histogram's three series.
func serveHistogram(name string, labels []string) {
	served[name+"_bucket"] = append(append([]string(nil), labels...), "le")
	served[name+"_sum"] = labels
	served[name+"_count"] = labels
}

func init() {
	metrics.Registry.MustRegister(collectors...)
}

// ServedMetrics maps the name of every series wrapup's own metrics serve
// (with a histogram's _bucket, _sum and _count) to its label names: what
// alerts and dashboards may query. test/install checks config/prometheus
// and config/grafana against it.
func ServedMetrics() map[string][]string {
	out := triggers.ServedMetrics()
	for name, labels := range served {
		out[name] = append([]string(nil), labels...)
	}
	return out
}
