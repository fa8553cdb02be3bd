package gc

import (
	"regexp"
	"strings"

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

	deletionLatenessSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wrapup_deletion_lateness_seconds",
		Help:    "Time from when an AppWrapper's deletion was due (wrapup recorded its outcome, plus the TTL and any hold) to the deletion request, by rule: wrapup's own delay after the record.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
	}, []string{"rule"})

	informersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wrapup_trigger_informers",
		Help: "Informers running for trigger kinds (one per kind in use), by kind; a kind whose informer stopped has no series.",
	}, []string{"kind"})

	informersSyncedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wrapup_trigger_informer_synced",
		Help: "1 once a trigger kind's informer has listed its objects, 0 until its first list succeeds (a list that is refused or keeps failing stays 0), by kind.",
	}, []string{"kind"})

	ruleReadyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wrapup_rule_ready",
		Help: "1 if a CompletionRule is Ready, 0 if not (its status says why), by rule; the leader serves it.",
	}, []string{"rule"})
)

// collectors are wrapup's metrics.
var collectors = []prometheus.Collector{
	outcomesTotal, actionsTotal, historyWrittenTotal, historyWriteFailuresTotal, historyExpiredTotal, evaluationErrorsTotal,
	evaluationSeconds, triggerToActionSeconds, deletionLatenessSeconds, informersGauge, informersSyncedGauge, ruleReadyGauge,
}

func init() {
	metrics.Registry.MustRegister(collectors...)
}

// ServedMetrics maps the name of every series wrapup's own metrics serve
// (with a histogram's _bucket, _sum and _count) to its label names: what
// alerts and dashboards may query. test/install checks config/prometheus
// and config/grafana against it.
func ServedMetrics() map[string][]string {
	out := map[string][]string{}
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc, 1)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descPattern.FindStringSubmatch(d.String())
			if m == nil {
				continue
			}
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			switch c.(type) {
			case prometheus.Histogram, *prometheus.HistogramVec:
				out[m[1]+"_bucket"] = append(append([]string(nil), labels...), "le")
				out[m[1]+"_sum"] = labels
				out[m[1]+"_count"] = labels
			default:
				out[m[1]] = labels
			}
		}
	}
	return out
}

// descPattern reads the name and variable labels of a prometheus.Desc's
// String(), which is the only place the library gives them.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
