package decision

import (
	"context"
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
	"github.com/wrapup-dev/wrapup/test/util"
)

// perKind is what admins write first: one rule per kind, all of one
// priority, no selectors, and the install's annotated-triggers below.
func perKind() []*wrapupv1alpha1.CompletionRule {
	return []*wrapupv1alpha1.CompletionRule{
		util.MakeRule("jobs").TriggerKind("batch", "Job", "").Priority(10).Obj(),
		util.MakeRule("jobsets").TriggerKind("jobset.x-k8s.io", "JobSet", "").Priority(10).Obj(),
		util.MakeRule("pytorchjobs").TriggerKind("kubeflow.org", "PyTorchJob", "").Priority(10).Obj(),
		util.MakeRule("annotated-triggers").Priority(-1000).Obj(),
	}
}

// bothBroken is a Job rule whose two selectors do not parse.
func bothBroken() *wrapupv1alpha1.CompletionRule {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "In"}}}
	return util.MakeRule("both-broken").TriggerKind("batch", "Job", "").Priority(10).AppWrapperSelector(bad).NamespaceSelector(bad.DeepCopy()).Obj()
}

func TestSelectRule(t *testing.T) {
	bench := map[string]string{"role": "benchmark"}
	deleting := util.MakeRule("deleting").Priority(100).DeletionTimestamp(now).Obj()
	badSelector := util.MakeRule("bad-selector").Priority(100).
		AppWrapperSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}}).Obj()
	customJobs := util.MakeRule("jobs").Priority(50).TriggerKind("example.com", "Job", "").Obj()
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
		{name: "empty selectors match everything", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("all").Obj()}, want: "all"},
		{name: "appwrapper selector filters", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("bench").AppWrapperLabels(bench).Obj()}, awLabels: map[string]string{"role": "train"}, want: ""},
		{name: "namespace selector filters", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("team").NamespaceLabels(map[string]string{"team": "a"}).Obj()}, nsLabels: map[string]string{"team": "b"}, want: ""},
		{name: "highest priority wins", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("low").Priority(1).Obj(), util.MakeRule("high").Priority(10).AppWrapperLabels(bench).Obj()}, awLabels: bench, want: "high"},
		{name: "ties go to the first name", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("b").Priority(5).Obj(), util.MakeRule("a").Priority(5).Obj()}, want: "a"},
		{name: "negative priority loses", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("annotated-triggers").Priority(-1000).Obj(), util.MakeRule("z").Obj()}, want: "z"},
		{name: "rules being deleted are skipped", rules: []*wrapupv1alpha1.CompletionRule{deleting, util.MakeRule("b").Obj()}, want: "b"},
		// Fail closed: a rule that may match and cannot act blocks those below it.
		{name: "a selector that does not parse blocks", rules: []*wrapupv1alpha1.CompletionRule{badSelector, util.MakeRule("b").Obj()}, want: "bad-selector", blocked: true},
		{name: "a rule that does not compile blocks", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("broken").Priority(10).Obj(), util.MakeRule("ok").Obj()}, broken: "broken", want: "broken", blocked: true},
		{name: "a broken rule that does not match blocks nothing", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("broken").Priority(10).AppWrapperLabels(bench).Obj(), util.MakeRule("ok").Obj()}, broken: "broken", want: "ok"},
		{name: "a broken rule below the winner changes nothing", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("broken").Priority(-1).Obj(), util.MakeRule("ok").Obj()}, broken: "broken", want: "ok"},
		{name: "a rule whose kind is not served blocks", rules: []*wrapupv1alpha1.CompletionRule{customJobs, util.MakeRule("ok").Obj()},
			kinds: map[schema.GroupKind]Kind{{Group: "example.com", Kind: "Job"}: {State: KindNotServed}}, want: "jobs", blocked: true},
		{name: "a rule whose kind is not watchable blocks", rules: []*wrapupv1alpha1.CompletionRule{customJobs, util.MakeRule("ok").Obj()},
			kinds: map[schema.GroupKind]Kind{{Group: "example.com", Kind: "Job"}: {State: KindNotWatchable, Message: "forbidden"}}, want: "jobs", blocked: true},
		{name: "a rule whose kind is still listing wins", rules: []*wrapupv1alpha1.CompletionRule{customJobs, util.MakeRule("ok").Obj()},
			kinds: map[schema.GroupKind]Kind{{Group: "example.com", Kind: "Job"}: {State: KindPending}}, want: "jobs"},
		// DESIGN 1a: a rule applies only where it has a candidate trigger.
		{name: "one rule per kind, same priority: each finishes its own kind (a PyTorchJob)", rules: perKind(), components: []string{"kubeflow.org/v1/PyTorchJob", "apps/v1/Deployment"}, want: "pytorchjobs"},
		{name: "one rule per kind, same priority: each finishes its own kind (a JobSet)", rules: perKind(), components: []string{"jobset.x-k8s.io/v1alpha2/JobSet"}, want: "jobsets"},
		{name: "one rule per kind, same priority: each finishes its own kind (a Job)", rules: perKind(), components: []string{"apps/v1/Deployment", "batch/v1/Job"}, want: "jobs"},
		{name: "one rule per kind: an annotated ConfigMap goes to annotated-triggers", rules: perKind(), components: []string{"v1/ConfigMap*"}, want: "annotated-triggers"},
		{name: "a rule without a kind does not apply without an annotated component", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("annotated-triggers").Obj()}, components: []string{"batch/v1/Job"}, want: ""},
		{name: "a broken rule of a kind the AppWrapper lacks blocks nothing", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("pytorchjobs").TriggerKind("kubeflow.org", "PyTorchJob", "").Priority(10).Obj(), util.MakeRule("jobs").TriggerKind("batch", "Job", "").Obj()},
			broken: "pytorchjobs", components: []string{"batch/v1/Job"}, want: "jobs"},
		{name: "a broken rule of a kind the AppWrapper has blocks", rules: []*wrapupv1alpha1.CompletionRule{util.MakeRule("pytorchjobs").TriggerKind("kubeflow.org", "PyTorchJob", "").Priority(10).Obj(), util.MakeRule("jobs").TriggerKind("batch", "Job", "").Obj()},
			broken: "pytorchjobs", components: []string{"batch/v1/Job", "kubeflow.org/v1/PyTorchJob"}, want: "pytorchjobs", blocked: true},
		{name: "both selectors broken: the rule blocks where it would apply", rules: []*wrapupv1alpha1.CompletionRule{bothBroken(), util.MakeRule("jobs").TriggerKind("batch", "Job", "").Obj()},
			components: []string{"batch/v1/Job"}, want: "both-broken", blocked: true},
		{name: "both selectors broken: the rule does not apply without its kind", rules: []*wrapupv1alpha1.CompletionRule{bothBroken(), util.MakeRule("pods").TriggerKind("", "Pod", "").Obj()},
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
			w := util.MakeAppWrapper("run", "ns")
			for k, v := range tc.awLabels {
				w.Label(k, v)
			}
			for i, c := range comps {
				var ann map[string]string
				if strings.HasSuffix(c, "*") {
					c, ann = strings.TrimSuffix(c, "*"), map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
				}
				at := strings.LastIndex(c, "/")
				w.Component(util.MakeObject(c[:at], c[at+1:], fmt.Sprintf("c%d", i)).Obj(), ann)
			}
			sel := selectRule(rules, w.Obj(), tc.nsLabels, tc.kinds)
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

func TestFindTrigger(t *testing.T) {
	trig := map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
	jobRule := util.MakeRule("jobs").TriggerKind("batch", "Job", "").Obj()
	namedRule := util.MakeRule("named").TriggerKind("batch", "Job", "bench").Obj()
	annotated := util.MakeRule("annotated").Obj()
	podRule := util.MakeRule("pods").TriggerKind("", "Pod", "").Obj()

	tests := []struct {
		name       string
		rule       *wrapupv1alpha1.CompletionRule
		aw         *util.AppWrapperWrapper
		want       Ref
		wantReason string
		wantQuiet  bool
	}{
		{
			name: "the one Job among Deployments",
			rule: jobRule,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("apps/v1", "Deployment", "inf").Obj(), nil).
				Component(util.MakeObject("batch/v1", "Job", "bench").Obj(), nil),
			want: Ref{Index: 1, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: "bench", Template: "bench"},
		},
		{
			name: "two Jobs are ambiguous",
			rule: jobRule,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("batch/v1", "Job", "a").Obj(), nil).
				Component(util.MakeObject("batch/v1", "Job", "b").Obj(), nil),
			wantReason: wrapupv1alpha1.ReasonAmbiguousTrigger,
		},
		{
			name: "a name picks one of two Jobs",
			rule: namedRule,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("batch/v1", "Job", "warmup").Obj(), nil).
				Component(util.MakeObject("batch/v1", "Job", "bench").Obj(), nil),
			want: Ref{Index: 1, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: "bench", Template: "bench"},
		},
		{
			name: "no Job",
			rule: jobRule,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("apps/v1", "Deployment", "inf").Obj(), nil),
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
		},
		{
			name: "the group must match, not only the kind",
			rule: jobRule,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("example.com/v1", "Job", "other").Obj(), nil),
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
		},
		{
			name: "the annotated component",
			rule: annotated,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("batch/v1", "Job", "a").Obj(), nil).
				Component(util.MakeObject("kubeflow.org/v1", "PyTorchJob", "train").Obj(), trig),
			want: Ref{Index: 1, Kind: schema.GroupKind{Group: "kubeflow.org", Kind: "PyTorchJob"}, Version: "v1", Name: "train", Template: "train", Annotated: true},
		},
		{
			name: "no annotated component: the rule does not apply, quietly",
			rule: annotated,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("batch/v1", "Job", "a").Obj(), nil),
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
			wantQuiet:  true,
		},
		{
			name: "the annotation is case-insensitive",
			rule: annotated,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("batch/v1", "Job", "a").Obj(), map[string]string{wrapupv1alpha1.TriggerAnnotation: "True"}),
			want: Ref{Index: 0, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: "a", Template: "a", Annotated: true},
		},
		{
			name: "an annotated component with no kind is reported",
			rule: annotated,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("batch/v1", "", "a").Obj(), trig),
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
		},
		{
			name: "generateName takes the name from componentStatus",
			rule: podRule,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("v1", "Pod", "").Obj(), nil).
				ComponentStatus("gen-x7k2p"),
			want: Ref{Index: 0, Kind: schema.GroupKind{Kind: "Pod"}, Version: "v1", Name: "gen-x7k2p", Template: "gen-*"},
		},
		{
			name: "generateName before the AppWrapper controller created it",
			rule: podRule,
			aw: util.MakeAppWrapper("run", "ns").
				Component(util.MakeObject("v1", "Pod", "").Obj(), nil),
			want: Ref{Index: 0, Kind: schema.GroupKind{Kind: "Pod"}, Version: "v1", Template: "gen-*"},
		},
		{
			name:       "a template that is not JSON is skipped",
			rule:       jobRule,
			aw:         util.MakeAppWrapper("run", "ns").RawComponent([]byte("{not json"), nil),
			wantReason: wrapupv1alpha1.ReasonNoTrigger,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, nt := FindTrigger(tc.aw.Obj(), tc.rule)
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
	tests := []struct {
		name        string
		phase       awv1beta2.AppWrapperPhase
		annotations map[string]string
		unhealthy   bool
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
			unhealthy: true, retries: 1, firstSeen: now.Add(-grace), wantWait: UnhealthyBackstop},
		{name: "Unhealthy with retries left is final after the backstop", phase: awv1beta2.AppWrapperRunning,
			unhealthy: true, retries: 1, firstSeen: now.Add(-grace - UnhealthyBackstop), wantFinal: true},
		{name: "Unhealthy with no retries left is final past the grace", phase: awv1beta2.AppWrapperRunning,
			unhealthy: true, retries: 3, firstSeen: now.Add(-grace), wantFinal: true},
		{name: "the AppWrapper's retryLimit counts", phase: awv1beta2.AppWrapperRunning,
			annotations: map[string]string{awv1beta2.RetryLimitAnnotation: "5"}, unhealthy: true, retries: 3, firstSeen: now.Add(-grace), wantWait: UnhealthyBackstop},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := util.MakeAppWrapper("run", "ns").Phase(tc.phase).Retries(tc.retries)
			for k, v := range tc.annotations {
				w.Annotation(k, v)
			}
			if tc.unhealthy {
				w.Condition(awv1beta2.Unhealthy, metav1.ConditionTrue, "FoundFailedPods", time.Time{})
			}
			final, wait, why := failureFinality(w.Obj(), tc.firstSeen, now, grace)
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
	aw := util.MakeAppWrapper("aw", "").UID("u1").Obj()
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
	onTemplate := func(name string) runtime.Object {
		return util.MakeObject("batch/v1", "Job", name).Annotation(wrapupv1alpha1.TriggerAnnotation, "true").Obj()
	}
	aw := util.MakeAppWrapper("run", "ns").Component(util.MakeObject("batch/v1", "Job", "warmup").Obj(), nil).Component(onTemplate("bench"), nil).Obj()
	for _, r := range []*wrapupv1alpha1.CompletionRule{util.MakeRule("annotated").Obj(), util.MakeRule("jobs").TriggerKind("batch", "Job", "").Obj()} {
		refs, nt := FindTriggers(aw, r)
		if nt != nil || len(refs) != 1 || refs[0].Name != "bench" {
			t.Errorf("rule %s: triggers %+v (%v), want the Job annotated on its template, bench", r.Name, refs, nt)
		}
	}
	// Two annotated of the kind: still ambiguous.
	aw = util.MakeAppWrapper("run", "ns").Component(onTemplate("warmup"), nil).Component(onTemplate("bench"), nil).Obj()
	if _, nt := FindTriggers(aw, util.MakeRule("jobs").TriggerKind("batch", "Job", "").Obj()); nt == nil || nt.Reason != wrapupv1alpha1.ReasonAmbiguousTrigger {
		t.Errorf("two annotated Jobs: %v, want AmbiguousTrigger", nt)
	}

	in := input(t, appWrapper().Annotation(wrapupv1alpha1.TriggerAnnotation, "true").Obj(), trigger(bench(jobUID)), jobs().Obj())
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
	in := input(t, appWrapper().Annotation(wrapupv1alpha1.TriggerAnnotation, "true").Obj(), trigger(bench(jobUID)), jobs().Obj())
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

// A rule that wants a component of a kind the AppWrapper has none of says
// which, with the article its name takes.
func TestWantedNamesTheKind(t *testing.T) {
	for kind, want := range map[string]string{"EvalRun": "an EvalRun.example.com component", "Job": "a Job.example.com component"} {
		if got := wanted(util.MakeRule("r").TriggerKind("example.com", kind, "").Obj()); got != want {
			t.Errorf("wanted = %q, want %q", got, want)
		}
	}
}
