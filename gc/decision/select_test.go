package decision

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

func rule(name string, prio int32, awSel, nsSel map[string]string) *wrapupv1alpha1.CompletionRule {
	r := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: name}}
	r.Spec.Priority = prio
	if awSel != nil {
		r.Spec.AppWrapperSelector = &metav1.LabelSelector{MatchLabels: awSel}
	}
	if nsSel != nil {
		r.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: nsSel}
	}
	return r
}

func kinded(name, group, kind string, prio int32) *wrapupv1alpha1.CompletionRule {
	r := rule(name, prio, nil, nil)
	r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: group, Kind: kind}
	return r
}

// perKind is what admins write first: one rule per kind, all of one
// priority, no selectors, and the install's annotated-triggers below.
func perKind() []*wrapupv1alpha1.CompletionRule {
	return []*wrapupv1alpha1.CompletionRule{
		kinded("jobs", "batch", "Job", 10), kinded("jobsets", "jobset.x-k8s.io", "JobSet", 10),
		kinded("pytorchjobs", "kubeflow.org", "PyTorchJob", 10), rule("annotated-triggers", -1000, nil, nil),
	}
}

// bothBroken is a Job rule whose two selectors do not parse.
func bothBroken() *wrapupv1alpha1.CompletionRule {
	r := kinded("both-broken", "batch", "Job", 10)
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "In"}}}
	r.Spec.AppWrapperSelector, r.Spec.NamespaceSelector = bad, bad.DeepCopy()
	return r
}

