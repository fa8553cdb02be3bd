package decision

import (
	"context"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Builders for decisions: an AppWrapper "run" in namespace "ns" that wraps
// an inference Deployment and the benchmark Job "bench", its live Job, and
// rules.

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const (
	awUID   = types.UID("aw-uid")
	jobUID  = types.UID("job-uid")
	jobUID2 = types.UID("job-uid-2")
)

var jobRef = Ref{Index: 1, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: "bench", Template: "bench"}

type awBuilder struct{ aw *awv1beta2.AppWrapper }

func appWrapper(t *testing.T) *awBuilder {
	t.Helper()
	aw := &awv1beta2.AppWrapper{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: awUID, ResourceVersion: "7", Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: awv1beta2.AppWrapperSpec{Components: []awv1beta2.AppWrapperComponent{
			component(t, "apps/v1", "Deployment", "inference", nil),
			component(t, "batch/v1", "Job", "bench", nil),
		}},
		Status: awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperRunning},
	}
	return &awBuilder{aw: aw}
}

func (b *awBuilder) phase(p awv1beta2.AppWrapperPhase) *awBuilder { b.aw.Status.Phase = p; return b }

func (b *awBuilder) annotate(k, v string) *awBuilder { b.aw.Annotations[k] = v; return b }

func (b *awBuilder) condition(t awv1beta2.AppWrapperCondition, reason string, at time.Time) *awBuilder {
	b.aw.Status.Conditions = append(b.aw.Status.Conditions, metav1.Condition{Type: string(t), Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(at)})
	return b
}

func (b *awBuilder) retries(n int32) *awBuilder { b.aw.Status.Retries = n; return b }

// recorded writes a record as the controller writes it.
func (b *awBuilder) recorded(o wrapupv1alpha1.Outcome, ago time.Duration, uid types.UID) *awBuilder {
	(&Record{Outcome: o, Rule: "jobs", FinishedAt: now.Add(-ago), Message: "done", TriggerUID: uid, TriggerRef: jobRef.String()}).Apply(b.aw)
	return b
}

func (b *awBuilder) obj() *awv1beta2.AppWrapper { return b.aw }

// job is the live trigger: state "" (running), "Complete" or "Failed".
func job(uid types.UID, state string) Trigger {
	status := map[string]any{"active": int64(1)}
	if state != "" {
		first := map[string]string{"Complete": "SuccessCriteriaMet", "Failed": "FailureTarget"}[state]
		status = map[string]any{"conditions": []any{
			map[string]any{"type": first, "status": "True"},
			map[string]any{"type": state, "status": "True", "message": "the Job " + state},
		}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "status": status}}
	u.SetName("bench")
	u.SetNamespace("ns")
	u.SetUID(uid)
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: "run", UID: awUID, Controller: ptr.To(true)}})
	return Trigger{Ref: jobRef, State: TriggerPresent, Object: u}
}

func jobRule(name string, prio int32, mods ...func(*wrapupv1alpha1.CompletionRule)) *wrapupv1alpha1.CompletionRule {
	r := rule(name, prio, nil, nil)
	r.UID = types.UID("uid-" + name)
	r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}
	for _, m := range mods {
		m(r)
	}
	return r
}

func onFailure(a wrapupv1alpha1.Action, ttl int32) func(*wrapupv1alpha1.CompletionRule) {
	return func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.OnFailure = wrapupv1alpha1.ActionSpec{Action: a, TTLSecondsAfterFinished: ptr.To(ttl)}
	}
}

func onSuccess(a wrapupv1alpha1.Action, ttl int32) func(*wrapupv1alpha1.CompletionRule) {
	return func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: a, TTLSecondsAfterFinished: ptr.To(ttl)}
	}
}

func input(t *testing.T, aw *awv1beta2.AppWrapper, trig Trigger, rules ...*wrapupv1alpha1.CompletionRule) Input {
	t.Helper()
	in := Input{Now: now, AppWrapper: aw, Triggers: []Trigger{trig},
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
		Kinds:     map[schema.GroupKind]Kind{jobRef.Kind: {State: KindWatched}}}
	for _, r := range rules {
		in.Rules = append(in.Rules, compiled(t, r))
	}
	return in
}

