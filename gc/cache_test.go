package gc

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// TestCachedAppWrapperDecidesAsWhole: the AppWrapper as wrapup's cache keeps
// it (slimAppWrapper: only the annotations decisions read, shared label and
// annotation sets) is decided as the whole one, whatever the annotations of
// the AppWrapper controller and of wrapup say, and keeps exactly the
// annotations that decisions read.
func TestCachedAppWrapperDecidesAsWhole(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const uid = "aw-uid"
	annotations := []map[string]string{
		nil,
		{"kubectl.kubernetes.io/last-applied-configuration": `{"a":"b"}`, awv1beta2.AdmissionGracePeriodDurationAnnotation: "2h", awv1beta2.WarmupGracePeriodDurationAnnotation: "2h"},
		{awv1beta2.RetryLimitAnnotation: "0"},
		{awv1beta2.RetryLimitAnnotation: "5"},
		{awv1beta2.FailureGracePeriodDurationAnnotation: "1s", awv1beta2.RetryPausePeriodDurationAnnotation: "1s"},
		{awv1beta2.DeletionOnFailureGracePeriodAnnotation: "1h", awv1beta2.ForcefulDeletionGracePeriodAnnotation: "1m", awv1beta2.SuccessTTLAnnotation: "1s"},
		{wrapupv1alpha1.IgnoreAnnotation: "true", awv1beta2.TerminalExitCodesAnnotation: "1", awv1beta2.RetryableExitCodesAnnotation: "2"},
	}
	type variant struct {
		phase     awv1beta2.AppWrapperPhase
		unhealthy bool
		job       string
		recorded  bool
	}
	var variants []variant
	for _, phase := range []awv1beta2.AppWrapperPhase{awv1beta2.AppWrapperRunning, awv1beta2.AppWrapperFailed, awv1beta2.AppWrapperSucceeded} {
		for _, unhealthy := range []bool{false, true} {
			for _, job := range []string{"", "Complete", "Failed"} {
				for _, recorded := range []bool{false, true} {
					variants = append(variants, variant{phase, unhealthy, job, recorded})
				}
			}
		}
	}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs", UID: "rule-uid"},
		Spec: wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"},
			OnSuccess: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](0)},
			OnFailure: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](60)}}}
	policy, err := celpolicies.Compile(&rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	jobGK := schema.GroupKind{Group: "batch", Kind: "Job"}
	decided := 0
	for i, ann := range annotations {
		for _, v := range variants {
			t.Run(fmt.Sprintf("annotations %d, %+v", i, v), func(t *testing.T) {
				aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: uid, ResourceVersion: "5",
					Labels: map[string]string{"team": "a"}, Annotations: map[string]string{}}}
				for k, val := range ann {
					aw.Annotations[k] = val
				}
				tmpl, _ := json.Marshal(map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "bench"}, "spec": map[string]any{"parallelism": 1}})
				aw.Spec.Components = []awv1beta2.AppWrapperComponent{{Template: runtime.RawExtension{Raw: tmpl}}}
				aw.Status.Phase, aw.Status.Retries = v.phase, 1
				status := metav1.ConditionFalse
				if v.unhealthy {
					status = metav1.ConditionTrue
				}
				aw.Status.Conditions = []metav1.Condition{{Type: string(awv1beta2.Unhealthy), Status: status, Reason: "r", LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Minute))},
					{Type: string(awv1beta2.QuotaReserved), Status: metav1.ConditionTrue, Reason: "r"}}
				var rec *wrapupv1alpha1.CompletionRecord
				if v.recorded {
					// The run's record, and a tenant's forgery on the
					// metadata, which no decision reads.
					rec = util.MakeRecord(aw, rule, wrapupv1alpha1.OutcomeFailed, now.Add(-10*time.Minute)).Trigger(0, "job-uid").Message("failed").ResourceVersion("3").Obj()
					aw.Labels[wrapupv1alpha1.OutcomeLabel] = string(wrapupv1alpha1.OutcomeSucceeded)
					aw.Annotations[wrapupv1alpha1.FinishedAtAnnotation] = now.Add(-time.Hour).Format(time.RFC3339Nano)
				}
				status2 := map[string]any{"active": int64(1)}
				if v.job != "" {
					first := map[string]string{"Complete": "SuccessCriteriaMet", "Failed": "FailureTarget"}[v.job]
					status2 = map[string]any{"conditions": []any{map[string]any{"type": first, "status": "True"}, map[string]any{"type": v.job, "status": "True"}}}
				}
				job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "status": status2}}
				job.SetName("bench")
				job.SetNamespace("ns")
				job.SetUID("job-uid")
				job.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: "run", UID: uid, Controller: ptr.To(true)}})

				slimObj, err := slimAppWrapper(aw.DeepCopy())
				if err != nil {
					t.Fatal(err)
				}
				slim := slimObj.(*awv1beta2.AppWrapper)
				for k := range aw.Annotations {
					if _, kept := slim.Annotations[k]; kept != decision.ReadsAppWrapperAnnotation(k) {
						t.Errorf("annotation %s kept = %v", k, kept)
					}
				}
				decide := func(a *awv1beta2.AppWrapper) decision.Decision {
					in := decision.Input{Now: now, AppWrapper: a, Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
						Rules: []decision.Rule{{Rule: rule, Policy: policy}}, Kinds: map[schema.GroupKind]decision.Kind{jobGK: {State: decision.KindWatched}}, Record: rec}
					plan := decision.Plan(in)
					for _, ref := range plan.Refs {
						in.Triggers = append(in.Triggers, decision.Trigger{Ref: ref, State: decision.TriggerPresent, Object: job.DeepCopy()})
					}
					return decision.Decide(context.Background(), in)
				}
				whole, cached := decide(aw), decide(slim)
				type summary struct {
					Verdict            decision.Verdict
					Reason             string
					Outcome            wrapupv1alpha1.Outcome
					Write              *decision.Record
					Clear              bool
					Stamp              *decision.Stamp
					Requeue            time.Duration
					DueAt              time.Time
					Events             int
					Assigned, Deciding string
				}
				sum := func(d decision.Decision) summary {
					return summary{d.Verdict, d.Reason, d.Outcome, d.Write, d.Clear, d.Stamp, d.Requeue, d.DueAt, len(d.Events), d.Assigned, d.Winner}
				}
				if !reflect.DeepEqual(sum(whole), sum(cached)) {
					t.Errorf("on the cached AppWrapper:\n%+v\non the whole one:\n%+v", sum(cached), sum(whole))
				}
				if whole.Verdict == decision.VerdictDelete || whole.Write != nil {
					decided++
				}
			})
		}
	}
	if decided == 0 {
		t.Error("no case records or deletes: the comparison tests nothing that acts")
	}
}

