package view

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Fixtures for Explain: one AppWrapper "sweep" in namespace "team-a" that
// wraps an inference Deployment and a benchmark Job, the live Job, and rules.

const (
	exNS      = "team-a"
	exAW      = "sweep"
	exAWUID   = types.UID("aw-uid")
	exJob     = "sweep-bench"
	exJobUID  = types.UID("job-uid")
	exJobUID2 = types.UID("job-uid-2")
)

var exNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// explainMapper maps what the API server of the tests serves: Jobs and
// AppWrappers.
func explainMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{batchv1.SchemeGroupVersion, awv1beta2.GroupVersion})
	m.Add(batchv1.SchemeGroupVersion.WithKind("Job"), apimeta.RESTScopeNamespace)
	m.Add(awv1beta2.GroupVersion.WithKind("AppWrapper"), apimeta.RESTScopeNamespace)
	return m
}

func template(t *testing.T, apiVersion, kind, name string) runtime.RawExtension {
	t.Helper()
	meta := map[string]any{"name": name}
	if name == "" {
		meta = map[string]any{"generateName": "gen-"}
	}
	raw, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta})
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: raw}
}

// exAppWrapper is a Running AppWrapper labelled as a benchmark.
func exAppWrapper(t *testing.T, mods ...func(*awv1beta2.AppWrapper)) *awv1beta2.AppWrapper {
	t.Helper()
	aw := &awv1beta2.AppWrapper{
		ObjectMeta: metav1.ObjectMeta{Name: exAW, Namespace: exNS, UID: exAWUID, Labels: map[string]string{"role": "benchmark"}},
		Spec: awv1beta2.AppWrapperSpec{Components: []awv1beta2.AppWrapperComponent{
			{Template: template(t, "apps/v1", "Deployment", "sweep-inference")},
			{Template: template(t, "batch/v1", "Job", exJob)},
		}},
		Status: awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperRunning},
	}
	for _, m := range mods {
		m(aw)
	}
	return aw
}

func withPhase(p awv1beta2.AppWrapperPhase) func(*awv1beta2.AppWrapper) {
	return func(aw *awv1beta2.AppWrapper) { aw.Status.Phase = p }
}

func withAnnotation(k, v string) func(*awv1beta2.AppWrapper) {
	return func(aw *awv1beta2.AppWrapper) {
		if aw.Annotations == nil {
			aw.Annotations = map[string]string{}
		}
		aw.Annotations[k] = v
	}
}

// withRecord writes an outcome as the controller records it.
func withRecord(o wrapupv1alpha1.Outcome, rule string, ago time.Duration, triggerUID types.UID) func(*awv1beta2.AppWrapper) {
	return func(aw *awv1beta2.AppWrapper) {
		aw.Labels[wrapupv1alpha1.OutcomeLabel] = string(o)
		withAnnotation(wrapupv1alpha1.RuleAnnotation, rule)(aw)
		withAnnotation(wrapupv1alpha1.FinishedAtAnnotation, exNow.Add(-ago).Format("2006-01-02T15:04:05.000Z07:00"))(aw)
		withAnnotation(wrapupv1alpha1.MessageAnnotation, "recorded message")(aw)
		withAnnotation(wrapupv1alpha1.TriggerUIDAnnotation, string(triggerUID))(aw)
		withAnnotation(wrapupv1alpha1.TriggerRefAnnotation, "batch/Job/"+exJob)(aw)
	}
}

func withComponents(cs ...awv1beta2.AppWrapperComponent) func(*awv1beta2.AppWrapper) {
	return func(aw *awv1beta2.AppWrapper) { aw.Spec.Components = cs }
}

func exNamespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: exNS, Labels: map[string]string{"team": "a"}}}
}

// Job statuses as the Job controller writes them.
var (
	jobRunning = batchv1.JobStatus{Active: 1, Ready: ptr.To[int32](1), StartTime: ptr.To(metav1.NewTime(exNow.Add(-time.Hour)))}
	jobDone    = batchv1.JobStatus{Succeeded: 1, Ready: ptr.To[int32](0), StartTime: ptr.To(metav1.NewTime(exNow.Add(-time.Hour))),
		CompletionTime: ptr.To(metav1.NewTime(exNow.Add(-time.Minute))),
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
		}}
	jobFailed = batchv1.JobStatus{Failed: 1, Ready: ptr.To[int32](0), StartTime: ptr.To(metav1.NewTime(exNow.Add(-time.Hour))),
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
		}}
)