// TestDecide holds a case for each way the decision went wrong before it
// was one function; each failed on the code of the time.
func TestDecide(t *testing.T) {
	broken := func(t *testing.T, name string, prio int32) Rule {
		r := jobRule(name, prio)
		r.Spec.OnFailure = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionUpdateStatus}
		return Rule{Rule: r, Err: errBroken}
	}
	annotatedTriggers := func() *wrapupv1alpha1.CompletionRule {
		r := rule("annotated-triggers", -1000, nil, nil)
		r.UID = "uid-annotated"
		return r
	}
	tests := []struct {
		name string
		in   func(t *testing.T) Input
		// want is the verdict; outcome, write and clear what comes with it.
		want    Verdict
		outcome wrapupv1alpha1.Outcome
		write   bool
		clear   bool
		after   time.Duration
		requeue time.Duration
		reason  string
		events  []string
	}{
		{
			// 1. A typo in a high-priority rule that keeps failed runs
			// handed them to the shipped rule, which deleted them.
			name: "a matching rule that does not compile blocks the rules below it",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).obj()
				aw.Spec.Components[1].Annotations = map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
				in := input(t, aw, job(jobUID, "Failed"), annotatedTriggers())
				in.Rules = append(in.Rules, broken(t, "keep-failed", 100))
				return in
			},
			want: VerdictBlocked, reason: "keep-failed (priority 100) selects the AppWrapper and is not usable", events: []string{wrapupv1alpha1.ReasonBlockedByRule},
		},
		{
			name: "an unusable rule of a kind the AppWrapper lacks does not apply, and blocks nothing",
			in: func(t *testing.T) Input {
				in := input(t, appWrapper(t).obj(), job(jobUID, "Complete"), jobRule("jobs", 0))
				r := rule("evals", 10, nil, nil)
				r.UID = "uid-evals"
				r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "example.com", Kind: "EvalRun"}
				r.Spec.Success = "true"
				in.Rules = append(in.Rules, compiled(t, r))
				in.Kinds[schema.GroupKind{Group: "example.com", Kind: "EvalRun"}] = Kind{State: KindNotServed}
				return in
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, write: true,
		},
		{
			name: "a matching rule whose kind is not served blocks the rules below it",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).obj()
				aw.Spec.Components = append(aw.Spec.Components, component(t, "example.com/v1", "EvalRun", "eval", nil))
				in := input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0))
				r := rule("evals", 10, nil, nil)
				r.UID = "uid-evals"
				r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "example.com", Kind: "EvalRun"}
				r.Spec.Success = "true"
				in.Rules = append(in.Rules, compiled(t, r))
				in.Kinds[schema.GroupKind{Group: "example.com", Kind: "EvalRun"}] = Kind{State: KindNotServed}
				return in
			},
			want: VerdictBlocked, reason: "is not served", events: []string{wrapupv1alpha1.ReasonBlockedByRule},
		},
		{
			// 2. A restarted controller took the failure as not final and
			// cleared the record, to write it again later.
			name: "a recorded failure of the same trigger is final after a restart",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).recorded(wrapupv1alpha1.OutcomeFailed, 10*time.Second, jobUID).obj()
				return input(t, aw, job(jobUID, "Failed"), jobRule("jobs", 0, onFailure(wrapupv1alpha1.ActionDeleteAll, 300)))
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeFailed, after: 290 * time.Second, requeue: 290 * time.Second,
		},
		{
			// 3. An evaluation error cleared the record.
			name: "an evaluation error leaves the record as it is",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).recorded(wrapupv1alpha1.OutcomeSucceeded, time.Minute, jobUID).obj()
				return input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Success = "object.status.noSuchField == 1" }))
			},
			want: VerdictWaitingForTrigger, reason: "stays", events: []string{wrapupv1alpha1.ReasonEvaluationError},
		},
		{
			name: "the same trigger running again clears the record",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).recorded(wrapupv1alpha1.OutcomeSucceeded, time.Minute, jobUID).obj()
				return input(t, aw, job(jobUID, ""), jobRule("jobs", 0))
			},
			want: VerdictClearOutcome, clear: true, events: []string{wrapupv1alpha1.ReasonOutcomeCleared},
		},
		{
			name: "a new attempt after a recorded failure clears it",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).recorded(wrapupv1alpha1.OutcomeFailed, time.Minute, jobUID).obj()
				return input(t, aw, job(jobUID2, ""), jobRule("jobs", 0))
			},
			want: VerdictClearOutcome, clear: true, reason: "replaced the one whose failure was recorded", events: []string{wrapupv1alpha1.ReasonOutcomeCleared},
		},
		{
			name: "a recorded failure is held while the AppWrapper controller resets",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperResetting).recorded(wrapupv1alpha1.OutcomeFailed, time.Minute, jobUID).obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobRule("jobs", 0))
			},
			want: VerdictWaitingForRetries, reason: "keeps the record",
		},
		{
			// 7. The AppWrapper controller marked it Failed after its
			// trigger succeeded; wrapup recorded Failed.
			name: "a Failed AppWrapper whose trigger succeeded succeeded",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperFailed).condition(awv1beta2.Unhealthy, "FailedComponent", now).obj()
				return input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, write: true,
		},
		{
			name: "a Failed AppWrapper whose trigger is gone failed",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperFailed).obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobRule("jobs", 0))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeFailed, write: true,
		},
		{
			name: "a Failed AppWrapper held for debugging is not deleted before its hold ends",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperFailed).annotate(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").
					condition(awv1beta2.DeletingResources, "DeletionPaused", now.Add(-4*time.Minute)).
					recorded(wrapupv1alpha1.OutcomeFailed, 5*time.Minute, jobUID).obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobRule("jobs", 0))
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeFailed, after: 6 * time.Minute, requeue: 6 * time.Minute, reason: "hold",
		},
		{
			name: "a Failed AppWrapper whose hold has not started waits for it",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperFailed).annotate(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").
					recorded(wrapupv1alpha1.OutcomeFailed, time.Hour, jobUID).obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobRule("jobs", 0))
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeFailed, after: 10 * time.Minute, requeue: holdStartRetry, reason: "has not started that hold yet",
		},
		{
			// 8. The AppWrapper controller resets at up to failure + 60 s +
			// 60 s + its latency: wrapup's grace was exactly that.
			name: "a failure the AppWrapper controller reports Unhealthy, with retries left, waits for it",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).condition(awv1beta2.Unhealthy, "FoundFailedPods", now.Add(-time.Minute)).retries(1).obj()
				in := input(t, aw, job(jobUID, "Failed"), jobRule("jobs", 0))
				in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-DefaultFailureGracePeriod)}
				return in
			},
			want: VerdictWaitingForRetries, after: UnhealthyBackstop, requeue: UnhealthyBackstop, reason: "Unhealthy with 1 of 3 retries used",
		},
		{
			name: "a failure seen 2m ago is not final yet: the grace has slack",
			in: func(t *testing.T) Input {
				in := input(t, appWrapper(t).obj(), job(jobUID, "Failed"), jobRule("jobs", 0))
				in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-2 * time.Minute)}
				return in
			},
			want: VerdictWaitingForRetries, after: Slack, requeue: Slack,
		},
		{
			name: "a failure past the grace, not reported Unhealthy, is final",
			in: func(t *testing.T) Input {
				in := input(t, appWrapper(t).obj(), job(jobUID, "Failed"), jobRule("jobs", 0))
				in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-DefaultFailureGracePeriod)}
				return in
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeFailed, write: true,
		},
		{
			// 10. Kueue preempted a finished run during its TTL; re-admitted,
			// it ran again.
			name: "a success recorded before a preemption is deleted at the TTL",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperSuspended).recorded(wrapupv1alpha1.OutcomeSucceeded, 10*time.Minute, jobUID).obj()
				aw.Spec.Suspend = true
				return input(t, aw, Trigger{}, jobRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 300)))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded,
		},
		{
			// A success recorded, then the run re-admitted: it ran
			// again for the rest of the TTL.
			name: "a success is not cleared by the trigger of a re-admission, and its deletion is due at once",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).recorded(wrapupv1alpha1.OutcomeSucceeded, time.Minute, jobUID).obj()
				return input(t, aw, job(jobUID2, ""), jobRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 300)))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, reason: "started again",
		},
		{
			name: "a success recorded, then a reset by the AppWrapper controller (FoundFailedPods): deleted at once",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperResetting).retries(1).recorded(wrapupv1alpha1.OutcomeSucceeded, 10*time.Second, jobUID).obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 3600)))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, reason: "Resetting after its recorded success",
		},
		{
			name: "a success recorded, then Kueue suspends it: deleted at once",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).recorded(wrapupv1alpha1.OutcomeSucceeded, 10*time.Second, jobUID).obj()
				aw.Spec.Suspend = true
				return input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 3600)))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, reason: "Kueue suspends",
		},
		{
			name: "a success recorded and kept (UpdateStatus): a new attempt deletes nothing",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperResetting).recorded(wrapupv1alpha1.OutcomeSucceeded, 10*time.Second, jobUID).obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionUpdateStatus, 0)))
			},
			want: VerdictRecordOnly, outcome: wrapupv1alpha1.OutcomeSucceeded,
		},
		{
			name: "a success recorded, running its TTL: no new attempt, the TTL holds",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).recorded(wrapupv1alpha1.OutcomeSucceeded, time.Minute, jobUID).obj()
				return input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 300)))
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeSucceeded, after: 4 * time.Minute, requeue: 4 * time.Minute,
		},
		{
			// 11. The opt-out accepted only "true".
			name: "the opt-out is as lenient as the opt-in",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).annotate(wrapupv1alpha1.IgnoreAnnotation, "True").obj()
				return input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0))
			},
			want: VerdictIgnored,
		},
		{
			// 12a. Every AppWrapper with no annotated component got a
			// Warning NoTrigger on every reconcile.
			name: "a rule with no kind does not apply to an AppWrapper with no annotated component, quietly",
			in: func(t *testing.T) Input {
				return input(t, appWrapper(t).obj(), job(jobUID, "Complete"), annotatedTriggers())
			},
			want: VerdictNoRule,
		},
		{
			// DESIGN 1a: one rule per kind; a rule applies only where it
			// has a candidate.
			name: "a rule that names a kind the AppWrapper lacks does not apply, quietly",
			in: func(t *testing.T) Input {
				r := jobRule("pods", 0)
				r.Spec.Trigger = wrapupv1alpha1.TriggerSpec{Kind: "Pod"}
				return input(t, appWrapper(t).obj(), Trigger{}, r)
			},
			want: VerdictNoRule,
		},
		{
			name: "an annotated component of a kind wrapup cannot watch waits, with a long backoff",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).obj()
				aw.Spec.Components = append(aw.Spec.Components, component(t, "v1", "ConfigMap", "config", map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}))
				in := input(t, aw, Trigger{}, annotatedTriggers())
				in.Kinds[schema.GroupKind{Kind: "ConfigMap"}] = Kind{State: KindNotWatchable, Message: "configmaps is forbidden"}
				return in
			},
			want: VerdictTriggerNotWatchable, requeue: NotWatchableRetry, reason: "configmaps is forbidden", events: []string{wrapupv1alpha1.ReasonTriggerKindNotWatched},
		},
		{
			name: "a record of another component is not acted on",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperSuspended).obj()
				(&Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "pods", FinishedAt: now.Add(-time.Hour), TriggerUID: "pod-uid", TriggerRef: "/Pod/other"}).Apply(aw)
				return input(t, aw, Trigger{}, jobRule("jobs", 0))
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a trigger whose cache has not listed waits, and looks again",
			in: func(t *testing.T) Input {
				return input(t, appWrapper(t).obj(), Trigger{Ref: jobRef, State: TriggerPending}, jobRule("jobs", 0))
			},
			want: VerdictWaitingForTrigger, requeue: PendingRetry,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(context.Background(), tc.in(t))
			if err := CheckVerdict(d); err != nil {
				t.Errorf("the verdict table: %v", err)
			}
			if d.Verdict != tc.want || d.Outcome != tc.outcome || (d.Write != nil) != tc.write || d.Clear != tc.clear || d.After != tc.after || d.Requeue != tc.requeue {
				t.Errorf("got %s, outcome %q, write %v, clear %v, after %s, requeue %s; want %s, %q, %v, %v, %s, %s\nreason: %s",
					d.Verdict, d.Outcome, d.Write != nil, d.Clear, d.After, d.Requeue, tc.want, tc.outcome, tc.write, tc.clear, tc.after, tc.requeue, d.Reason)
			}
			if !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", d.Reason, tc.reason)
			}
			var reasons []string
			for _, e := range d.Events {
				if e.When == EventNow || e.Reason == wrapupv1alpha1.ReasonOutcomeCleared {
					reasons = append(reasons, e.Reason)
				}
			}
			if strings.Join(reasons, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events %v, want %v", reasons, tc.events)
			}
		})
	}
}