// TestMirrorTouchesOnlyItsKeys: the mirror of a run's outcome and its
// clear, patched onto the AppWrapper as wrapup's cache keeps it (without
// the annotations no decision reads), change the mirror's keys and nothing
// else the API server holds; the patch carries no resourceVersion, so that
// a cache behind the AppWrapper costs no conflict (no decision reads the
// mirror back), but the AppWrapper's UID, so that it never lands on
// another AppWrapper of the name; a mirror of an AppWrapper gone is no
// error.
func TestMirrorTouchesOnlyItsKeys(t *testing.T) {
	live := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "aw-uid",
		Labels:      map[string]string{"team": "x"},
		Annotations: map[string]string{awv1beta2.TerminalExitCodesAnnotation: "1", "example.com/keep": "true"}}}
	c := fake.NewClientBuilder().WithScheme(util.Scheme()).WithObjects(live).Build()
	ctx := context.Background()
	var patches []map[string]any
	w := interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			var p map[string]any
			if err := json.Unmarshal(data, &p); err != nil {
				return err
			}
			patches = append(patches, p)
			if patch.Type() != types.MergePatchType {
				t.Errorf("a %s patch, want a JSON merge patch", patch.Type())
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
	})
	r := &appWrapperReconciler{Writer: w}
	cached := func() *awv1beta2.AppWrapper {
		server := &awv1beta2.AppWrapper{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(live), server); err != nil {
			t.Fatal(err)
		}
		o, err := slimAppWrapper(server)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*awv1beta2.AppWrapper)
	}
	kept := func(what string) *awv1beta2.AppWrapper {
		after := &awv1beta2.AppWrapper{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(live), after); err != nil {
			t.Fatal(err)
		}
		if after.Annotations["example.com/keep"] != "true" || after.Annotations[awv1beta2.TerminalExitCodesAnnotation] != "1" || after.Labels["team"] != "x" {
			t.Errorf("after %s: labels %v, annotations %v", what, after.Labels, after.Annotations)
		}
		return after
	}
	finished := time.Date(2026, 12, 1, 12, 0, 0, 123456000, time.UTC)
	rec := &decision.Record{Outcome: wrapupv1alpha1.OutcomeFailed, Rule: "r", RuleUID: "rule-uid", FinishedAt: finished, Message: "failed",
		Triggers: []decision.RecordedTrigger{{Index: 0, UID: "u"}}}
	stale := cached()
	stale.ResourceVersion = "1"
	r.mirror(ctx, stale, rec)
	after := kept("the mirror")
	if after.Labels[wrapupv1alpha1.OutcomeLabel] != "Failed" || after.Annotations[wrapupv1alpha1.RuleAnnotation] != "r" ||
		after.Annotations[wrapupv1alpha1.MessageAnnotation] != "failed" || after.Annotations[wrapupv1alpha1.FinishedAtAnnotation] != "2026-12-01T12:00:00.123456000Z" {
		t.Errorf("the mirror, patched on a stale AppWrapper, did not land: %v %v", after.Labels, after.Annotations)
	}
	r.mirror(ctx, cached(), nil)
	after = kept("the clear")
	for _, k := range []string{wrapupv1alpha1.RuleAnnotation, wrapupv1alpha1.FinishedAtAnnotation, wrapupv1alpha1.MessageAnnotation} {
		if _, ok := after.Annotations[k]; ok {
			t.Errorf("the clear left %s: %v", k, after.Annotations)
		}
	}
	if _, ok := after.Labels[wrapupv1alpha1.OutcomeLabel]; ok {
		t.Errorf("the clear left the outcome label: %v", after.Labels)
	}
	mirrorKeys := map[string]bool{"labels/" + wrapupv1alpha1.OutcomeLabel: true, "annotations/" + wrapupv1alpha1.RuleAnnotation: true,
		"annotations/" + wrapupv1alpha1.FinishedAtAnnotation: true, "annotations/" + wrapupv1alpha1.MessageAnnotation: true}
	for i, p := range patches {
		for k, v := range p {
			meta, ok := v.(map[string]any)
			if k != "metadata" || !ok {
				t.Errorf("patch %d writes %s: %v", i, k, p)
				continue
			}
			if uid := meta["uid"]; uid != "aw-uid" {
				t.Errorf("patch %d names the UID %v, want the AppWrapper's", i, uid)
			}
			if rv, ok := meta["resourceVersion"]; ok {
				t.Errorf("patch %d carries the resourceVersion %v", i, rv)
			}
			for mk, mv := range meta {
				if mk == "uid" || mk == "resourceVersion" {
					continue
				}
				keys, ok := mv.(map[string]any)
				if !ok {
					t.Errorf("patch %d writes metadata.%s: %v", i, mk, p)
					continue
				}
				for kk := range keys {
					if !mirrorKeys[mk+"/"+kk] {
						t.Errorf("patch %d writes metadata.%s[%s], no key of the mirror", i, mk, kk)
					}
				}
			}
		}
	}
	if len(patches) != 2 {
		t.Errorf("%d patches, want the mirror and its clear", len(patches))
	}
	gone := cached()
	gone.Name = "gone"
	r.mirror(ctx, gone, rec)
}

