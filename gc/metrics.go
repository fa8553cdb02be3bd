package gc

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Prometheus metrics, served on the controller-runtime registry.
var (
	outcomesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wrapup_outcomes_total",
		Help: "AppWrappers whose trigger finished, by rule and outcome (Succeeded, Failed).",
	}, []string{"rule", "outcome"})

	actionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wrapup_actions_total",
		Help: "Actions taken on finished AppWrappers, by rule and action (Deleted, WouldDelete, StatusOnly).",
	}, []string{"rule", "action"})

	historyWrittenTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wrapup_history_records_written_total",
		Help: "CompletionRecords written (created, or replaced after a retry), by rule.",
	}, []string{"rule"})

	historyWriteFailuresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wrapup_history_write_failures_total",
		Help: "Failed attempts to write a CompletionRecord, by rule; past its deadline the AppWrapper is deleted anyway.",
	}, []string{"rule"})

	historyExpiredTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wrapup_history_records_expired_total",
		Help: "CompletionRecords deleted by their retention, by rule and reason (TTL, Limit).",
	}, []string{"rule", "reason"})

	evaluationErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wrapup_evaluation_errors_total",
		Help: "CEL evaluations that failed at run time (treated as not finished), by rule.",
	}, []string{"rule"})

	evaluationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "wrapup_evaluation_duration_seconds",
		Help:    "Time to evaluate a rule's expressions against one trigger.",
		Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10),
	})

	triggerToActionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wrapup_trigger_to_action_seconds",
		Help:    "Time from the trigger being seen finished to the AppWrapper deletion request, TTL included, by rule.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
	}, []string{"rule"})

	informersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wrapup_trigger_informers",
		Help: "Informers running for trigger kinds (one per kind in use), by kind; a kind whose informer stopped has no series.",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(outcomesTotal, actionsTotal, historyWrittenTotal, historyWriteFailuresTotal, historyExpiredTotal, evaluationErrorsTotal, evaluationSeconds, triggerToActionSeconds, informersGauge)
}