// exLiveJob is the live trigger, controlled by the AppWrapper.
func exLiveJob(name string, uid types.UID, status batchv1.JobStatus, mods ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: exNS, UID: uid,
			Labels: map[string]string{awv1beta2.AppWrapperLabel: exAW},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: exAW, UID: exAWUID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Status: status,
	}
	for _, m := range mods {
		m(j)
	}
	return j
}

// exRule is a valid rule for the AppWrapper's batch Job.
func exRule(name string, prio int32, mods ...func(*wrapupv1alpha1.CompletionRule)) *wrapupv1alpha1.CompletionRule {
	r := &wrapupv1alpha1.CompletionRule{
		// The policy cache is keyed by UID, as the API server makes them unique.
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("rule-" + name), Generation: 1},
		Spec: wrapupv1alpha1.CompletionRuleSpec{
			Priority: prio,
			Trigger:  wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"},
		},
	}
	for _, m := range mods {
		m(r)
	}
	// Its status, as the rule controller writes it: deleting as it does
	// since long before any run.
	r.Status.DeletingSince = decision.DeletingSince(r, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	return r
}

func onSuccess(a wrapupv1alpha1.Action, ttl int32) func(*wrapupv1alpha1.CompletionRule) {
	return func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: a, TTLSecondsAfterFinished: ptr.To(ttl)}
	}
}

func onFailure(a wrapupv1alpha1.Action, ttl int32) func(*wrapupv1alpha1.CompletionRule) {
	return func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.OnFailure = wrapupv1alpha1.ActionSpec{Action: a, TTLSecondsAfterFinished: ptr.To(ttl)}
	}
}