// TestCachedRecordDecidesAsWhole: the CompletionRecord as wrapup's cache
// keeps it (slimCompletionRecord: no message, labels, or triggers that did
// not decide) is decided on as the whole one: the same verdict, outcome,
// writes and stamp. (Only the final check's decision on the whole record,
// read from the API server, is written.)
func TestCachedRecordDecidesAsWhole(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs", UID: "rule-uid"},
		Spec: wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job", Name: "bench"},
			OnSuccess: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](600)},
			OnFailure: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](60)}}}
	other := rule.DeepCopy()
	other.UID, other.Name = "other-uid", "other"
	policy, err := celpolicies.Compile(&rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	jobGK := schema.GroupKind{Group: "batch", Kind: "Job"}
	aw := util.MakeAppWrapper("run", "ns").UID("aw-uid").Component(util.MakeObject("batch/v1", "Job", "bench").Obj(), nil).
		Component(util.MakeObject("batch/v1", "Job", "bench-2").Obj(), nil).Phase(awv1beta2.AppWrapperRunning).Obj()
	job := func(uid types.UID, cond string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "status": map[string]any{"active": int64(1)}}}
		if cond != "" {
			u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": cond, "status": "True"}}}
		}
		u.SetName("bench")
		u.SetNamespace("ns")
		u.SetUID(uid)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: "run", UID: "aw-uid", Controller: ptr.To(true)}})
		return u
	}
	rec := func(o wrapupv1alpha1.Outcome, r *wrapupv1alpha1.CompletionRule) *util.RecordWrapper {
		return util.MakeRecord(aw, r, o, now.Add(-time.Minute)).Trigger(0, "job-1").Message("the message").ResourceVersion("7")
	}
	withUndecided := func(w *util.RecordWrapper) *util.RecordWrapper {
		w.Triggers = append(w.Triggers, wrapupv1alpha1.RecordedTrigger{ComponentIndex: 1, UID: "job-9", State: "Running"})
		w.Labels["team"] = "a"
		return w
	}
	decided := 0
	for _, tc := range []struct {
		name string
		rec  *wrapupv1alpha1.CompletionRecord
		job  *unstructured.Unstructured
	}{
		{"a success, the trigger as it was", rec(wrapupv1alpha1.OutcomeSucceeded, rule).Obj(), job("job-1", "Complete")},
		{"a success, the trigger replaced", rec(wrapupv1alpha1.OutcomeSucceeded, rule).Obj(), job("job-2", "")},
		{"a failure, a new attempt", withUndecided(rec(wrapupv1alpha1.OutcomeFailed, rule)).Obj(), job("job-2", "")},
		{"a failure, a new attempt that failed", rec(wrapupv1alpha1.OutcomeFailed, rule).Obj(), job("job-2", "Failed")},
		{"a success, another rule's stamp", rec(wrapupv1alpha1.OutcomeSucceeded, other).Obj(), job("job-1", "Complete")},
		{"a success cleared", rec(wrapupv1alpha1.OutcomeSucceeded, rule).Cleared(now.Add(-time.Second)).Obj(), job("job-1", "Complete")},
		{"an earlier version's record", func() *wrapupv1alpha1.CompletionRecord {
			cr := rec(wrapupv1alpha1.OutcomeFailed, rule).Obj()
			cr.RuleUID = ""
			return cr
		}(), job("job-1", "Complete")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slimObj, err := slimCompletionRecord(tc.rec.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			slim := slimObj.(*wrapupv1alpha1.CompletionRecord)
			if slim.Message != "" || len(slim.Labels) != 0 || len(slim.Triggers) != 1 {
				t.Errorf("the cache keeps the message %q, labels %v, triggers %+v", slim.Message, slim.Labels, slim.Triggers)
			}
			decide := func(cr *wrapupv1alpha1.CompletionRecord) decision.Decision {
				in := decision.Input{Now: now, AppWrapper: aw, Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
					Rules: []decision.Rule{{Rule: rule, Policy: policy}}, Kinds: map[schema.GroupKind]decision.Kind{jobGK: {State: decision.KindWatched}}, Record: cr}
				for _, ref := range decision.Plan(in).Refs {
					in.Triggers = append(in.Triggers, decision.Trigger{Ref: ref, State: decision.TriggerPresent, Object: tc.job.DeepCopy()})
				}
				return decision.Decide(context.Background(), in)
			}
			whole, cached := decide(tc.rec), decide(slim)
			type summary struct {
				Verdict decision.Verdict
				Reason  string
				Outcome wrapupv1alpha1.Outcome
				Write   *decision.Record
				Clear   bool
				Stamp   *decision.Stamp
				Store   bool
				DueAt   time.Time
				Events  []decision.Event
			}
			sum := func(d decision.Decision) summary {
				return summary{d.Verdict, d.Reason, d.Outcome, d.Write, d.Clear, d.Stamp, d.Store != nil, d.DueAt, d.Events}
			}
			if !reflect.DeepEqual(sum(whole), sum(cached)) {
				t.Errorf("on the cached record:\n%+v\non the whole one:\n%+v", sum(cached), sum(whole))
			}
			if whole.Store != nil || whole.Verdict == decision.VerdictDelete {
				decided++
			}
		})
	}
	if decided == 0 {
		t.Error("no case writes or deletes: the comparison tests nothing that acts")
	}
}