func TestSelectRule(t *testing.T) {
	bench := map[string]string{"role": "benchmark"}
	deleting := rule("deleting", 100, nil, nil)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	badSelector := rule("bad-selector", 100, nil, nil)
	badSelector.Spec.AppWrapperSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}}
	jobs := rule("jobs", 50, nil, nil)
	jobs.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "example.com", Kind: "Job"}
	tests := []struct {
		name     string
		rules    []*wrapupv1alpha1.CompletionRule
		awLabels map[string]string
		nsLabels map[string]string
		broken   string
		kinds    map[schema.GroupKind]Kind
		want     string
		blocked  bool
		// components are the AppWrapper's, as apiVersion/kind, * for one
		// annotated as the trigger; by default an annotated batch Job and
		// an example.com Job.
		components []string
	}{
		{name: "no rules", want: ""},
		{name: "empty selectors match everything", rules: []*wrapupv1alpha1.CompletionRule{rule("all", 0, nil, nil)}, want: "all"},
		{name: "appwrapper selector filters", rules: []*wrapupv1alpha1.CompletionRule{rule("bench", 0, bench, nil)}, awLabels: map[string]string{"role": "train"}, want: ""},
		{name: "namespace selector filters", rules: []*wrapupv1alpha1.CompletionRule{rule("team", 0, nil, map[string]string{"team": "a"})}, nsLabels: map[string]string{"team": "b"}, want: ""},
		{name: "highest priority wins", rules: []*wrapupv1alpha1.CompletionRule{rule("low", 1, nil, nil), rule("high", 10, bench, nil)}, awLabels: bench, want: "high"},
		{name: "ties go to the first name", rules: []*wrapupv1alpha1.CompletionRule{rule("b", 5, nil, nil), rule("a", 5, nil, nil)}, want: "a"},
		{name: "negative priority loses", rules: []*wrapupv1alpha1.CompletionRule{rule("annotated-triggers", -1000, nil, nil), rule("z", 0, nil, nil)}, want: "z"},
		{name: "rules being deleted are skipped", rules: []*wrapupv1alpha1.CompletionRule{deleting, rule("b", 0, nil, nil)}, want: "b"},
		// Fail closed: a rule that may match and cannot act blocks those below it.
		{name: "a selector that does not parse blocks", rules: []*wrapupv1alpha1.CompletionRule{badSelector, rule("b", 0, nil, nil)}, want: "bad-selector", blocked: true},
		{name: "a rule that does not compile blocks", rules: []*wrapupv1alpha1.CompletionRule{rule("broken", 10, nil, nil), rule("ok", 0, nil, nil)}, broken: "broken", want: "broken", blocked: true},
		{name: "a broken rule that does not match blocks nothing", rules: []*wrapupv1alpha1.CompletionRule{rule("broken", 10, bench, nil), rule("ok", 0, nil, nil)}, broken: "broken", want: "ok"},
		{name: "a broken rule below the winner changes nothing", rules: []*wrapupv1alpha1.CompletionRule{rule("broken", -1, nil, nil), rule("ok", 0, nil, nil)}, broken: "broken", want: "ok"},
		{name: "a rule whose kind is not served blocks", rules: []*wrapupv1alpha1.CompletionRule{jobs, rule("ok", 0, nil, nil)},
			kinds: map[schema.GroupKind]Kind{{Group: "example.com", Kind: "Job"}: {State: KindNotServed}}, want: "jobs", blocked: true},
		{name: "a rule whose kind is not watchable blocks", rules: []*wrapupv1alpha1.CompletionRule{jobs, rule("ok", 0, nil, nil)},
			kinds: map[schema.GroupKind]Kind{{Group: "example.com", Kind: "Job"}: {State: KindNotWatchable, Message: "forbidden"}}, want: "jobs", blocked: true},
		{name: "a rule whose kind is still listing wins", rules: []*wrapupv1alpha1.CompletionRule{jobs, rule("ok", 0, nil, nil)},
			kinds: map[schema.GroupKind]Kind{{Group: "example.com", Kind: "Job"}: {State: KindPending}}, want: "jobs"},
		// DESIGN 1a: a rule applies only where it has a candidate trigger.
		{name: "one rule per kind, same priority: each finishes its own kind (a PyTorchJob)", rules: perKind(), components: []string{"kubeflow.org/v1/PyTorchJob", "apps/v1/Deployment"}, want: "pytorchjobs"},
		{name: "one rule per kind, same priority: each finishes its own kind (a JobSet)", rules: perKind(), components: []string{"jobset.x-k8s.io/v1alpha2/JobSet"}, want: "jobsets"},
		{name: "one rule per kind, same priority: each finishes its own kind (a Job)", rules: perKind(), components: []string{"apps/v1/Deployment", "batch/v1/Job"}, want: "jobs"},
		{name: "one rule per kind: an annotated ConfigMap goes to annotated-triggers", rules: perKind(), components: []string{"v1/ConfigMap*"}, want: "annotated-triggers"},
		{name: "a rule without a kind does not apply without an annotated component", rules: []*wrapupv1alpha1.CompletionRule{rule("annotated-triggers", 0, nil, nil)}, components: []string{"batch/v1/Job"}, want: ""},
		{name: "a broken rule of a kind the AppWrapper lacks blocks nothing", rules: []*wrapupv1alpha1.CompletionRule{kinded("pytorchjobs", "kubeflow.org", "PyTorchJob", 10), kinded("jobs", "batch", "Job", 0)},
			broken: "pytorchjobs", components: []string{"batch/v1/Job"}, want: "jobs"},
		{name: "a broken rule of a kind the AppWrapper has blocks", rules: []*wrapupv1alpha1.CompletionRule{kinded("pytorchjobs", "kubeflow.org", "PyTorchJob", 10), kinded("jobs", "batch", "Job", 0)},
			broken: "pytorchjobs", components: []string{"batch/v1/Job", "kubeflow.org/v1/PyTorchJob"}, want: "pytorchjobs", blocked: true},
		{name: "both selectors broken: the rule blocks where it would apply", rules: []*wrapupv1alpha1.CompletionRule{bothBroken(), kinded("jobs", "batch", "Job", 0)},
			components: []string{"batch/v1/Job"}, want: "both-broken", blocked: true},
		{name: "both selectors broken: the rule does not apply without its kind", rules: []*wrapupv1alpha1.CompletionRule{bothBroken(), kinded("pods", "", "Pod", 0)},
			components: []string{"v1/Pod"}, want: "pods"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rules := make([]Rule, len(tc.rules))
			for i, r := range tc.rules {
				rules[i] = compiled(t, r)
				if r.Name == tc.broken {
					rules[i] = Rule{Rule: r, Err: errBroken}
				}
			}
			comps := tc.components
			if comps == nil {
				comps = []string{"batch/v1/Job*", "example.com/v1/Job"}
			}
			aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", Labels: tc.awLabels}}
			for i, c := range comps {
				var ann map[string]string
				if strings.HasSuffix(c, "*") {
					c, ann = strings.TrimSuffix(c, "*"), map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
				}
				at := strings.LastIndex(c, "/")
				aw.Spec.Components = append(aw.Spec.Components, component(t, c[:at], c[at+1:], fmt.Sprintf("c%d", i), ann))
			}
			sel := selectRule(rules, aw, tc.nsLabels, tc.kinds)
			got := ""
			if sel.winner != nil {
				got = sel.winner.Rule.Name
			}
			if got != tc.want || (sel.blocked != "") != tc.blocked {
				t.Errorf("winner = %q, blocked %q; want %q, blocked %v", got, sel.blocked, tc.want, tc.blocked)
			}
			if len(sel.standings) != len(tc.rules) {
				t.Fatalf("%d standings for %d rules", len(sel.standings), len(tc.rules))
			}
			if tc.want != "" && (sel.standings[0].Name != tc.want || !sel.standings[0].Wins) {
				t.Errorf("first standing %+v, want the winner", sel.standings[0])
			}
		})
	}
}