func TestExplain(t *testing.T) {
	type want struct {
		verdict    decision.Verdict
		winner     string
		outcome    wrapupv1alpha1.Outcome
		after      time.Duration
		willRecord bool
		// reason and each of rules' substrings must appear in Reason and
		// in the verdict of the named rule.
		reason string
		rules  map[string]string
	}
	tests := []struct {
		name    string
		objects []client.Object
		funcs   *interceptor.Funcs
		want    want
		wantErr string
		check   func(*testing.T, *Explanation)
	}{
		{
			name:    "no rules",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobDone)},
			want:    want{verdict: decision.VerdictNoRule, reason: "no CompletionRule applies"},
		},
		{
			name: "rules that do not select the AppWrapper or its namespace",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobDone),
				exRule("training", 5, func(r *wrapupv1alpha1.CompletionRule) {
					r.Spec.AppWrapperSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"role": "training"}}
				}),
				exRule("team-b", 5, func(r *wrapupv1alpha1.CompletionRule) {
					r.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
				})},
			want: want{verdict: decision.VerdictNoRule, rules: map[string]string{
				"training": "appWrapperSelector (role=training) does not select the AppWrapper (labels: role=benchmark)",
				"team-b":   "namespaceSelector (team=b) does not select namespace team-a (labels: ",
			}},
		},
		{
			name: "an invalid rule of a higher priority blocks every rule below it",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobDone),
				exRule("low", 1), exRule("high", 10),
				exRule("broken", 100, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Success = "object.status.(" })},
			want: want{verdict: decision.VerdictBlocked, winner: "broken", reason: "no lower-priority rule acts in its place", rules: map[string]string{
				"broken": "blocks every lower-priority rule",
				"high":   "blocked by broken",
				"low":    "blocked by broken",
			}},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Trigger != nil || ex.Evaluation != nil || ex.WillRecord() {
					t.Errorf("a blocked AppWrapper is not evaluated nor recorded, got trigger %+v evaluation %+v", ex.Trigger, ex.Evaluation)
				}
				if len(ex.Events) != 1 || ex.Events[0].Reason != wrapupv1alpha1.ReasonBlockedByRule {
					t.Errorf("events = %+v, want one BlockedByRule Warning", ex.Events)
				}
			},
		},
		{
			name: "the highest priority wins; an invalid rule below it acts on nothing",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobRunning),
				exRule("low", 1), exRule("high", 10),
				exRule("broken", 5, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Success = "object.status.(" })},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "high", reason: "not finished", rules: map[string]string{
				"high":   "wins: highest priority of 2",
				"low":    "loses to high: lower priority (1 < 10)",
				"broken": "is not usable (it does not compile",
			}},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Rules[0].Name != "high" {
					t.Errorf("first rule = %s, want the winner first", ex.Rules[0].Name)
				}
				if ex.Evaluation == nil || ex.Evaluation.Outcome != "Running" || !ex.Evaluation.BuiltinSuccess {
					t.Errorf("evaluation = %+v, want Running by the built-in expressions", ex.Evaluation)
				}
				if ex.Trigger == nil || ex.Trigger.UID != exJobUID || ex.Trigger.GroupVersionKind() != batchv1.SchemeGroupVersion.WithKind("Job") {
					t.Errorf("trigger = %+v, want the live batch/v1 Job", ex.Trigger)
				}
			},
		},
		{
			name: "ties go to the name that sorts first",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobRunning),
				exRule("b", 5), exRule("a", 5)},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "a", rules: map[string]string{"b": "same priority 5, and a sorts first"}},
		},
		{
			name: "a rule being deleted is skipped",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobRunning),
				exRule("going", 10, func(r *wrapupv1alpha1.CompletionRule) {
					r.DeletionTimestamp = ptr.To(metav1.NewTime(exNow))
					r.Finalizers = []string{"example.com/hold"}
				}), exRule("staying", 0)},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "staying", rules: map[string]string{"going": "being deleted"}},
		},
		{
			name:    "ignored AppWrapper",
			objects: []client.Object{exAppWrapper(t, withAnnotation(wrapupv1alpha1.IgnoreAnnotation, "true")), exLiveJob(exJob, exJobUID, jobDone), exRule("all", 0)},
			want:    want{verdict: decision.VerdictIgnored, winner: "all", reason: "wrapup.dev/ignore"},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Trigger != nil || ex.Evaluation != nil {
					t.Errorf("an ignored AppWrapper is not evaluated, got trigger %+v evaluation %+v", ex.Trigger, ex.Evaluation)
				}
			},
		},
		{
			name:    "AppWrapper terminating",
			objects: []client.Object{exAppWrapper(t, withPhase(awv1beta2.AppWrapperTerminating)), exLiveJob(exJob, exJobUID, jobDone), exRule("all", 0)},
			want:    want{verdict: decision.VerdictBeingDeleted, winner: "all"},
		},
		{
			name: "AppWrapper with a deletionTimestamp",
			objects: []client.Object{exAppWrapper(t, func(aw *awv1beta2.AppWrapper) {
				aw.DeletionTimestamp = ptr.To(metav1.NewTime(exNow))
				aw.Finalizers = []string{"workload.codeflare.dev/finalizer"}
			}), exLiveJob(exJob, exJobUID, jobDone), exRule("all", 0)},
			want: want{verdict: decision.VerdictBeingDeleted, winner: "all"},
		},
		{
			name: "two Jobs under a kind rule: ambiguous",
			objects: []client.Object{exAppWrapper(t, withComponents(
				awv1beta2.AppWrapperComponent{Template: template(t, "batch/v1", "Job", "first")},
				awv1beta2.AppWrapperComponent{Template: template(t, "batch/v1", "Job", "second")},
			)), exRule("jobs", 0)},
			want: want{verdict: decision.VerdictNoTrigger, winner: "jobs", reason: "has 2 (components 0, 1)"},
			check: func(t *testing.T, ex *Explanation) {
				if len(ex.Events) != 1 || ex.Events[0].Reason != wrapupv1alpha1.ReasonAmbiguousTrigger {
					t.Errorf("events = %+v, want one AmbiguousTrigger Warning", ex.Events)
				}
			},
		},
		{
			name:    "a rule without kind and no annotated component",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobDone), exRule("annotated", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{} })},
			want:    want{verdict: decision.VerdictNoRule, reason: "no CompletionRule applies"},
			check: func(t *testing.T, ex *Explanation) {
				// The rule does not apply: no Event, and it is not counted as deciding.
				if len(ex.Events) != 0 || ex.Assigned != "" || ex.Winner != "" {
					t.Errorf("events %+v, assigned %q, winner %q: want none, none, none", ex.Events, ex.Assigned, ex.Winner)
				}
				if len(ex.Rules) != 1 || !strings.Contains(ex.Rules[0].Why, "does not apply: it wants a component annotated wrapup.dev/trigger") {
					t.Errorf("standings %+v: want the rule's, saying why it does not apply", ex.Rules)
				}
			},
		},
		{
			name: "a rule without kind takes the annotated component",
			objects: []client.Object{exAppWrapper(t, withComponents(
				awv1beta2.AppWrapperComponent{Template: template(t, "apps/v1", "Deployment", "sweep-inference")},
				awv1beta2.AppWrapperComponent{Template: template(t, "batch/v1", "Job", exJob), Annotations: map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}},
			)), exLiveJob(exJob, exJobUID, jobDone), exRule("annotated", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{} })},
			want: want{verdict: decision.VerdictDelete, winner: "annotated", outcome: wrapupv1alpha1.OutcomeSucceeded, willRecord: true},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Trigger == nil || !ex.Trigger.Annotated || ex.Trigger.Index != 1 {
					t.Errorf("trigger = %+v, want the annotated component 1", ex.Trigger)
				}
			},
		},
		{
			name:    "trigger name not generated yet",
			objects: []client.Object{exAppWrapper(t, withComponents(awv1beta2.AppWrapperComponent{Template: template(t, "batch/v1", "Job", "")})), exRule("jobs", 0)},
			want:    want{verdict: decision.VerdictWaitingForTrigger, winner: "jobs", reason: "generateName"},
		},
		{
			name:    "trigger not created yet",
			objects: []client.Object{exAppWrapper(t), exRule("jobs", 0)},
			want:    want{verdict: decision.VerdictWaitingForTrigger, winner: "jobs", reason: "Job sweep-bench does not exist"},
		},
		{
			name: "a same-named Job that the AppWrapper does not control",
			objects: []client.Object{exAppWrapper(t), exRule("jobs", 0),
				exLiveJob(exJob, exJobUID, jobDone, func(j *batchv1.Job) { j.OwnerReferences = nil })},
			want: want{verdict: decision.VerdictNoTrigger, winner: "jobs", reason: "not controlled by this AppWrapper"},
		},
		{
			name: "a Job without the AppWrapper label is invisible to the watch",
			objects: []client.Object{exAppWrapper(t), exRule("jobs", 0),
				exLiveJob(exJob, exJobUID, jobDone, func(j *batchv1.Job) { j.Labels = nil })},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "jobs", reason: "lacks the label workload.codeflare.dev/appwrapper"},
		},
		{
			name:    "trigger kind not served",
			objects: []client.Object{exAppWrapper(t), exRule("jobs", 0)},
			funcs: &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if obj.GetObjectKind().GroupVersionKind().Kind == "Job" {
					return &apimeta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "batch", Kind: "Job"}, SearchedVersions: []string{"v1"}}
				}
				return c.Get(ctx, key, obj, opts...)
			}},
			want: want{verdict: decision.VerdictBlocked, winner: "jobs", reason: "is not served"},
		},
		{
			name:    "a runtime error is not finished",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobDone), exRule("typo", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Success = "object.status.noSuchField == 1" })},
			want:    want{verdict: decision.VerdictWaitingForTrigger, winner: "typo", reason: "EvaluationError"},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Evaluation == nil || !strings.Contains(ex.Evaluation.Error, "noSuchField") {
					t.Errorf("evaluation = %+v, want the runtime error", ex.Evaluation)
				}
			},
		},
		{
			name: "the trigger is evaluated as the watch caches it, without managedFields",
			objects: []client.Object{exAppWrapper(t), exRule("fields", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Success = "has(object.metadata.managedFields)" }),
				exLiveJob(exJob, exJobUID, jobDone, func(j *batchv1.Job) {
					j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "batch/v1",
						FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:succeeded":{}}}`)}, Subresource: "status"}}
				})},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "fields"},
		},
		{
			name:    "succeeded, DeleteAll at once",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobDone), exRule("jobs", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Message = "'done: ' + object.metadata.name" })},
			want:    want{verdict: decision.VerdictDelete, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded, willRecord: true, reason: "not recorded yet"},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Evaluation == nil || ex.Evaluation.Message != "done: sweep-bench" || ex.Evaluation.Cost == 0 {
					t.Errorf("evaluation = %+v, want the rule's message and its cost", ex.Evaluation)
				}
			},
		},
		{
			name:    "succeeded and recorded 100s ago, TTL 300s",
			objects: []client.Object{exAppWrapper(t, withRecord(wrapupv1alpha1.OutcomeSucceeded, "jobs", 100*time.Second, exJobUID)), exLiveJob(exJob, exJobUID, jobDone), exRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 300))},
			want:    want{verdict: decision.VerdictDeleteAfterTTL, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded, after: 200 * time.Second, reason: "2026-05-01T12:03:20Z"},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Recorded == nil || ex.Recorded.Rule != "jobs" || ex.Recorded.Message != "recorded message" {
					t.Errorf("recorded = %+v", ex.Recorded)
				}
			},
		},
		{
			name:    "succeeded, not recorded yet, TTL 60s",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobDone), exRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 60))},
			want:    want{verdict: decision.VerdictDeleteAfterTTL, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded, after: time.Minute, willRecord: true},
		},
		{
			name:    "succeeded, UpdateStatus",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobDone), exRule("record", 0, onSuccess(wrapupv1alpha1.ActionUpdateStatus, 0))},
			want:    want{verdict: decision.VerdictRecordOnly, winner: "record", outcome: wrapupv1alpha1.OutcomeSucceeded, willRecord: true, reason: "UpdateStatus"},
		},
		{
			name: "succeeded, dry run",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobDone),
				exRule("dry", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.DryRun = true })},
			want: want{verdict: decision.VerdictDryRun, winner: "dry", outcome: wrapupv1alpha1.OutcomeSucceeded, willRecord: true, reason: "WouldDelete"},
		},
		{
			name:    "failed while Running: waiting for retries",
			objects: []client.Object{exAppWrapper(t), exLiveJob(exJob, exJobUID, jobFailed), exRule("jobs", 0)},
			want:    want{verdict: decision.VerdictWaitingForRetries, winner: "jobs", after: decision.DefaultFailureGracePeriod, reason: "may still retry"},
		},
		{
			name: "failed while Running, with the AppWrapper's own grace period",
			objects: []client.Object{exAppWrapper(t, withAnnotation(awv1beta2.FailureGracePeriodDurationAnnotation, "10s")),
				exLiveJob(exJob, exJobUID, jobFailed), exRule("jobs", 0)},
			want: want{verdict: decision.VerdictWaitingForRetries, winner: "jobs", after: 10*time.Second + decision.AppWrapperRecheckPeriod + decision.Slack},
		},
		{
			name:    "failed while Resetting: the AppWrapper controller retries",
			objects: []client.Object{exAppWrapper(t, withPhase(awv1beta2.AppWrapperResetting)), exLiveJob(exJob, exJobUID, jobFailed), exRule("jobs", 0)},
			want:    want{verdict: decision.VerdictWaitingForRetries, winner: "jobs", reason: "Resetting"},
		},
		{
			name: "failed and recorded for this trigger: final",
			objects: []client.Object{exAppWrapper(t, withRecord(wrapupv1alpha1.OutcomeFailed, "jobs", 10*time.Second, exJobUID)),
				exLiveJob(exJob, exJobUID, jobFailed), exRule("jobs", 0, onFailure(wrapupv1alpha1.ActionDeleteAll, 300))},
			want: want{verdict: decision.VerdictDeleteAfterTTL, winner: "jobs", outcome: wrapupv1alpha1.OutcomeFailed, after: 290 * time.Second},
		},
		{
			name: "AppWrapper Failed: failed without evaluating the trigger",
			objects: []client.Object{exAppWrapper(t, withPhase(awv1beta2.AppWrapperFailed), func(aw *awv1beta2.AppWrapper) {
				aw.Status.Conditions = []metav1.Condition{{Type: string(awv1beta2.Unhealthy), Status: metav1.ConditionTrue, Reason: "FoundFailedResources", Message: "retry limit exceeded"}}
			}), exRule("jobs", 0)},
			want: want{verdict: decision.VerdictDelete, winner: "jobs", outcome: wrapupv1alpha1.OutcomeFailed, willRecord: true},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Evaluation == nil || !ex.Evaluation.FromAppWrapperPhase || !strings.Contains(ex.Evaluation.Message, "retry limit exceeded") {
					t.Errorf("evaluation = %+v, want Failed from the AppWrapper's phase", ex.Evaluation)
				}
			},
		},
		{
			name: "AppWrapper Failed after a recorded success keeps the success",
			objects: []client.Object{exAppWrapper(t, withPhase(awv1beta2.AppWrapperFailed), withRecord(wrapupv1alpha1.OutcomeSucceeded, "jobs", time.Hour, exJobUID)),
				exRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionUpdateStatus, 0))},
			want: want{verdict: decision.VerdictRecordOnly, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded},
		},
		{
			name: "a recorded outcome that no longer holds is cleared",
			objects: []client.Object{exAppWrapper(t, withRecord(wrapupv1alpha1.OutcomeFailed, "jobs", time.Minute, exJobUID)),
				exLiveJob(exJob, exJobUID2, jobRunning), exRule("jobs", 0)},
			want: want{verdict: decision.VerdictClearOutcome, winner: "jobs", reason: "recorded outcome Failed no longer holds"},
		},
		{
			name:    "AppWrapper not found",
			objects: []client.Object{exRule("jobs", 0)},
			wantErr: "not found",
		},
		{
			name:    "rules cannot be listed",
			objects: []client.Object{exAppWrapper(t)},
			funcs: &interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return apierrors.NewForbidden(schema.GroupResource{Group: "wrapup.dev", Resource: "completionrules"}, "", errors.New("no access"))
			}},
			wantErr: "listing rules",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]client.Object{exNamespace()}, tc.objects...)
			// managedFields are returned, as the API server returns them.
			b := fake.NewClientBuilder().WithScheme(util.Scheme()).WithRESTMapper(explainMapper()).WithObjects(objs...).WithReturnManagedFields()
			if tc.funcs != nil {
				b = b.WithInterceptorFuncs(*tc.funcs)
			}
			ex, err := Explain(context.Background(), b.Build(), nil, types.NamespacedName{Namespace: exNS, Name: exAW}, exNow)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Explain error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Explain: %v", err)
			}
			w := tc.want
			if w.winner == "" && ex.Assigned == "" {
				w.winner = ex.Winner
			}
			if ex.Verdict != w.verdict || ex.Winner != w.winner || ex.Outcome != w.outcome || ex.After != w.after || ex.WillRecord() != w.willRecord {
				t.Errorf("got verdict %s, winner %q, outcome %q, after %s, willRecord %v; want %s, %q, %q, %s, %v\nreason: %s",
					ex.Verdict, ex.Winner, ex.Outcome, ex.After, ex.WillRecord(), w.verdict, w.winner, w.outcome, w.after, w.willRecord, ex.Reason)
			}
			if !strings.Contains(ex.Reason, w.reason) {
				t.Errorf("reason %q does not contain %q", ex.Reason, w.reason)
			}
			for name, why := range w.rules {
				found := false
				for _, v := range ex.Rules {
					if v.Name == name {
						found = true
						if !strings.Contains(v.Why, why) {
							t.Errorf("rule %s: why %q does not contain %q", name, v.Why, why)
						}
					}
				}
				if !found {
					t.Errorf("rule %s is not listed in %+v", name, ex.Rules)
				}
			}
			if tc.check != nil {
				tc.check(t, ex)
			}
			if s := ex.String(); !strings.Contains(s, string(ex.Verdict)) || !strings.Contains(s, exNS+"/"+exAW) {
				t.Errorf("String() lacks the verdict or the AppWrapper:\n%s", s)
			}
		})
	}
}