// The cache keeps wrapup.dev/trigger on a component template's own
// metadata (where people annotate objects), and nothing else of its
// annotations: an annotated-triggers rule finds the same trigger on the
// cached AppWrapper as on the full one.
func TestCachedTemplateKeepsTheTriggerAnnotation(t *testing.T) {
	tmpl, _ := json.Marshal(map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "bench",
		"annotations": map[string]any{wrapupv1alpha1.TriggerAnnotation: "true", "big": strings.Repeat("x", 4096)}}})
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns"},
		Spec: awv1beta2.AppWrapperSpec{Components: []awv1beta2.AppWrapperComponent{{Template: runtime.RawExtension{Raw: tmpl}}}}}
	slimObj, err := slimAppWrapper(aw.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := slimObj.(*awv1beta2.AppWrapper)
	if strings.Contains(string(slim.Spec.Components[0].Template.Raw), "big") {
		t.Errorf("the cached template keeps other annotations: %s", slim.Spec.Components[0].Template.Raw)
	}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "annotated-triggers"}}
	full, nt1 := decision.FindTriggers(aw, rule)
	cached, nt2 := decision.FindTriggers(slim, rule)
	if nt1 != nil || nt2 != nil || len(full) != 1 || len(cached) != 1 || full[0] != cached[0] {
		t.Errorf("triggers on the full AppWrapper %+v (%v), on the cached one %+v (%v): want the same, bench", full, nt1, cached, nt2)
	}
}