// A record keeps the time exactly, so a TTL counted from it never ends
// early; one written to the second by an older wrapup counts from the end
// of its second.
func TestRecordTimes(t *testing.T) {
	aw := appWrapper(t).obj()
	at := now.Add(1234567 * time.Microsecond) // 12:00:01.234567
	in := input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 5)))
	in.Now = at
	d := Decide(context.Background(), in)
	if d.Write == nil || !d.Write.FinishedAt.Equal(at) {
		t.Fatalf("record %+v, want finished at %s", d.Write, at)
	}
	d.Write.Apply(aw)
	if got := aw.Annotations[wrapupv1alpha1.FinishedAtAnnotation]; got != "2026-12-01T12:00:01.234567000Z" {
		t.Errorf("annotation %q", got)
	}
	if rec := ReadRecord(aw); !rec.Same(d.Write) {
		t.Errorf("read back %+v, wrote %+v", rec, d.Write)
	}
	(&Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, FinishedAt: now}).Apply(aw)
	if got := aw.Annotations[wrapupv1alpha1.FinishedAtAnnotation]; got != "2026-12-01T12:00:00.000000000Z" {
		t.Errorf("a time on the second is written %q, with its fraction", got)
	}
	if rec := ReadRecord(aw); !rec.FinishedAt.Equal(now) {
		t.Errorf("read back as %s", rec.FinishedAt)
	}
	aw.Annotations[wrapupv1alpha1.FinishedAtAnnotation] = "2026-12-01T12:00:01Z"
	if rec := ReadRecord(aw); !rec.FinishedAt.Equal(now.Add(1999 * time.Millisecond)) {
		t.Errorf("an old record to the second reads as %s, want the end of its second", rec.FinishedAt)
	}
}

