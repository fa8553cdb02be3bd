package view

import (
	"context"
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
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/test/util"
)

// Explain is asked about one AppWrapper "sweep" in namespace team-a,
// labelled a benchmark, built with test/util's builders: it wraps an
// inference Deployment and the benchmark Job sweep-bench, whose live Job
// is the trigger; rules for batch Jobs select it.

const (
	exNS      = "team-a"
	exAW      = "sweep"
	exAWUID   = types.UID("aw-uid")
	exJob     = "sweep-bench"
	exJobUID  = types.UID("job-uid")
	exJobUID2 = types.UID("job-uid-2")
)

var (
	exNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	// exDone is when a live Job that finished did.
	exDone = exNow.Add(-time.Minute)
)

// explainMapper maps what the API server of the tests serves: Jobs and
// AppWrappers.
func explainMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{batchv1.SchemeGroupVersion, awv1beta2.GroupVersion})
	m.Add(batchv1.SchemeGroupVersion.WithKind("Job"), apimeta.RESTScopeNamespace)
	m.Add(awv1beta2.GroupVersion.WithKind("AppWrapper"), apimeta.RESTScopeNamespace)
	return m
}

// sweep is the AppWrapper sweep, Running, wrapping objs.
func sweep(objs ...runtime.Object) *util.AppWrapperWrapper {
	w := util.MakeAppWrapper(exAW, exNS).UID(exAWUID).Label("role", "benchmark").Phase(awv1beta2.AppWrapperRunning)
	for _, o := range objs {
		w.Component(o, nil)
	}
	return w
}

// inference is sweep's inference Deployment, as a component's template.
func inference() runtime.Object {
	return util.MakeObject("apps/v1", "Deployment", "sweep-inference").Obj()
}

// exAppWrapper is sweep wrapping the inference Deployment and the
// benchmark Job.
func exAppWrapper() *util.AppWrapperWrapper {
	return sweep(inference(), util.MakeObject("batch/v1", "Job", exJob).Obj())
}

// liveJob is sweep's Job name, as its controller created it with the UID
// uid, running since an hour.
func liveJob(name string, uid types.UID) *util.JobWrapper {
	return util.MakeJob(name).OwnedBy(sweep().Obj()).UID(uid).Started(exNow.Add(-time.Hour))
}

// changed is obj after change: what no builder writes.
func changed[T any](obj T, change func(T)) T {
	change(obj)
	return obj
}

// jobRule starts a rule for the AppWrapper's batch Job.
func jobRule(name string) *util.RuleWrapper {
	return util.MakeRule(name).TriggerKind("batch", "Job", "")
}

// served is w's rule as the API server gives it: a UID (the policy cache
// is keyed by it, as the API server makes them unique) and generation 1.
func served(w *util.RuleWrapper) *wrapupv1alpha1.CompletionRule {
	return w.UID(types.UID("rule-" + w.Name)).Generation(1).Obj()
}

// recorded is aw's AppWrapper, rule and the CompletionRecord of its run
// (recordOf).
func recorded(aw *util.AppWrapperWrapper, rule *wrapupv1alpha1.CompletionRule, o wrapupv1alpha1.Outcome, at time.Time, uid types.UID) []client.Object {
	obj := aw.Obj()
	return []client.Object{obj, rule, recordOf(obj, rule, o, at, uid)}
}

