package decision

import (
	"context"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// TestDecide holds a case for each way the decision went wrong before it
// was one function; each failed on the code of the time.
func TestDecide(t *testing.T) {
	broken := func(t *testing.T, name string, prio int32) Rule {
		r := util.MakeRule(name).UID(types.UID("uid-"+name)).TriggerKind("batch", "Job", "").Priority(prio).Obj()
		r.Spec.OnFailure = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionUpdateStatus}
		return Rule{Rule: r, Err: errBroken}
	}
	annotatedTriggers := func() *wrapupv1alpha1.CompletionRule {
		return util.MakeRule("annotated-triggers").UID("uid-annotated").Priority(-1000).Obj()
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
				aw := runWith().Trigger(util.MakeObject("batch/v1", "Job", "bench").Obj()).Obj()
				in := input(t, aw, trigger(bench(jobUID).Failed(now)), annotatedTriggers())
				in.Rules = append(in.Rules, broken(t, "keep-failed", 100))
				return in
			},
			want: VerdictBlocked, reason: "keep-failed (priority 100) selects the AppWrapper and is not usable", events: []string{wrapupv1alpha1.ReasonBlockedByRule},
		},
		{
			name: "an unusable rule of a kind the AppWrapper lacks does not apply, and blocks nothing",
			in: func(t *testing.T) Input {
				in := input(t, appWrapper().Obj(), trigger(bench(jobUID).Complete(now)), jobs().Obj())
				r := util.MakeRule("evals").UID("uid-evals").Priority(10).TriggerKind("example.com", "EvalRun", "").Success("true").Obj()
				in.Rules = append(in.Rules, compiled(t, r))
				in.Kinds[schema.GroupKind{Group: "example.com", Kind: "EvalRun"}] = Kind{State: KindNotServed}
				return in
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, write: true,
		},
		{
			name: "a matching rule whose kind is not served blocks the rules below it",
			in: func(t *testing.T) Input {
				aw := appWrapper().Component(util.MakeObject("example.com/v1", "EvalRun", "eval").Obj(), nil).Obj()
				in := input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Obj())
				r := util.MakeRule("evals").UID("uid-evals").Priority(10).TriggerKind("example.com", "EvalRun", "").Success("true").Obj()
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
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-10*time.Second), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, trigger(bench(jobUID).Failed(now)), jobs().OnFailure(wrapupv1alpha1.ActionDeleteAll, 300).Obj())
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeFailed, after: 290 * time.Second, requeue: 290 * time.Second,
		},
		{
			// 3. An evaluation error cleared the record.
			name: "an evaluation error leaves the record as it is",
			in: func(t *testing.T) Input {
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Success("object.status.noSuchField == 1").Obj())
			},
			want: VerdictWaitingForTrigger, reason: "stays", events: []string{wrapupv1alpha1.ReasonEvaluationError},
		},
		{
			name: "the same trigger running again clears the record",
			in: func(t *testing.T) Input {
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, trigger(bench(jobUID)), jobs().Obj())
			},
			want: VerdictClearOutcome, clear: true, events: []string{wrapupv1alpha1.ReasonOutcomeCleared},
		},
		{
			name: "a new attempt after a recorded failure clears it",
			in: func(t *testing.T) Input {
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-time.Minute), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, trigger(bench(jobUID2)), jobs().Obj())
			},
			want: VerdictClearOutcome, clear: true, reason: "replaced the one whose failure was recorded", events: []string{wrapupv1alpha1.ReasonOutcomeCleared},
		},
		{
			name: "a recorded failure is held while the AppWrapper controller resets",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperResetting).Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-time.Minute), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().Obj())
			},
			want: VerdictWaitingForRetries, reason: "keeps the record",
		},
		{
			// 7. The AppWrapper controller marked it Failed after its
			// trigger succeeded; wrapup recorded Failed.
			name: "a Failed AppWrapper whose trigger succeeded succeeded",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperFailed).Condition(awv1beta2.Unhealthy, metav1.ConditionTrue, "FailedComponent", now).Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Obj())
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, write: true,
		},
		{
			name: "a Failed AppWrapper whose trigger is gone failed",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperFailed).Obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().Obj())
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeFailed, write: true,
		},
		{
			name: "a Failed AppWrapper held for debugging is not deleted before its hold ends",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").
					Condition(awv1beta2.DeletingResources, metav1.ConditionTrue, "DeletionPaused", now.Add(-4*time.Minute)).
					Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-5*time.Minute), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().Obj())
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeFailed, after: 6 * time.Minute, requeue: 6 * time.Minute, reason: "hold",
		},
		{
			name: "a Failed AppWrapper whose hold has not started waits for it",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").
					Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-time.Hour), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().Obj())
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeFailed, after: 10 * time.Minute, requeue: holdStartRetry, reason: "has not started that hold yet",
		},
		{
			// 8. The AppWrapper controller resets at up to failure + 60 s +
			// 60 s + its latency: wrapup's grace was exactly that.
			name: "a failure the AppWrapper controller reports Unhealthy, with retries left, waits for it",
			in: func(t *testing.T) Input {
				aw := appWrapper().Condition(awv1beta2.Unhealthy, metav1.ConditionTrue, "FoundFailedPods", now.Add(-time.Minute)).Retries(1).Obj()
				in := input(t, aw, trigger(bench(jobUID).Failed(now)), jobs().Obj())
				in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-DefaultFailureGracePeriod)}
				return in
			},
			want: VerdictWaitingForRetries, after: UnhealthyBackstop, requeue: UnhealthyBackstop, reason: "Unhealthy with 1 of 3 retries used",
		},
		{
			name: "a failure seen 2m ago is not final yet: the grace has slack",
			in: func(t *testing.T) Input {
				in := input(t, appWrapper().Obj(), trigger(bench(jobUID).Failed(now)), jobs().Obj())
				in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-2 * time.Minute)}
				return in
			},
			want: VerdictWaitingForRetries, after: Slack, requeue: Slack,
		},
		{
			name: "a failure past the grace, not reported Unhealthy, is final",
			in: func(t *testing.T) Input {
				in := input(t, appWrapper().Obj(), trigger(bench(jobUID).Failed(now)), jobs().Obj())
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
				aw := appWrapper().Phase(awv1beta2.AppWrapperSuspended).Suspend(true).
					Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Minute), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, Trigger{}, jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj())
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded,
		},
		{
			// A success recorded, then the run re-admitted: it ran
			// again for the rest of the TTL.
			name: "a success is not cleared by the trigger of a re-admission, and its deletion is due at once",
			in: func(t *testing.T) Input {
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, trigger(bench(jobUID2)), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj())
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, reason: "started again",
		},
		{
			name: "a success recorded, then a reset by the AppWrapper controller (FoundFailedPods): deleted at once",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperResetting).Retries(1).Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Second), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).Obj())
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, reason: "Resetting after its recorded success",
		},
		{
			name: "a success recorded, then Kueue suspends it: deleted at once",
			in: func(t *testing.T) Input {
				aw := appWrapper().Suspend(true).Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Second), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).Obj())
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, reason: "Kueue suspends",
		},
		{
			name: "a success recorded and kept (UpdateStatus): a new attempt deletes nothing",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperResetting).Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Second), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).Obj())
			},
			want: VerdictRecordOnly, outcome: wrapupv1alpha1.OutcomeSucceeded,
		},
		{
			name: "a success recorded, running its TTL: no new attempt, the TTL holds",
			in: func(t *testing.T) Input {
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj())
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeSucceeded, after: 4 * time.Minute, requeue: 4 * time.Minute,
		},
		{
			// 11. The opt-out accepted only "true".
			name: "the opt-out is as lenient as the opt-in",
			in: func(t *testing.T) Input {
				aw := appWrapper().Annotation(wrapupv1alpha1.IgnoreAnnotation, "True").Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Obj())
			},
			want: VerdictIgnored,
		},
		{
			// 12a. Every AppWrapper with no annotated component got a
			// Warning NoTrigger on every reconcile.
			name: "a rule with no kind does not apply to an AppWrapper with no annotated component, quietly",
			in: func(t *testing.T) Input {
				return input(t, appWrapper().Obj(), trigger(bench(jobUID).Complete(now)), annotatedTriggers())
			},
			want: VerdictNoRule,
		},
		{
			// DESIGN 1a: one rule per kind; a rule applies only where it
			// has a candidate.
			name: "a rule that names a kind the AppWrapper lacks does not apply, quietly",
			in: func(t *testing.T) Input {
				r := util.MakeRule("pods").UID("uid-pods").TriggerKind("", "Pod", "").Obj()
				return input(t, appWrapper().Obj(), Trigger{}, r)
			},
			want: VerdictNoRule,
		},
		{
			name: "an annotated component of a kind wrapup cannot watch waits, with a long backoff",
			in: func(t *testing.T) Input {
				aw := appWrapper().Trigger(util.MakeObject("v1", "ConfigMap", "config").Obj()).Obj()
				in := input(t, aw, Trigger{}, annotatedTriggers())
				in.Kinds[schema.GroupKind{Kind: "ConfigMap"}] = Kind{State: KindNotWatchable, Message: "configmaps is forbidden"}
				return in
			},
			want: VerdictTriggerNotWatchable, requeue: NotWatchableRetry, reason: "configmaps is forbidden", events: []string{wrapupv1alpha1.ReasonTriggerKindNotWatched},
		},
		{
			name: "a record of another component is not acted on",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperSuspended).
					Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Hour), "pod-uid").RecordedBy("pods", "/Pod/other").Obj()
				return input(t, aw, Trigger{}, jobs().Obj())
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a trigger whose cache has not listed waits, and looks again",
			in: func(t *testing.T) Input {
				return input(t, appWrapper().Obj(), Trigger{Ref: jobRef, State: TriggerPending}, jobs().Obj())
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
	aw := appWrapper().Obj()
	at := now.Add(1234567 * time.Microsecond) // 12:00:01.234567
	in := input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 5).Obj())
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
		aw := appWrapper().Obj()
		d := Decide(context.Background(), input(t, aw, trigger(bench(jobUID)), jobs().Success(expr).Obj()))
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
		aw := appWrapper().Trigger(util.MakeObject("v1", "ConfigMap", "config").Obj()).Obj()
		in := input(t, aw, Trigger{}, util.MakeRule("annotated-triggers").Priority(-1000).Obj())
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
	aw := appWrapper().Obj()
	long := jobs().Message("[1,2,3,4,5,6,7,8,9,10].map(i, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx').join('-')").Obj()
	d := Decide(context.Background(), input(t, aw, trigger(bench(jobUID).Complete(now)), long))
	if len(d.Events) == 0 {
		t.Fatal("no events")
	}
	for _, e := range d.Events {
		if len(e.Message) > MaxMessage || len(e.Action) > 128 {
			t.Errorf("event %s: note of %d bytes, action of %d", e.Reason, len(e.Message), len(e.Action))
		}
	}
	in := input(t, aw, trigger(bench(jobUID).Complete(now)))
	in.Rules = []Rule{{Rule: util.MakeRule("broken").UID("uid-broken").TriggerKind("batch", "Job", "").Obj(), Err: &longError{strings.Repeat("e", 10000)}}}
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
	tests := []struct {
		name string
		in   func(t *testing.T) Input
		want Verdict
	}{
		{
			name: "a Failed AppWrapper held for debugging, whose trigger succeeded, waits for its hold to start",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "1h").
					Condition(awv1beta2.Unhealthy, metav1.ConditionTrue, "FailedComponent", now.Add(-time.Minute)).Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Obj())
			},
			want: VerdictDeleteAfterTTL,
		},
		{
			name: "a success recorded before the AppWrapper failed waits for the end of its hold",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "1h").
					Condition(awv1beta2.DeletingResources, metav1.ConditionTrue, "DeletionPaused", now.Add(-time.Minute)).
					Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Minute), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj())
			},
			want: VerdictDeleteAfterTTL,
		},
		{
			name: "a record copied onto an AppWrapper created again from its manifest, never run",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperSuspended).Suspend(true).UID("new-aw-uid").Creation(now.Add(-5*time.Second)).
					Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-2*time.Hour), "old-job-uid").RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, Trigger{}, jobs().Obj())
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a record copied onto an AppWrapper created again, its own trigger running",
			in: func(t *testing.T) Input {
				aw := appWrapper().Creation(now.Add(-time.Minute)).
					Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-2*time.Hour), "old-job-uid").RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				return input(t, aw, trigger(bench(jobUID2)), jobs().Obj())
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a record of an older wrapup (no component named) for another trigger than the live one",
			in: func(t *testing.T) Input {
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Hour), "deploy-uid").RecordedBy("deployments", "").Obj()
				return input(t, aw, trigger(bench(jobUID)), jobs().Obj())
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a record of an older wrapup for the live trigger holds",
			in: func(t *testing.T) Input {
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Hour), jobUID).RecordedBy("jobs", "").Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Obj())
			},
			want: VerdictDelete,
		},
		{
			name: "a record naming no trigger on a Running AppWrapper whose trigger runs is not wrapup's",
			in: func(t *testing.T) Input {
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Hour), "").RecordedBy("x", "").Obj()
				return input(t, aw, trigger(bench(jobUID)), jobs().Obj())
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a generateName trigger's success holds through a re-admission that creates another, which deletes it at once",
			in: func(t *testing.T) Input {
				aw := runWith(util.MakeObject("batch/v1", "Job", "").Obj()). // generateName: gen-
												ComponentStatus("inference", "gen-xyz").
												Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), jobUID).RecordedBy("jobs", "batch/Job/gen-*").Obj()
				rerun := util.MakeJob("gen-xyz").OwnedBy(aw).UID(jobUID2).Started(now.Add(-time.Hour)).Obj()
				ref := Ref{Index: 1, Kind: jobRef.Kind, Version: "v1", Name: "gen-xyz", Template: "gen-*"}
				return input(t, aw, live(ref, rerun), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj())
			},
			want: VerdictDelete,
		},
		{
			name: "a failure seen while Kueue suspends the AppWrapper is not final",
			in: func(t *testing.T) Input {
				aw := appWrapper().Suspend(true).Obj()
				in := input(t, aw, trigger(bench(jobUID).Failed(now)), jobs().Obj())
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
	aw := appWrapper().Obj()
	in := input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Obj())
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
	worker := func() *util.AppWrapperWrapper {
		return appWrapper().Label("kueue.x-k8s.io/multikueue-origin", "manager").Label("kueue.x-k8s.io/prebuilt-workload-name", "appwrapper-run-1a2b3")
	}
	cases := []struct {
		name  string
		aw    *awv1beta2.AppWrapper
		trig  Trigger
		rule  *wrapupv1alpha1.CompletionRule
		write bool
	}{
		{"succeeded", worker().Obj(), trigger(bench(jobUID).Complete(now)), jobs().Obj(), true},
		{"succeeded, recorded", worker().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Hour), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj(), trigger(bench(jobUID).Complete(now)), jobs().Obj(), false},
		{"failed for good", worker().Phase(awv1beta2.AppWrapperFailed).Obj(), trigger(bench(jobUID).Failed(now)), jobs().Obj(), true},
		{"failed, recorded, no TTL", worker().Phase(awv1beta2.AppWrapperFailed).Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-time.Hour), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj(),
			trigger(bench(jobUID).Failed(now)), jobs().OnFailure(wrapupv1alpha1.ActionDeleteAll, 0).Obj(), false},
		{"AppWrapper Succeeded, trigger gone", worker().Phase(awv1beta2.AppWrapperSucceeded).Obj(), Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().Obj(), true},
		{"dry run", worker().Obj(), trigger(bench(jobUID).Complete(now)), jobs().DryRun().Obj(), true},
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
	d := Decide(context.Background(), input(t, appWrapper().Obj(), trigger(bench(jobUID).Complete(now)), jobs().Obj()))
	if d.Verdict != VerdictDelete || d.Write == nil {
		t.Fatalf("control: verdict %s (write %v), want %s with a write", d.Verdict, d.Write, VerdictDelete)
	}
}