// TestExplainAgreesWithWinningRule checks that the rule Explain names is the
// one the controller's selection picks, whatever the order of the list.
func TestExplainAgreesWithWinningRule(t *testing.T) {
	rules := []*wrapupv1alpha1.CompletionRule{exRule("c", 3), exRule("a", 7), exRule("b", 7), exRule("z", 9, func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.AppWrapperSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"role": "other"}}
	})}
	objs := []client.Object{exNamespace(), exAppWrapper(t), exLiveJob(exJob, exJobUID, jobRunning)}
	for _, r := range rules {
		objs = append(objs, r)
	}
	c := fake.NewClientBuilder().WithScheme(util.Scheme()).WithRESTMapper(explainMapper()).WithObjects(objs...).Build()
	ex, err := Explain(context.Background(), c, nil, types.NamespacedName{Namespace: exNS, Name: exAW}, exNow)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Winner != "a" {
		t.Errorf("Explain winner = %s, want a", ex.Winner)
	}
	var order []string
	for _, v := range ex.Rules {
		order = append(order, v.Name)
	}
	if got := strings.Join(order, ","); got != "a,z,b,c" {
		t.Errorf("rules listed as %s, want the winner, then by priority and name: a,z,b,c", got)
	}
}

func TestExplanationString(t *testing.T) {
	ex := &Explanation{
		AppWrapper: types.NamespacedName{Namespace: exNS, Name: exAW},
		Phase:      awv1beta2.AppWrapperRunning,
		At:         exNow,
		Decision: decision.Decision{
			Verdict: decision.VerdictDeleteAfterTTL,
			Reason:  "the trigger Succeeded: ...",
			Steps:   decision.Steps{Outcome: wrapupv1alpha1.OutcomeSucceeded, After: 4 * time.Minute},
			Why: decision.Why{
				Rules: []decision.RuleStanding{
					{Name: "high", Priority: 10, Ready: "True/Compiled", Matches: true, Valid: true, Wins: true, Why: "wins: highest priority of 2 matching valid rules"},
					{Name: "low", Priority: 1, Matches: true, Valid: true, Why: "loses to high: lower priority (1 < 10)"},
				},
				Winner: "high",
				Trigger: &decision.TriggerInfo{Ref: decision.Ref{Index: 1, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: exJob},
					UID: exJobUID},
				Evaluation: &decision.Evaluation{Outcome: "Succeeded", Message: "all good", Cost: 12, BuiltinSuccess: false, BuiltinFailure: true},
				Recorded:   &decision.Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "high", FinishedAt: exNow.Add(-time.Minute)},
			},
		},
	}
	got := ex.String()
	for _, want := range []string{
		"AppWrapper: team-a/sweep (phase Running) at 2026-05-01T12:00:00Z\n",
		"Verdict:    DeleteAfterTTL (in 4m0s)\n",
		"  * high  priority 10  Ready True/Compiled  wins: highest priority of 2 matching valid rules\n",
		"    low   priority 1   Ready -              loses to high: lower priority (1 < 10)\n",
		"Trigger:    batch/v1 Job sweep-bench, component 1 (by kind), uid job-uid\n",
		"Evaluation: Succeeded (cost 12; success from the rule, failure built-in)\n",
		"Message:    all good\n",
		"Recorded:   Succeeded by rule high at 2026-05-01T11:59:00Z\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("String() lacks %q:\n%s", want, got)
		}
	}
}