func component(t *testing.T, apiVersion, kind, name string, annotations map[string]string) awv1beta2.AppWrapperComponent {
	t.Helper()
	obj := map[string]any{"metadata": map[string]any{}}
	if apiVersion != "" {
		obj["apiVersion"] = apiVersion
	}
	if kind != "" {
		obj["kind"] = kind
	}
	if name != "" {
		obj["metadata"].(map[string]any)["name"] = name
	} else {
		obj["metadata"].(map[string]any)["generateName"] = "gen-"
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return awv1beta2.AppWrapperComponent{Annotations: annotations, Template: runtime.RawExtension{Raw: raw}}
}

func TestFindTrigger(t *testing.T) {
	trig := map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
	jobRule := rule("jobs", 0, nil, nil)
	jobRule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}
	namedRule := rule("named", 0, nil, nil)
	namedRule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job", Name: "bench"}
	annotated := rule("annotated", 0, nil, nil)
	podRule := rule("pods", 0, nil, nil)
	podRule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{Kind: "Pod"}

	tests := []struct {
		name       string
		rule       *wrapupv1alpha1.CompletionRule
		components func(t *testing.T) []awv1beta2.AppWrapperComponent
		statusName string
		want       Ref
		wantReason string
		wantQuiet  bool
	}{
		{
			name: "the one Job among Deployments",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "apps/v1", "Deployment", "inf", nil), component(t, "batch/v1", "Job", "bench", nil)}
			},
			want: Ref{Index: 1, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: "bench", Template: "bench"},
		},
		{
			name: "two Jobs are ambiguous",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "a", nil), component(t, "batch/v1", "Job", "b", nil)}
			},
			wantReason: wrapupv1alpha1.ReasonAmbiguousTrigger,
		},
		{
			name: "a name picks one of two Jobs",
			rule: namedRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "warmup", nil), component(t, "batch/v1", "Job", "bench", nil)}
			},
			want: Ref{Index: 1, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: "bench", Template: "bench"},
		},
		{
			name: "no Job",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "apps/v1", "Deployment", "inf", nil)}
			},
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
		},
		{
			name: "the group must match, not only the kind",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "example.com/v1", "Job", "other", nil)}
			},
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
		},
		{
			name: "the annotated component",
			rule: annotated,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "a", nil), component(t, "kubeflow.org/v1", "PyTorchJob", "train", trig)}
			},
			want: Ref{Index: 1, Kind: schema.GroupKind{Group: "kubeflow.org", Kind: "PyTorchJob"}, Version: "v1", Name: "train", Template: "train", Annotated: true},
		},
		{
			name: "no annotated component: the rule does not apply, quietly",
			rule: annotated,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "a", nil)}
			},
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
			wantQuiet:  true,
		},
		{
			name: "the annotation is case-insensitive",
			rule: annotated,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "a", map[string]string{wrapupv1alpha1.TriggerAnnotation: "True"})}
			},
			want: Ref{Index: 0, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: "a", Template: "a", Annotated: true},
		},
		{
			name: "an annotated component with no kind is reported",
			rule: annotated,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "", "a", trig)}
			},
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
		},
		{
			name: "generateName takes the name from componentStatus",
			rule: podRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "v1", "Pod", "", nil)}
			},
			statusName: "gen-x7k2p",
			want:       Ref{Index: 0, Kind: schema.GroupKind{Kind: "Pod"}, Version: "v1", Name: "gen-x7k2p", Template: "gen-*"},
		},
		{
			name: "generateName before the AppWrapper controller created it",
			rule: podRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{component(t, "v1", "Pod", "", nil)}
			},
			want: Ref{Index: 0, Kind: schema.GroupKind{Kind: "Pod"}, Version: "v1", Template: "gen-*"},
		},
		{
			name: "a template that is not JSON is skipped",
			rule: jobRule,
			components: func(t *testing.T) []awv1beta2.AppWrapperComponent {
				return []awv1beta2.AppWrapperComponent{{Template: runtime.RawExtension{Raw: []byte("{not json")}}}
			},
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			aw := &awv1beta2.AppWrapper{}
			aw.Spec.Components = tc.components(t)
			if tc.statusName != "" {
				aw.Status.ComponentStatus = []awv1beta2.AppWrapperComponentStatus{{Name: tc.statusName}}
			}
			got, nt := FindTrigger(aw, tc.rule)
			if tc.wantReason != "" {
				if nt == nil || nt.Reason != tc.wantReason {
					t.Fatalf("FindTrigger = %+v, want reason %s", nt, tc.wantReason)
				}
				if !strings.Contains(nt.Message, tc.rule.Name) {
					t.Errorf("message %q does not name the rule", nt.Message)
				}
				if nt.Quiet != tc.wantQuiet {
					t.Errorf("quiet = %v, want %v", nt.Quiet, tc.wantQuiet)
				}
				return
			}
			if nt != nil {
				t.Fatalf("FindTrigger: %v", nt)
			}
			if got != tc.want {
				t.Errorf("findTrigger = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFailureFinality(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	grace := DefaultFailureGracePeriod
	unhealthy := []metav1.Condition{{Type: string(awv1beta2.Unhealthy), Status: metav1.ConditionTrue, Reason: "FoundFailedPods"}}
	tests := []struct {
		name        string
		phase       awv1beta2.AppWrapperPhase
		annotations map[string]string
		conditions  []metav1.Condition
		retries     int32
		firstSeen   time.Time
		wantFinal   bool
		wantWait    time.Duration
	}{
		{name: "Failed is final", phase: awv1beta2.AppWrapperFailed, firstSeen: now, wantFinal: true},
		{name: "Resetting is a retry", phase: awv1beta2.AppWrapperResetting, firstSeen: now.Add(-time.Hour)},
		{name: "Resuming is a retry", phase: awv1beta2.AppWrapperResuming, firstSeen: now.Add(-time.Hour)},
		{name: "Running within the grace period waits", phase: awv1beta2.AppWrapperRunning, firstSeen: now.Add(-time.Minute), wantWait: grace - time.Minute},
		{name: "Running past the grace period is final", phase: awv1beta2.AppWrapperRunning, firstSeen: now.Add(-grace), wantFinal: true},
		// The AppWrapper controller resets at up to failure + recheck +
		// its failure grace + its latency: the default grace has slack.
		{name: "the default grace outlasts the AppWrapper controller's recheck and grace", phase: awv1beta2.AppWrapperRunning,
			firstSeen: now.Add(-AppWrapperRecheckPeriod - AppWrapperFailureGracePeriod - 10*time.Second), wantWait: Slack - 10*time.Second},
		{name: "the AppWrapper's own grace period counts", phase: awv1beta2.AppWrapperRunning,
			annotations: map[string]string{awv1beta2.FailureGracePeriodDurationAnnotation: "10m"}, firstSeen: now.Add(-5 * time.Minute),
			wantWait: 5*time.Minute + AppWrapperRecheckPeriod + Slack},
		{name: "a bad annotation falls back to the default", phase: awv1beta2.AppWrapperRunning,
			annotations: map[string]string{awv1beta2.FailureGracePeriodDurationAnnotation: "soon"}, firstSeen: now.Add(-grace), wantFinal: true},
		{name: "Unhealthy with retries left waits for the phase past the grace", phase: awv1beta2.AppWrapperRunning,
			conditions: unhealthy, retries: 1, firstSeen: now.Add(-grace), wantWait: UnhealthyBackstop},
		{name: "Unhealthy with retries left is final after the backstop", phase: awv1beta2.AppWrapperRunning,
			conditions: unhealthy, retries: 1, firstSeen: now.Add(-grace - UnhealthyBackstop), wantFinal: true},
		{name: "Unhealthy with no retries left is final past the grace", phase: awv1beta2.AppWrapperRunning,
			conditions: unhealthy, retries: 3, firstSeen: now.Add(-grace), wantFinal: true},
		{name: "the AppWrapper's retryLimit counts", phase: awv1beta2.AppWrapperRunning,
			annotations: map[string]string{awv1beta2.RetryLimitAnnotation: "5"}, conditions: unhealthy, retries: 3, firstSeen: now.Add(-grace), wantWait: UnhealthyBackstop},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			aw := &awv1beta2.AppWrapper{}
			aw.Status.Phase = tc.phase
			aw.Annotations = tc.annotations
			aw.Status.Conditions = tc.conditions
			aw.Status.Retries = tc.retries
			final, wait, why := failureFinality(aw, tc.firstSeen, now, grace)
			if final != tc.wantFinal || wait != tc.wantWait {
				t.Errorf("final = %v, wait = %v; want %v, %v", final, wait, tc.wantFinal, tc.wantWait)
			}
			if !final && why == "" {
				t.Error("no reason given for waiting")
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("truncate kept %q", got)
	}
	got := Truncate(strings.Repeat("é", 10), 9) // 2 bytes each
	if !utf8.ValidString(got) || len(got) > 9 || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate = %q (%d bytes): want valid UTF-8 of at most 9 bytes ending in …", got, len(got))
	}
}

func TestOwnedBy(t *testing.T) {
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "aw", UID: "u1"}}
	ref := func(apiVersion string, uid types.UID, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: "AppWrapper", Name: "aw", UID: uid, Controller: ptr.To(controller)}}
	}
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		want bool
	}{
		{name: "controlled by the AppWrapper", refs: ref("workload.codeflare.dev/v1beta2", "u1", true), want: true},
		{name: "another AppWrapper of the same name", refs: ref("workload.codeflare.dev/v1beta2", "u2", true)},
		{name: "an owner, not the controller", refs: ref("workload.codeflare.dev/v1beta2", "u1", false)},
		{name: "an AppWrapper kind of another group", refs: ref("example.com/v1", "u1", true)},
		{name: "no owner"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{OwnerReferences: tc.refs}
			if got := OwnedBy(obj, aw); got != tc.want {
				t.Errorf("ownedBy = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTriggerAnnotationWherePeoplePutIt: wrapup.dev/trigger is read on the
// component (spec.components[i].annotations) and on the component's
// template metadata; among a kinded rule's several candidates, the
// annotated one is the trigger. On the AppWrapper's own metadata it names
// nothing: a Warning says where it belongs.
func TestTriggerAnnotationWherePeoplePutIt(t *testing.T) {
	onTemplate := func(kind, name string) awv1beta2.AppWrapperComponent {
		raw, _ := json.Marshal(map[string]any{"apiVersion": "batch/v1", "kind": kind, "metadata": map[string]any{"name": name,
			"annotations": map[string]any{wrapupv1alpha1.TriggerAnnotation: "true"}}})
		return awv1beta2.AppWrapperComponent{Template: runtime.RawExtension{Raw: raw}}
	}
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns"}}
	aw.Spec.Components = []awv1beta2.AppWrapperComponent{component(t, "batch/v1", "Job", "warmup", nil), onTemplate("Job", "bench")}
	for _, r := range []*wrapupv1alpha1.CompletionRule{rule("annotated", 0, nil, nil), kinded("jobs", "batch", "Job", 0)} {
		refs, nt := FindTriggers(aw, r)
		if nt != nil || len(refs) != 1 || refs[0].Name != "bench" {
			t.Errorf("rule %s: triggers %+v (%v), want the Job annotated on its template, bench", r.Name, refs, nt)
		}
	}
	// Two annotated of the kind: still ambiguous.
	aw.Spec.Components[0] = onTemplate("Job", "warmup")
	if _, nt := FindTriggers(aw, kinded("jobs", "batch", "Job", 0)); nt == nil || nt.Reason != wrapupv1alpha1.ReasonAmbiguousTrigger {
		t.Errorf("two annotated Jobs: %v, want AmbiguousTrigger", nt)
	}

	in := input(t, appWrapper(t).annotate(wrapupv1alpha1.TriggerAnnotation, "true").obj(), job(jobUID, ""), jobRule("jobs", 0))
	d := Decide(context.Background(), in)
	found := false
	for _, e := range d.Events {
		found = found || e.Reason == wrapupv1alpha1.ReasonTriggerAnnotationMisplaced && strings.Contains(e.Message, "spec.components[i].annotations")
	}
	if !found {
		t.Errorf("events %+v: want a Warning that the AppWrapper's own annotation is misplaced", d.Events)
	}
}

// TestWarningsSaidOnce: a Warning said after the previous decision
// (Input.Warned) is not said again; the decision still names it among
// what it warns of (Warned), and a Warning that changes is said.
func TestWarningsSaidOnce(t *testing.T) {
	in := input(t, appWrapper(t).annotate(wrapupv1alpha1.TriggerAnnotation, "true").obj(), job(jobUID, ""), jobRule("jobs", 0))
	misplaced := func(d Decision) int {
		n := 0
		for _, e := range d.Events {
			if e.Reason == wrapupv1alpha1.ReasonTriggerAnnotationMisplaced {
				n++
			}
		}
		return n
	}
	first := Decide(context.Background(), in)
	if misplaced(first) != 1 || len(first.Warned) != 1 {
		t.Fatalf("first decision: events %+v, warned %q; want the Warning said", first.Events, first.Warned)
	}
	in.Warned = first.Warned
	again := Decide(context.Background(), in)
	if misplaced(again) != 0 || !slices.Equal(again.Warned, first.Warned) {
		t.Errorf("the same state again: events %+v, warned %q; want the Warning not said again, still warned of", again.Events, again.Warned)
	}
	in.Warned = []string{wrapupv1alpha1.ReasonTriggerAnnotationMisplaced + "\x00an older message"}
	if changed := Decide(context.Background(), in); misplaced(changed) != 1 {
		t.Errorf("a Warning whose message changed: events %+v, want it said", changed.Events)
	}
}