// A changed message gets a new Event: the events.k8s.io recorder folds
// Events of the same reason and action into one series, whatever their
// message.
func TestWarningsOfAnotherMessageDiffer(t *testing.T) {
	decide := func(expr string) Event {
		aw := appWrapper(t).obj()
		d := Decide(context.Background(), input(t, aw, job(jobUID, ""), jobRule("jobs", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.Success = expr })))
		if len(d.Events) != 1 || d.Events[0].Reason != wrapupv1alpha1.ReasonEvaluationError {
			t.Fatalf("events %+v, want one EvaluationError", d.Events)
		}
		return d.Events[0]
	}
	a, b := decide("object.status.noSuchField == 1"), decide("object.status.otherField == 1")
	if a.Action == b.Action || !strings.HasPrefix(a.Action, "Evaluate-") {
		t.Errorf("actions %q and %q: want different actions for different messages", a.Action, b.Action)
	}
	if again := decide("object.status.noSuchField == 1"); again.Action != a.Action {
		t.Errorf("the same message gave actions %q and %q", a.Action, again.Action)
	}
	// Any Warning, not only an evaluation's: the reason a kind cannot be
	// watched changes (forbidden, then not served).
	notWatched := func(why string) Event {
		aw := appWrapper(t).obj()
		aw.Spec.Components = append(aw.Spec.Components, component(t, "v1", "ConfigMap", "config", map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}))
		in := input(t, aw, Trigger{}, rule("annotated-triggers", -1000, nil, nil))
		in.Kinds[schema.GroupKind{Kind: "ConfigMap"}] = Kind{State: KindNotWatchable, Message: why}
		d := Decide(context.Background(), in)
		if len(d.Events) != 1 || d.Events[0].Reason != wrapupv1alpha1.ReasonTriggerKindNotWatched {
			t.Fatalf("events %+v, want one TriggerKindNotWatched", d.Events)
		}
		return d.Events[0]
	}
	if a, b := notWatched("configmaps is forbidden"), notWatched("the server could not find the requested resource"); a.Action == b.Action {
		t.Errorf("TriggerKindNotWatched of two messages has one action %q: the second is folded into the first one's series", a.Action)
	}
}