func TestDescribeAction(t *testing.T) {
	tests := []struct {
		name    string
		rule    *wrapupv1alpha1.CompletionRule
		outcome wrapupv1alpha1.Outcome
		want    string
	}{
		{name: "default is DeleteAll at once", rule: exRule("r", 0), outcome: wrapupv1alpha1.OutcomeSucceeded, want: "DeleteAll: record the outcome, then delete the AppWrapper at once"},
		{name: "TTL", rule: exRule("r", 0, onFailure(wrapupv1alpha1.ActionDeleteAll, 300)), outcome: wrapupv1alpha1.OutcomeFailed, want: "5m0s after the trigger finished; a failure is final only once"},
		{name: "UpdateStatus", rule: exRule("r", 0, onSuccess(wrapupv1alpha1.ActionUpdateStatus, 0)), outcome: wrapupv1alpha1.OutcomeSucceeded, want: "UpdateStatus: record the outcome on the AppWrapper, delete nothing"},
		{name: "dry run", rule: exRule("r", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.DryRun = true }), outcome: wrapupv1alpha1.OutcomeSucceeded, want: "dryRun: record the outcome and emit a WouldDelete Event, delete nothing (without dryRun: delete the AppWrapper at once)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DescribeAction(tc.rule, tc.outcome); !strings.Contains(got, tc.want) {
				t.Errorf("DescribeAction = %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

// A rule names a kind that is served but that wrapup may not list (no
// ClusterRole grants it): the controller's watches say it is not
// watchable, so the rule blocks. Explain, reading as a user who may read
// it, takes that from the rule's Ready condition and says the same.
func TestExplainKindTheControllerCannotWatch(t *testing.T) {
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{batchv1.SchemeGroupVersion, awv1beta2.GroupVersion, corev1.SchemeGroupVersion})
	m.Add(batchv1.SchemeGroupVersion.WithKind("Job"), apimeta.RESTScopeNamespace)
	m.Add(awv1beta2.GroupVersion.WithKind("AppWrapper"), apimeta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), apimeta.RESTScopeNamespace)
	aw := exAppWrapper(t, withComponents(
		awv1beta2.AppWrapperComponent{Template: template(t, "apps/v1", "Deployment", "sweep-inference")},
		awv1beta2.AppWrapperComponent{Template: template(t, "v1", "ConfigMap", "sweep-done")}))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sweep-done", Namespace: exNS,
		Labels:          map[string]string{awv1beta2.AppWrapperLabel: exAW},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: exAW, UID: exAWUID, Controller: ptr.To(true)}}},
		Data: map[string]string{"done": "true"}}
	r := exRule("configmaps", 10, func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{Kind: "ConfigMap"}
		r.Spec.Success = "object.data.done == 'true'"
		r.Status.Conditions = []metav1.Condition{{Type: wrapupv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: r.Generation,
			Reason: wrapupv1alpha1.ReasonTriggerKindNotWatchable, Message: `configmaps is forbidden`, LastTransitionTime: metav1.NewTime(exNow)}}
	})
	c := fake.NewClientBuilder().WithScheme(util.Scheme()).WithRESTMapper(m).WithObjects(aw, cm, exNamespace(), r).Build()
	ex, err := Explain(context.Background(), c, nil, client.ObjectKeyFromObject(aw), exNow)
	if err != nil {
		t.Fatal(err)
	}
	// The controller: the same reads, with its watches' view of the kind.
	v := &Reader{Client: c, Labelled: true, Kinds: func(gk schema.GroupKind) decision.Kind {
		if gk.Kind == "ConfigMap" {
			return decision.Kind{State: decision.KindNotWatchable, Message: "configmaps is forbidden"}
		}
		return decision.Kind{State: decision.KindWatched}
	}}
	in, err := Gather(context.Background(), v, &celpolicies.Cache{}, client.ObjectKeyFromObject(aw), nil, decision.Input{Now: exNow})
	if err != nil {
		t.Fatal(err)
	}
	d := decision.Decide(context.Background(), in)
	if ex.Verdict != decision.VerdictBlocked || d.Verdict != decision.VerdictBlocked {
		t.Errorf("explain says %s, the controller decides %s; want both Blocked\n%s", ex.Verdict, d.Verdict, ex.Reason)
	}
}

