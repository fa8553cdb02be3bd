package gc

import (
	"slices"

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

// served maps each series of the metrics above to its label names.
var served = map[string][]string{}

// serve registers c, of the series name with labels (a histogram's
// _bucket, _sum and _count).
func serve[C prometheus.Collector](c C, name string, labels []string) C {
	metrics.Registry.MustRegister(c)
	switch any(c).(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		served[name+"_bucket"] = append(slices.Clone(labels), "le")
		served[name+"_sum"], served[name+"_count"] = labels, labels
	default:
		served[name] = labels
	}
	return c
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return serve(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels), name, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return serve(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels), name, labels)
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return serve(prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}), name, nil)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return serve(prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels), name, labels)
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