// Events are bounded as events.k8s.io requires (1 KiB notes), whatever a
// rule's message or a compile error says.
func TestEventsAreBounded(t *testing.T) {
	aw := appWrapper(t).obj()
	long := jobRule("jobs", 0, func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.Message = "[1,2,3,4,5,6,7,8,9,10].map(i, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx').join('-')"
	})
	d := Decide(context.Background(), input(t, aw, job(jobUID, "Complete"), long))
	if len(d.Events) == 0 {
		t.Fatal("no events")
	}
	for _, e := range d.Events {
		if len(e.Message) > MaxMessage || len(e.Action) > 128 {
			t.Errorf("event %s: note of %d bytes, action of %d", e.Reason, len(e.Message), len(e.Action))
		}
	}
	in := input(t, aw, job(jobUID, "Complete"))
	in.Rules = []Rule{{Rule: jobRule("broken", 0), Err: &longError{strings.Repeat("e", 10000)}}}
	for _, e := range Decide(context.Background(), in).Events {
		if len(e.Message) > MaxMessage {
			t.Errorf("event %s: note of %d bytes", e.Reason, len(e.Message))
		}
	}
}

type longError struct{ s string }

func (e *longError) Error() string { return e.s }

// Records that are not of the trigger decided on say nothing of it, and
// are never acted on; the AppWrapper's own deletion hold holds whatever
// the trigger said.
func TestForeignRecordsAndTheHold(t *testing.T) {
	rerun := job(jobUID2, "")
	tests := []struct {
		name string
		in   func(t *testing.T) Input
		want Verdict
	}{
		{
			name: "a Failed AppWrapper held for debugging, whose trigger succeeded, waits for its hold to start",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperFailed).annotate(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "1h").
					condition(awv1beta2.Unhealthy, "FailedComponent", now.Add(-time.Minute)).obj()
				return input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0))
			},
			want: VerdictDeleteAfterTTL,
		},
		{
			name: "a success recorded before the AppWrapper failed waits for the end of its hold",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperFailed).annotate(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "1h").
					condition(awv1beta2.DeletingResources, "DeletionPaused", now.Add(-time.Minute)).
					recorded(wrapupv1alpha1.OutcomeSucceeded, 10*time.Minute, jobUID).obj()
				return input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 300)))
			},
			want: VerdictDeleteAfterTTL,
		},
		{
			name: "a record copied onto an AppWrapper created again from its manifest, never run",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).phase(awv1beta2.AppWrapperSuspended).recorded(wrapupv1alpha1.OutcomeSucceeded, 2*time.Hour, "old-job-uid").obj()
				aw.Spec.Suspend, aw.UID, aw.CreationTimestamp = true, "new-aw-uid", metav1.NewTime(now.Add(-5*time.Second))
				return input(t, aw, Trigger{}, jobRule("jobs", 0))
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a record copied onto an AppWrapper created again, its own trigger running",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).recorded(wrapupv1alpha1.OutcomeSucceeded, 2*time.Hour, "old-job-uid").obj()
				aw.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
				return input(t, aw, job(jobUID2, ""), jobRule("jobs", 0))
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a record of an older wrapup (no component named) for another trigger than the live one",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).obj()
				(&Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "deployments", FinishedAt: now.Add(-time.Hour), TriggerUID: "deploy-uid"}).Apply(aw)
				return input(t, aw, job(jobUID, ""), jobRule("jobs", 0))
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a record of an older wrapup for the live trigger holds",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).obj()
				(&Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "jobs", FinishedAt: now.Add(-time.Hour), TriggerUID: jobUID}).Apply(aw)
				return input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0))
			},
			want: VerdictDelete,
		},
		{
			name: "a record naming no trigger on a Running AppWrapper whose trigger runs is not wrapup's",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).obj()
				(&Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "x", FinishedAt: now.Add(-time.Hour)}).Apply(aw)
				return input(t, aw, job(jobUID, ""), jobRule("jobs", 0))
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a generateName trigger's success holds through a re-admission that creates another, which deletes it at once",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).obj()
				aw.Spec.Components[1] = component(t, "batch/v1", "Job", "", nil) // generateName: gen-
				aw.Status.ComponentStatus = []awv1beta2.AppWrapperComponentStatus{{Name: "inference"}, {Name: "gen-xyz"}}
				(&Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "jobs", FinishedAt: now.Add(-time.Minute), TriggerUID: jobUID, TriggerRef: "batch/Job/gen-*"}).Apply(aw)
				rerun.Object.SetName("gen-xyz")
				rerun.Ref = Ref{Index: 1, Kind: jobRef.Kind, Version: "v1", Name: "gen-xyz", Template: "gen-*"}
				return input(t, aw, rerun, jobRule("jobs", 0, onSuccess(wrapupv1alpha1.ActionDeleteAll, 300)))
			},
			want: VerdictDelete,
		},
		{
			name: "a failure seen while Kueue suspends the AppWrapper is not final",
			in: func(t *testing.T) Input {
				aw := appWrapper(t).obj()
				aw.Spec.Suspend = true
				in := input(t, aw, job(jobUID, "Failed"), jobRule("jobs", 0))
				in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-time.Hour)}
				return in
			},
			want: VerdictWaitingForRetries,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(context.Background(), tc.in(t))
			if d.Verdict != tc.want {
				t.Errorf("verdict %s, want %s: %s", d.Verdict, tc.want, d.Reason)
			}
		})
	}
}