// TestExplainSeveralTriggers: explain reads every candidate, lists each
// with its state, and says which one is still running.
func TestExplainSeveralTriggers(t *testing.T) {
	aw := exAppWrapper(t, withComponents(
		awv1beta2.AppWrapperComponent{Template: template(t, "apps/v1", "Deployment", "sweep-inference")},
		awv1beta2.AppWrapperComponent{Template: template(t, "batch/v1", "Job", "sweep-a")},
		awv1beta2.AppWrapperComponent{Template: template(t, "batch/v1", "Job", "sweep-b")}))
	r := exRule("sweeps", 10, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Trigger.Policy = wrapupv1alpha1.TriggerPolicyAll })
	c := fake.NewClientBuilder().WithScheme(util.Scheme()).WithRESTMapper(explainMapper()).
		WithObjects(aw, exNamespace(), r, exLiveJob("sweep-a", "a-uid", jobDone), exLiveJob("sweep-b", "b-uid", jobRunning)).Build()
	ex, err := Explain(context.Background(), c, nil, client.ObjectKeyFromObject(aw), exNow)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Verdict != decision.VerdictWaitingForTrigger || !strings.Contains(ex.Reason, "Job sweep-b") {
		t.Errorf("verdict %s (%s), want waiting for sweep-b", ex.Verdict, ex.Reason)
	}
	out := ex.String()
	for _, want := range []string{"Triggers:   2 candidates, policy All", "batch/v1 Job sweep-a", "Succeeded", "batch/v1 Job sweep-b", "Running"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain does not say %q:\n%s", want, out)
		}
	}
	if len(ex.Candidates) != 2 || ex.Candidates[0].UID != "a-uid" || ex.Candidates[1].State != "Running" {
		t.Errorf("candidates = %+v", ex.Candidates)
	}

	// Once the second succeeds: both decided, marked.
	b := &batchv1.Job{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: exNS, Name: "sweep-b"}, b); err != nil {
		t.Fatal(err)
	}
	b.Status = jobDone
	if err := c.Status().Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	ex, err = Explain(context.Background(), c, nil, client.ObjectKeyFromObject(aw), exNow)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Verdict != decision.VerdictDelete || ex.Write == nil || len(ex.Write.Triggers) != 2 {
		t.Errorf("verdict %s (%s), want Delete recording both", ex.Verdict, ex.Reason)
	}
	if n := strings.Count(ex.String(), "  * batch/v1 Job"); n != 2 {
		t.Errorf("%d candidates marked as deciding, want 2:\n%s", n, ex.String())
	}
}