// recordOf is the CompletionRecord wrapup wrote of aw's run: outcome o,
// decided by rule at at, for the live Job of uid (component 1, sweep's
// benchmark Job), with the message "recorded message".
func recordOf(aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule, o wrapupv1alpha1.Outcome, at time.Time, uid types.UID) *wrapupv1alpha1.CompletionRecord {
	return util.MakeRecord(aw, rule, o, at).Trigger(1, uid).Message("recorded message").Obj()
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
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj()},
			want:    want{verdict: decision.VerdictNoRule, reason: "no CompletionRule applies"},
		},
		{
			name: "rules that do not select the AppWrapper or its namespace",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(),
				served(jobRule("training").Priority(5).AppWrapperLabels(map[string]string{"role": "training"})),
				served(jobRule("team-b").Priority(5).NamespaceLabels(map[string]string{"team": "b"}))},
			want: want{verdict: decision.VerdictNoRule, rules: map[string]string{
				"training": "appWrapperSelector (role=training) does not select the AppWrapper (labels: role=benchmark)",
				"team-b":   "namespaceSelector (team=b) does not select namespace team-a (labels: ",
			}},
		},
		{
			name: "an invalid rule of a higher priority blocks every rule below it",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(),
				served(jobRule("low").Priority(1)), served(jobRule("high").Priority(10)),
				served(jobRule("broken").Priority(100).Success("object.status.("))},
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
			name: "a tie of priorities is won by name, and the winner says so",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Obj(),
				served(jobRule("b-tied").Priority(10)), served(jobRule("a-tied").Priority(10)), served(jobRule("low").Priority(1))},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "a-tied", reason: "not finished", rules: map[string]string{
				"a-tied": "wins: the highest priority (10) is shared with b-tied, and a-tied sorts first by name",
				"b-tied": "loses to a-tied: same priority 10, and a-tied sorts first by name",
				"low":    "loses to a-tied: lower priority (1 < 10)",
			}},
		},
		{
			name: "the highest priority wins; an invalid rule below it acts on nothing",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Obj(),
				served(jobRule("low").Priority(1)), served(jobRule("high").Priority(10)),
				served(jobRule("broken").Priority(5).Success("object.status.("))},
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
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Obj(),
				served(jobRule("b").Priority(5)), served(jobRule("a").Priority(5))},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "a", rules: map[string]string{"b": "same priority 5, and a sorts first"}},
		},
		{
			name: "a rule being deleted is skipped",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Obj(),
				served(jobRule("going").Priority(10).DeletionTimestamp(exNow).Finalizers("example.com/hold")), served(jobRule("staying"))},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "staying", rules: map[string]string{"going": "being deleted"}},
		},
		{
			name:    "ignored AppWrapper",
			objects: []client.Object{exAppWrapper().Annotation(wrapupv1alpha1.IgnoreAnnotation, "true").Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(jobRule("all"))},
			want:    want{verdict: decision.VerdictIgnored, winner: "all", reason: "wrapup.dev/ignore"},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Trigger != nil || ex.Evaluation != nil {
					t.Errorf("an ignored AppWrapper is not evaluated, got trigger %+v evaluation %+v", ex.Trigger, ex.Evaluation)
				}
			},
		},
		{
			name:    "AppWrapper terminating",
			objects: []client.Object{exAppWrapper().Phase(awv1beta2.AppWrapperTerminating).Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(jobRule("all"))},
			want:    want{verdict: decision.VerdictBeingDeleted, winner: "all"},
		},
		{
			name:    "AppWrapper with a deletionTimestamp",
			objects: []client.Object{exAppWrapper().DeletionTimestamp(exNow).Finalizers("workload.codeflare.dev/finalizer").Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(jobRule("all"))},
			want:    want{verdict: decision.VerdictBeingDeleted, winner: "all"},
		},
		{
			name: "two Jobs under a kind rule: ambiguous",
			objects: []client.Object{sweep(util.MakeObject("batch/v1", "Job", "first").Obj(), util.MakeObject("batch/v1", "Job", "second").Obj()).Obj(),
				served(jobRule("jobs"))},
			want: want{verdict: decision.VerdictNoTrigger, winner: "jobs", reason: "has 2 (components 0, 1)"},
			check: func(t *testing.T, ex *Explanation) {
				if len(ex.Events) != 1 || ex.Events[0].Reason != wrapupv1alpha1.ReasonAmbiguousTrigger {
					t.Errorf("events = %+v, want one AmbiguousTrigger Warning", ex.Events)
				}
			},
		},
		{
			name:    "a rule without kind and no annotated component",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(util.MakeRule("annotated"))},
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
			name:    "a rule without kind takes the annotated component",
			objects: []client.Object{sweep(inference()).Trigger(util.MakeObject("batch/v1", "Job", exJob).Obj()).Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(util.MakeRule("annotated"))},
			want:    want{verdict: decision.VerdictDelete, winner: "annotated", outcome: wrapupv1alpha1.OutcomeSucceeded, willRecord: true},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Trigger == nil || !ex.Trigger.Annotated || ex.Trigger.Index != 1 {
					t.Errorf("trigger = %+v, want the annotated component 1", ex.Trigger)
				}
			},
		},
		{
			name:    "trigger name not generated yet",
			objects: []client.Object{sweep(util.MakeObject("batch/v1", "Job", "").Obj()).Obj(), served(jobRule("jobs"))},
			want:    want{verdict: decision.VerdictWaitingForTrigger, winner: "jobs", reason: "generateName"},
		},
		{
			name:    "trigger not created yet",
			objects: []client.Object{exAppWrapper().Obj(), served(jobRule("jobs"))},
			want:    want{verdict: decision.VerdictWaitingForTrigger, winner: "jobs", reason: "Job sweep-bench does not exist"},
		},
		{
			name: "a same-named Job that the AppWrapper does not control",
			objects: []client.Object{exAppWrapper().Obj(), served(jobRule("jobs")),
				changed(liveJob(exJob, exJobUID).Complete(exDone).Obj(), func(j *batchv1.Job) { j.OwnerReferences = nil })},
			want: want{verdict: decision.VerdictNoTrigger, winner: "jobs", reason: "not controlled by this AppWrapper"},
		},
		{
			name: "a Job without the AppWrapper label is invisible to the watch",
			objects: []client.Object{exAppWrapper().Obj(), served(jobRule("jobs")),
				changed(liveJob(exJob, exJobUID).Complete(exDone).Obj(), func(j *batchv1.Job) { j.Labels = nil })},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "jobs", reason: "lacks the label workload.codeflare.dev/appwrapper"},
		},
		{
			name:    "trigger kind not served",
			objects: []client.Object{exAppWrapper().Obj(), served(jobRule("jobs"))},
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
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(jobRule("typo").Success("object.status.noSuchField == 1"))},
			want:    want{verdict: decision.VerdictWaitingForTrigger, winner: "typo", reason: "EvaluationError"},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Evaluation == nil || !strings.Contains(ex.Evaluation.Error, "noSuchField") {
					t.Errorf("evaluation = %+v, want the runtime error", ex.Evaluation)
				}
			},
		},
		{
			name: "the trigger is evaluated as the watch caches it, without managedFields",
			objects: []client.Object{exAppWrapper().Obj(), served(jobRule("fields").Success("has(object.metadata.managedFields)")),
				changed(liveJob(exJob, exJobUID).Complete(exDone).Obj(), func(j *batchv1.Job) {
					j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "batch/v1",
						FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:succeeded":{}}}`)}, Subresource: "status"}}
				})},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "fields"},
		},
		{
			name:    "succeeded, DeleteAll at once",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(jobRule("jobs").Message("'done: ' + object.metadata.name"))},
			want:    want{verdict: decision.VerdictDelete, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded, willRecord: true, reason: "not recorded yet"},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Evaluation == nil || ex.Evaluation.Message != "done: sweep-bench" || ex.Evaluation.Cost == 0 {
					t.Errorf("evaluation = %+v, want the rule's message and its cost", ex.Evaluation)
				}
			},
		},
		{
			name: "succeeded and recorded 100s ago, TTL 300s",
			objects: append(recorded(exAppWrapper(), served(jobRule("jobs").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300)), wrapupv1alpha1.OutcomeSucceeded, exNow.Add(-100*time.Second), exJobUID),
				liveJob(exJob, exJobUID).Complete(exDone).Obj()),
			want: want{verdict: decision.VerdictDeleteAfterTTL, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded, after: 200 * time.Second, reason: "2026-05-01T12:03:20Z"},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Recorded == nil || ex.Recorded.Rule != "jobs" || ex.Recorded.Message != "recorded message" {
					t.Errorf("recorded = %+v", ex.Recorded)
				}
			},
		},
		{
			name: "a TTL shortened after the run was recorded counts from now, not from the end of the run",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(),
				served(jobRule("jobs").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 60)),
				recordOf(exAppWrapper().Obj(), served(jobRule("jobs").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600)), wrapupv1alpha1.OutcomeSucceeded, exNow.Add(-100*time.Second), exJobUID)},
			want: want{verdict: decision.VerdictDeleteAfterTTL, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded, after: time.Minute},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Stamp == nil || !ex.Stamp.DueAt.Equal(exNow.Add(time.Minute)) {
					t.Errorf("stamp = %+v, want the deletion due at %s", ex.Stamp, exNow.Add(time.Minute))
				}
				if want := "In force:   rule jobs's DeleteAll, deleting from 2026-05-01T12:58:20Z (the run's CompletionRecord)\n"; !strings.Contains(ex.String(), want) {
					t.Errorf("explain does not say %q:\n%s", want, ex.String())
				}
			},
		},
		{
			name: "a tenant's record on the AppWrapper's metadata is not a record: the run is recorded now, its TTL counted from now",
			objects: []client.Object{exAppWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, exNow.Add(-time.Hour), exJobUID).RecordedBy("jobs", "batch/Job/"+exJob).
				RecordedMessage("forged message").RecordedOn(exAWUID).Obj(),
				liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(jobRule("jobs").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300))},
			want: want{verdict: decision.VerdictDeleteAfterTTL, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded, after: 300 * time.Second, willRecord: true},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Recorded != nil || !strings.Contains(ex.String(), "Recorded:   no outcome\n") {
					t.Errorf("recorded = %+v, want none:\n%s", ex.Recorded, ex.String())
				}
				if ex.Write == nil || ex.Write.Message == "forged message" || !ex.Write.FinishedAt.Equal(exNow) {
					t.Errorf("write = %+v, want wrapup's own evaluation at %s", ex.Write, exNow)
				}
			},
		},
		{
			name: "a tenant's failure on the metadata of a running AppWrapper changes nothing",
			objects: []client.Object{exAppWrapper().Recorded(wrapupv1alpha1.OutcomeFailed, exNow.Add(-time.Minute), exJobUID2).RecordedBy("jobs", "batch/Job/"+exJob).Obj(),
				liveJob(exJob, exJobUID).Obj(), served(jobRule("jobs"))},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "jobs", reason: "not finished"},
		},
		{
			name: "the record of an earlier AppWrapper of the same name is not this run's",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Obj(), served(jobRule("jobs")),
				changed(recordOf(exAppWrapper().Obj(), served(jobRule("jobs")), wrapupv1alpha1.OutcomeSucceeded, exNow.Add(-time.Minute), exJobUID),
					func(cr *wrapupv1alpha1.CompletionRecord) { cr.AppWrapper.UID = "earlier-aw-uid" })},
			want: want{verdict: decision.VerdictWaitingForTrigger, winner: "jobs", reason: "not finished"},
		},
		{
			name:    "succeeded, not recorded yet, TTL 60s",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(jobRule("jobs").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 60))},
			want:    want{verdict: decision.VerdictDeleteAfterTTL, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded, after: time.Minute, willRecord: true},
		},
		{
			name:    "succeeded, UpdateStatus",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(), served(jobRule("record").OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0))},
			want:    want{verdict: decision.VerdictRecordOnly, winner: "record", outcome: wrapupv1alpha1.OutcomeSucceeded, willRecord: true, reason: "UpdateStatus"},
		},
		{
			name: "succeeded, dry run",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Complete(exDone).Obj(),
				served(jobRule("dry").DryRun())},
			want: want{verdict: decision.VerdictDryRun, winner: "dry", outcome: wrapupv1alpha1.OutcomeSucceeded, willRecord: true, reason: "WouldDelete"},
		},
		{
			name:    "failed while Running: waiting for retries",
			objects: []client.Object{exAppWrapper().Obj(), liveJob(exJob, exJobUID).Failed(exDone).Obj(), served(jobRule("jobs"))},
			want:    want{verdict: decision.VerdictWaitingForRetries, winner: "jobs", after: decision.DefaultFailureGracePeriod, reason: "may still retry"},
		},
		{
			name: "failed while Running, with the AppWrapper's own grace period",
			objects: []client.Object{exAppWrapper().Annotation(awv1beta2.FailureGracePeriodDurationAnnotation, "10s").Obj(),
				liveJob(exJob, exJobUID).Failed(exDone).Obj(), served(jobRule("jobs"))},
			want: want{verdict: decision.VerdictWaitingForRetries, winner: "jobs", after: 10*time.Second + decision.AppWrapperRecheckPeriod + decision.Slack},
		},
		{
			name:    "failed while Resetting: the AppWrapper controller retries",
			objects: []client.Object{exAppWrapper().Phase(awv1beta2.AppWrapperResetting).Obj(), liveJob(exJob, exJobUID).Failed(exDone).Obj(), served(jobRule("jobs"))},
			want:    want{verdict: decision.VerdictWaitingForRetries, winner: "jobs", reason: "Resetting"},
		},
		{
			name: "failed and recorded for this trigger: final",
			objects: append(recorded(exAppWrapper(), served(jobRule("jobs").OnFailure(wrapupv1alpha1.ActionDeleteAll, 300)), wrapupv1alpha1.OutcomeFailed, exNow.Add(-10*time.Second), exJobUID),
				liveJob(exJob, exJobUID).Failed(exDone).Obj()),
			want: want{verdict: decision.VerdictDeleteAfterTTL, winner: "jobs", outcome: wrapupv1alpha1.OutcomeFailed, after: 290 * time.Second},
		},
		{
			name: "AppWrapper Failed: failed without evaluating the trigger",
			objects: []client.Object{changed(exAppWrapper().Phase(awv1beta2.AppWrapperFailed).Condition(awv1beta2.Unhealthy, metav1.ConditionTrue, "FoundFailedResources", time.Time{}).Obj(),
				func(aw *awv1beta2.AppWrapper) { aw.Status.Conditions[0].Message = "retry limit exceeded" }), served(jobRule("jobs"))},
			want: want{verdict: decision.VerdictDelete, winner: "jobs", outcome: wrapupv1alpha1.OutcomeFailed, willRecord: true},
			check: func(t *testing.T, ex *Explanation) {
				if ex.Evaluation == nil || !ex.Evaluation.FromAppWrapperPhase || !strings.Contains(ex.Evaluation.Message, "retry limit exceeded") {
					t.Errorf("evaluation = %+v, want Failed from the AppWrapper's phase", ex.Evaluation)
				}
			},
		},
		{
			name: "AppWrapper Failed after a recorded success keeps the success",
			objects: recorded(exAppWrapper().Phase(awv1beta2.AppWrapperFailed), served(jobRule("jobs").OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0)),
				wrapupv1alpha1.OutcomeSucceeded, exNow.Add(-time.Hour), exJobUID),
			want: want{verdict: decision.VerdictRecordOnly, winner: "jobs", outcome: wrapupv1alpha1.OutcomeSucceeded},
		},
		{
			name: "a recorded outcome that no longer holds is cleared",
			objects: append(recorded(exAppWrapper(), served(jobRule("jobs")), wrapupv1alpha1.OutcomeFailed, exNow.Add(-time.Minute), exJobUID),
				liveJob(exJob, exJobUID2).Obj()),
			want: want{verdict: decision.VerdictClearOutcome, winner: "jobs", reason: "recorded outcome Failed no longer holds"},
		},
		{
			name:    "AppWrapper not found",
			objects: []client.Object{served(jobRule("jobs"))},
			wantErr: "not found",
		},
		{
			name:    "rules cannot be listed",
			objects: []client.Object{exAppWrapper().Obj()},
			funcs: &interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return apierrors.NewForbidden(schema.GroupResource{Group: "wrapup.dev", Resource: "completionrules"}, "", errors.New("no access"))
			}},
			wantErr: "listing rules",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]client.Object{util.MakeNamespace(exNS).Label("team", "a").Obj()}, tc.objects...)
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
	rules := []*wrapupv1alpha1.CompletionRule{served(jobRule("c").Priority(3)), served(jobRule("a").Priority(7)), served(jobRule("b").Priority(7)),
		served(jobRule("z").Priority(9).AppWrapperLabels(map[string]string{"role": "other"}))}
	objs := []client.Object{util.MakeNamespace(exNS).Label("team", "a").Obj(), exAppWrapper().Obj(), liveJob(exJob, exJobUID).Obj()}
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
				Recorded: &decision.Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "high", FinishedAt: exNow.Add(-time.Minute),
					Stamp: decision.Stamp{Rule: "high", RuleUID: "rule-high", Action: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](300)},
						DueAt: exNow.Add(4 * time.Minute)}},
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
		"In force:   rule high's DeleteAll, deleting from 2026-05-01T12:04:00Z (the run's CompletionRecord)\n",
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
		{name: "default is DeleteAll at once", rule: served(jobRule("r")), outcome: wrapupv1alpha1.OutcomeSucceeded, want: "DeleteAll: record the outcome, then delete the AppWrapper at once"},
		{name: "TTL", rule: served(jobRule("r").OnFailure(wrapupv1alpha1.ActionDeleteAll, 300)), outcome: wrapupv1alpha1.OutcomeFailed, want: "5m0s after the trigger finished; a failure is final only once"},
		{name: "UpdateStatus", rule: served(jobRule("r").OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0)), outcome: wrapupv1alpha1.OutcomeSucceeded, want: "UpdateStatus: record the outcome on the AppWrapper, delete nothing"},
		{name: "dry run", rule: served(jobRule("r").DryRun()), outcome: wrapupv1alpha1.OutcomeSucceeded, want: "dryRun: record the outcome and emit a WouldDelete Event, delete nothing (without dryRun: delete the AppWrapper at once)"},
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
	aw := sweep(inference(), util.MakeObject("v1", "ConfigMap", "sweep-done").Obj()).Obj()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sweep-done", Namespace: exNS,
		Labels:          map[string]string{awv1beta2.AppWrapperLabel: exAW},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: exAW, UID: exAWUID, Controller: ptr.To(true)}}},
		Data: map[string]string{"done": "true"}}
	r := served(util.MakeRule("configmaps").Priority(10).TriggerKind("", "ConfigMap", "").Success("object.data.done == 'true'"))
	r.Status.Conditions = []metav1.Condition{{Type: wrapupv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: r.Generation,
		Reason: wrapupv1alpha1.ReasonTriggerKindNotWatchable, Message: `configmaps is forbidden`, LastTransitionTime: metav1.NewTime(exNow)}}
	c := fake.NewClientBuilder().WithScheme(util.Scheme()).WithRESTMapper(m).WithObjects(aw, cm, util.MakeNamespace(exNS).Label("team", "a").Obj(), r).Build()
	ex, err := Explain(context.Background(), c, nil, client.ObjectKeyFromObject(aw), exNow)
	if err != nil {
		t.Fatal(err)
	}
	// The controller: the same reads, with its watches' view of the kind.
	v := &read.Reader{Client: c, Labelled: true, Kinds: func(gk schema.GroupKind) decision.Kind {
		if gk.Kind == "ConfigMap" {
			return decision.Kind{State: decision.KindNotWatchable, Message: "configmaps is forbidden"}
		}
		return decision.Kind{State: decision.KindWatched}
	}}
	in, err := read.Gather(context.Background(), v, &celpolicies.Cache{}, client.ObjectKeyFromObject(aw), nil, decision.Input{Now: exNow})
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
	aw := sweep(inference(), util.MakeObject("batch/v1", "Job", "sweep-a").Obj(), util.MakeObject("batch/v1", "Job", "sweep-b").Obj()).Obj()
	r := served(jobRule("sweeps").Priority(10).Policy(wrapupv1alpha1.TriggerPolicyAll))
	c := fake.NewClientBuilder().WithScheme(util.Scheme()).WithRESTMapper(explainMapper()).
		WithObjects(aw, util.MakeNamespace(exNS).Label("team", "a").Obj(), r, liveJob("sweep-a", "a-uid").Complete(exDone).Obj(), liveJob("sweep-b", "b-uid").Obj()).Build()
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
	b.Status = liveJob("sweep-b", "b-uid").Complete(exDone).Obj().Status
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
			aw := exAppWrapper().Obj()
			r := served(jobRule("jobs").Priority(10).NamespaceSelector(tc.sel))
			reads := 0
			c := fake.NewClientBuilder().WithScheme(util.Scheme()).WithRESTMapper(explainMapper()).
				WithObjects(aw, util.MakeNamespace(exNS).Label("team", "a").Obj(), r, liveJob(exJob, exJobUID).Complete(exDone).Obj()).
				WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*corev1.Namespace); ok {
						reads++
					}
					return c.Get(ctx, key, obj, opts...)
				}}).Build()
			v := &read.Reader{Client: c, Labelled: true}
			in, err := read.Gather(context.Background(), v, &celpolicies.Cache{}, client.ObjectKeyFromObject(aw), nil, decision.Input{Now: exNow})
			if err != nil {
				t.Fatal(err)
			}
			if d := decision.Decide(context.Background(), in); reads != tc.reads || d.Verdict != tc.verdict {
				t.Errorf("%d Namespace reads, verdict %s (%s); want %d, %s", reads, d.Verdict, d.Reason, tc.reads, tc.verdict)
			}
		})
	}
}