// With a TTL of 0 the record and the deletion come in one reconcile: the
// decision on the AppWrapper as the record write answered it deletes, with
// the outcome written, and writes nothing more.
func TestRecordThenDeleteAtOnce(t *testing.T) {
	aw := appWrapper(t).obj()
	in := input(t, aw, job(jobUID, "Complete"), jobRule("jobs", 0))
	in.Now = now.Add(123456 * time.Nanosecond)
	first := Decide(context.Background(), in)
	if first.Verdict != VerdictDelete || first.Write == nil {
		t.Fatalf("%s after %s (write %v), want Delete with a record", first.Verdict, first.After, first.Write != nil)
	}
	first.Write.Apply(in.AppWrapper)
	if again := Decide(context.Background(), in); again.Verdict != VerdictDelete || again.Write != nil || again.Clear || again.Outcome != first.Outcome {
		t.Errorf("on the written AppWrapper: %s after %s", again.Verdict, again.After)
	}
}

// TestMultiKueueWorkerCopyIsNeverDeleted: MultiKueue's copy of an
// AppWrapper on a worker cluster carries the outcome and is never deleted,
// whatever the rule, the phase or the record say; deleting it makes the
// manager dispatch the finished run again.
func TestMultiKueueWorkerCopyIsNeverDeleted(t *testing.T) {
	worker := func(b *awBuilder) *awBuilder {
		b.aw.Labels["kueue.x-k8s.io/multikueue-origin"] = "manager"
		b.aw.Labels["kueue.x-k8s.io/prebuilt-workload-name"] = "appwrapper-run-1a2b3"
		return b
	}
	cases := []struct {
		name  string
		aw    *awv1beta2.AppWrapper
		trig  Trigger
		rule  *wrapupv1alpha1.CompletionRule
		write bool
	}{
		{"succeeded", worker(appWrapper(t)).obj(), job(jobUID, "Complete"), jobRule("jobs", 0), true},
		{"succeeded, recorded", worker(appWrapper(t).recorded(wrapupv1alpha1.OutcomeSucceeded, time.Hour, jobUID)).obj(), job(jobUID, "Complete"), jobRule("jobs", 0), false},
		{"failed for good", worker(appWrapper(t).phase(awv1beta2.AppWrapperFailed)).obj(), job(jobUID, "Failed"), jobRule("jobs", 0), true},
		{"failed, recorded, no TTL", worker(appWrapper(t).phase(awv1beta2.AppWrapperFailed).recorded(wrapupv1alpha1.OutcomeFailed, time.Hour, jobUID)).obj(),
			job(jobUID, "Failed"), jobRule("jobs", 0, onFailure(wrapupv1alpha1.ActionDeleteAll, 0)), false},
		{"AppWrapper Succeeded, trigger gone", worker(appWrapper(t).phase(awv1beta2.AppWrapperSucceeded)).obj(), Trigger{Ref: jobRef, State: TriggerAbsent}, jobRule("jobs", 0), true},
		{"dry run", worker(appWrapper(t)).obj(), job(jobUID, "Complete"), jobRule("jobs", 0, func(r *wrapupv1alpha1.CompletionRule) { r.Spec.DryRun = true }), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(context.Background(), input(t, c.aw, c.trig, c.rule))
			if d.Verdict != VerdictRecordOnly {
				t.Fatalf("verdict %s (%s), want %s", d.Verdict, d.Reason, VerdictRecordOnly)
			}
			if d.Action.Action != wrapupv1alpha1.ActionUpdateStatus || d.DryRun || !d.DueAt.IsZero() {
				t.Errorf("effective action %+v dryRun %v dueAt %v, want UpdateStatus only", d.Action, d.DryRun, d.DueAt)
			}
			if !strings.Contains(d.Reason, "manager cluster's wrapup finishes") {
				t.Errorf("reason %q does not say who finishes the AppWrapper", d.Reason)
			}
			if (d.Write != nil) != c.write {
				t.Fatalf("write %v, want %v", d.Write, c.write)
			}
			events := map[string]bool{}
			for _, e := range d.Events {
				events[e.Reason] = true
			}
			if events[wrapupv1alpha1.ReasonDeleted] || events[wrapupv1alpha1.ReasonWouldDelete] {
				t.Errorf("events %+v announce a deletion", d.Events)
			}
			if c.write && !events[wrapupv1alpha1.ReasonMultiKueueWorker] {
				t.Errorf("events %+v lack %s", d.Events, wrapupv1alpha1.ReasonMultiKueueWorker)
			}
		})
	}
	// The same AppWrapper without Kueue's label is deleted: the case above
	// is the label's doing.
	d := Decide(context.Background(), input(t, appWrapper(t).obj(), job(jobUID, "Complete"), jobRule("jobs", 0)))
	if d.Verdict != VerdictDelete || d.Write == nil {
		t.Fatalf("control: verdict %s (write %v), want %s with a write", d.Verdict, d.Write, VerdictDelete)
	}
}