// TestNamespaceReadOnlyForNamespaceSelectors: the final check reads the
// AppWrapper's Namespace only when a rule selects by namespace, where its
// labels decide; without such a rule the decision is the same without it.
func TestNamespaceReadOnlyForNamespaceSelectors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sel     *metav1.LabelSelector
		reads   int
		verdict decision.Verdict
	}{
		{"no namespaceSelector", nil, 0, decision.VerdictDelete},
		{"selects the namespace", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}, 1, decision.VerdictDelete},
		{"excludes the namespace", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}, 1, decision.VerdictNoRule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aw := exAppWrapper(t)
			r := exRule("jobs", 10, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.NamespaceSelector = tc.sel })
			reads := 0
			c := fake.NewClientBuilder().WithScheme(util.Scheme()).WithRESTMapper(explainMapper()).
				WithObjects(aw, exNamespace(), r, exLiveJob(exJob, exJobUID, jobDone)).
				WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*corev1.Namespace); ok {
						reads++
					}
					return c.Get(ctx, key, obj, opts...)
				}}).Build()
			v := &Reader{Client: c, Labelled: true}
			in, err := Gather(context.Background(), v, &celpolicies.Cache{}, client.ObjectKeyFromObject(aw), nil, decision.Input{Now: exNow})
			if err != nil {
				t.Fatal(err)
			}
			if d := decision.Decide(context.Background(), in); reads != tc.reads || d.Verdict != tc.verdict {
				t.Errorf("%d Namespace reads, verdict %s (%s); want %d, %s", reads, d.Verdict, d.Reason, tc.reads, tc.verdict)
			}
		})
	}
}
