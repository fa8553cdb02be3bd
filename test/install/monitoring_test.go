package install

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
)

// TestAlerts loads config/prometheus's PrometheusRule with Prometheus's own
// rule loader (which parses every expression and template) and checks that
// each expression queries series wrapup serves, by labels they have, and
// that the alerts the install promises are there.
func TestAlerts(t *testing.T) {
	var spec map[string]any
	for _, o := range render(t, "prometheus") {
		if o.GetKind() == "PrometheusRule" {
			spec = o.Object["spec"].(map[string]any)
		}
	}
	if spec == nil {
		t.Fatal("config/prometheus has no PrometheusRule")
	}
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(raw, false, model.UTF8Validation)
	for _, err := range errs {
		t.Errorf("Prometheus refuses the rules: %v", err)
	}
	if groups == nil {
		t.FailNow()
	}
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			checkQuery(t, "alert "+r.Alert, r.Expr)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s needs a severity, a summary and a description", r.Alert)
			}
		}
	}
	// wrapup down, a rule not Ready, evaluation errors, an informer not
	// synced, a backlog before the record, late deletions after it,
	// records not written.
	for _, want := range []string{"WrapupDown", "WrapupRuleNotReady", "WrapupEvaluationErrors", "WrapupTriggerInformerNotSynced", "WrapupBacklog", "WrapupDeletionLate", "WrapupRecordsNotWritten"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s (alerts: %v)", want, alerts)
		}
	}
}

// grafanaVariables are what Grafana substitutes before a query reaches
// Prometheus.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$rule", ".*", "${rule}", ".*")

// TestDashboard loads config/grafana's dashboard and parses every query as
// Prometheus would, after Grafana's substitutions: each queries series wrapup
// serves, by labels they have. The ConfigMap that ships it holds the same
// file.
func TestDashboard(t *testing.T) {
	path := filepath.Join(framework.RepoRoot(), "config", "grafana", "dashboard.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("%s: no uid or no panels", path)
	}
	ids := map[int]string{}
	queries := 0
	seen := map[string]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				queries++
				for _, m := range checkQuery(t, fmt.Sprintf("panel %q", p.Title), grafanaVariables.Replace(q.Expr)) {
					seen[m] = true
				}
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	// label_values(metric, label): a metric wrapup serves with that label.
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)
	for _, v := range dash.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue
		}
		m := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
		if m == nil {
			t.Errorf("variable %s: query %v is not label_values(metric, label)", v.Name, q["query"])
			continue
		}
		if labels, ok := queryable(t)[m[1]]; !ok || !slices.Contains(labels, m[2]) {
			t.Errorf("variable %s reads label %s of %s, which wrapup does not serve", v.Name, m[2], m[1])
		}
	}
	// Every metric wrapup serves has a panel.
	for name := range gc.ServedMetrics() {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !seen[name] && !seen[base+"_bucket"] && !seen[base+"_count"] {
			t.Errorf("no panel shows %s", name)
		}
	}
	t.Logf("%d panels, %d queries", len(ids), queries)

	// The ConfigMap for Grafana's sidecar carries this very file.
	objs := render(t, "grafana")
	if len(objs) != 1 || objs[0].GetKind() != "ConfigMap" || objs[0].GetLabels()["grafana_dashboard"] != "1" {
		t.Fatalf("config/grafana should render one ConfigMap labelled grafana_dashboard=1, got %d objects", len(objs))
	}
	data, _, _ := unstructured.NestedString(objs[0].Object, "data", "dashboard.json")
	if data != string(raw) {
		t.Error("the ConfigMap's dashboard.json differs from config/grafana/dashboard.json")
	}
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

// checkQuery parses expr as Prometheus does and checks that every series it
// selects is one wrapup serves, that its matchers and every aggregation's
// grouping name labels those series have, and returns the metrics queried.
func checkQuery(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	served := queryable(t)
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		labels, ok := served[vs.Name]
		if !ok {
			t.Errorf("%s: %q queries %q, which wrapup does not serve (it serves %v)", where, expr, vs.Name, slices.Sorted(maps.Keys(served)))
			return nil
		}
		names = append(names, vs.Name)
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel && !slices.Contains(labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
				t.Errorf("%s: %q matches label %q, which %s does not have (%v)", where, expr, m.Name, vs.Name, labels)
			}
		}
		return nil
	})
	// A grouping names labels of what it aggregates.
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		agg, ok := n.(*parser.AggregateExpr)
		if !ok || agg.Without {
			return nil
		}
		have := map[string]bool{}
		parser.Inspect(agg.Expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				for _, l := range served[vs.Name] {
					have[l] = true
				}
			}
			return nil
		})
		for _, l := range agg.Grouping {
			if !have[l] && !slices.Contains(targetLabels, l) {
				t.Errorf("%s: %q groups by %q, which none of its series have", where, expr, l)
			}
		}
		return nil
	})
	return names
}

// queryable are the series a query may select, with their labels: wrapup's
// own (gc.ServedMetrics), controller-runtime's work-queue metrics as the
// manager serves them (read from its registry after one item went through a
// queue), and Prometheus's up.
func queryable(t *testing.T) map[string][]string {
	t.Helper()
	out := gc.ServedMetrics()
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "wrapup-test-probe"})
	q.Add("item")
	item, _ := q.Get()
	q.Done(item)
	q.ShutDown()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "workqueue_") || len(f.GetMetric()) == 0 {
			continue
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[f.GetName()+"_bucket"] = append(append([]string(nil), labels...), "le")
			out[f.GetName()+"_sum"] = labels
			out[f.GetName()+"_count"] = labels
		default:
			out[f.GetName()] = labels
		}
	}
	if _, ok := out["workqueue_queue_duration_seconds_bucket"]; !ok {
		t.Fatal("controller-runtime's registry serves no workqueue_queue_duration_seconds")
	}
	out["up"] = nil
	return out
}
