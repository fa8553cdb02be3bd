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
				aw, rule := appWrapper().Obj(), jobs().OnFailure(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
				return withRecord(input(t, aw, trigger(bench(jobUID).Failed(now)), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeFailed, now.Add(-10*time.Second)))
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeFailed, after: 290 * time.Second, requeue: 290 * time.Second,
		},
		{
			// 3. An evaluation error cleared the record.
			name: "an evaluation error leaves the record as it is",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Obj(), jobs().Success("object.status.noSuchField == 1").Obj()
				return withRecord(input(t, aw, trigger(bench(jobUID).Complete(now)), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute)))
			},
			want: VerdictWaitingForTrigger, reason: "stays", events: []string{wrapupv1alpha1.ReasonEvaluationError},
		},
		{
			name: "the same trigger running again clears the record",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Obj(), jobs().Obj()
				return withRecord(input(t, aw, trigger(bench(jobUID)), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute)))
			},
			want: VerdictClearOutcome, clear: true, events: []string{wrapupv1alpha1.ReasonOutcomeCleared},
		},
		{
			name: "a new attempt after a recorded failure clears it",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Obj(), jobs().Obj()
				return withRecord(input(t, aw, trigger(bench(jobUID2)), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeFailed, now.Add(-time.Minute)))
			},
			want: VerdictClearOutcome, clear: true, reason: "replaced the trigger whose failure was recorded", events: []string{wrapupv1alpha1.ReasonOutcomeCleared},
		},
		{
			name: "a recorded failure is held while the AppWrapper controller resets",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Phase(awv1beta2.AppWrapperResetting).Obj(), jobs().Obj()
				return withRecord(input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, rule), recorded(aw, rule, wrapupv1alpha1.OutcomeFailed, now.Add(-time.Minute)))
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
					Condition(awv1beta2.DeletingResources, metav1.ConditionTrue, "DeletionPaused", now.Add(-4*time.Minute)).Obj()
				rule := jobs().Obj()
				return withRecord(input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, rule), recorded(aw, rule, wrapupv1alpha1.OutcomeFailed, now.Add(-5*time.Minute)))
			},
			want: VerdictDeleteAfterTTL, outcome: wrapupv1alpha1.OutcomeFailed, after: 6 * time.Minute, requeue: 6 * time.Minute, reason: "hold",
		},
		{
			name: "a Failed AppWrapper whose hold has not started waits for it",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").Obj(), jobs().Obj()
				return withRecord(input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, rule), recorded(aw, rule, wrapupv1alpha1.OutcomeFailed, now.Add(-time.Hour)))
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
				aw, rule := appWrapper().Phase(awv1beta2.AppWrapperSuspended).Suspend(true).Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
				return withRecord(input(t, aw, Trigger{}, rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Minute)))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded,
		},
		{
			// A success recorded, then the run re-admitted: it ran
			// again for the rest of the TTL.
			name: "a success is not cleared by the trigger of a re-admission, and its deletion is due at once",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
				return withRecord(input(t, aw, trigger(bench(jobUID2)), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute)))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, reason: "started again",
		},
		{
			name: "a success recorded, then a reset by the AppWrapper controller (FoundFailedPods): deleted at once",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Phase(awv1beta2.AppWrapperResetting).Retries(1).Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).Obj()
				return withRecord(input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Second)))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, reason: "Resetting after its recorded success",
		},
		{
			name: "a success recorded, then Kueue suspends it: deleted at once",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Suspend(true).Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).Obj()
				return withRecord(input(t, aw, trigger(bench(jobUID).Complete(now)), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Second)))
			},
			want: VerdictDelete, outcome: wrapupv1alpha1.OutcomeSucceeded, reason: "Kueue suspends",
		},
		{
			name: "a success recorded and kept (UpdateStatus): a new attempt deletes nothing",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Phase(awv1beta2.AppWrapperResetting).Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).Obj()
				return withRecord(input(t, aw, Trigger{Ref: jobRef, State: TriggerAbsent}, rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Second)))
			},
			want: VerdictRecordOnly, outcome: wrapupv1alpha1.OutcomeSucceeded,
		},
		{
			name: "a success recorded, running its TTL: no new attempt, the TTL holds",
			in: func(t *testing.T) Input {
				aw, rule := appWrapper().Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
				return withRecord(input(t, aw, trigger(bench(jobUID).Complete(now)), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute)))
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
			// The AppWrapper's metadata is its tenant's to write: a record
			// there, of any shape, is no CompletionRecord.
			name: "a record on the AppWrapper's metadata only is not acted on",
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
			in := tc.in(t)
			d := Decide(context.Background(), in)
			if err := CheckVerdict(d); err != nil {
				t.Errorf("the verdict table: %v", err)
			}
			// The records here are stamped with the action of the rule
			// that wins: only a new outcome or a clear writes one.
			if (d.Store != nil) != (tc.write || tc.clear) || d.Stamp != nil && !tc.write {
				t.Errorf("store %+v, stamp %+v; want a CompletionRecord written only for a new outcome or a clear", d.Store, d.Stamp)
			}
			if tc.clear && d.Store != nil && (d.Store.Cleared == nil || d.Store.ResourceVersion != in.Record.ResourceVersion || d.Store.Outcome != in.Record.Outcome) {
				t.Errorf("a clear stores %+v: want the record kept, cleared, under its resourceVersion", d.Store)
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

// A record keeps the time to the microsecond, as the API server keeps a
// MicroTime: what wrapup decides on is what it reads back, so the TTL
// counted from it is the same before and after the write, and never ends
// early. The mirror on the AppWrapper shows the same time.
func TestRecordTimes(t *testing.T) {
	aw := appWrapper().Obj()
	at := now.Add(1234567891 * time.Nanosecond) // 12:00:01.234567891
	micro := now.Add(1234567 * time.Microsecond)
	rule := jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 5).Obj()
	in := input(t, aw, trigger(bench(jobUID).Complete(now)), rule)
	in.Now = at
	d := Decide(context.Background(), in)
	if d.Write == nil || !d.Write.FinishedAt.Equal(micro) {
		t.Fatalf("record %+v, want finished at %s", d.Write, micro)
	}
	if want := micro.Add(5 * time.Second); !d.DueAt.Equal(want) || d.Stamp == nil || !d.Stamp.DueAt.Equal(want) {
		t.Errorf("due at %s, stamp %+v; want %s", d.DueAt, d.Stamp, want)
	}
	_, ann := Mirror(d.Write)
	if got := ann[wrapupv1alpha1.FinishedAtAnnotation]; got != "2026-12-01T12:00:01.234567000Z" {
		t.Errorf("the mirror's finished-at %q", got)
	}
	back := RecordOf(stored(t, d.Store, "1"), aw)
	if back == nil || !back.FinishedAt.Equal(micro) || !back.Stamp.Same(*d.Stamp) {
		t.Fatalf("read back %+v, wrote %+v", back, d.Write)
	}
	in.Record = stored(t, d.Store, "1")
	in.Now = at.Add(time.Second)
	if again := Decide(context.Background(), in); again.Store != nil || !again.DueAt.Equal(d.DueAt) {
		t.Errorf("on the record as stored: store %+v, due %s; want nothing written, due %s", again.Store, again.DueAt, d.DueAt)
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

// Records that are not this run's CompletionRecord say nothing of it, and
// are never acted on: a record on the AppWrapper's metadata (an earlier
// version's, copied with a manifest, or a tenant's), or the record of
// another AppWrapper of the same name. The AppWrapper's own deletion hold
// holds whatever the trigger said.
func TestForeignRecordsAndTheHold(t *testing.T) {
	// earlier is the CompletionRecord of an earlier AppWrapper "run" (UID
	// awUID), which succeeded two hours ago.
	earlier := func() *wrapupv1alpha1.CompletionRecord {
		return recorded(appWrapper().Obj(), jobs().Obj(), wrapupv1alpha1.OutcomeSucceeded, now.Add(-2*time.Hour))
	}
	tests := []struct {
		name  string
		in    func(t *testing.T) Input
		want  Verdict
		write bool
	}{
		{
			name: "a Failed AppWrapper held for debugging, whose trigger succeeded, waits for its hold to start",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "1h").
					Condition(awv1beta2.Unhealthy, metav1.ConditionTrue, "FailedComponent", now.Add(-time.Minute)).Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Obj())
			},
			want: VerdictDeleteAfterTTL, write: true,
		},
		{
			name: "a success recorded before the AppWrapper failed waits for the end of its hold",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "1h").
					Condition(awv1beta2.DeletingResources, metav1.ConditionTrue, "DeletionPaused", now.Add(-time.Minute)).Obj()
				rule := jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
				return withRecord(input(t, aw, trigger(bench(jobUID).Complete(now)), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-10*time.Minute)))
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
			name: "the CompletionRecord of an earlier AppWrapper of the name, on one created again, never run",
			in: func(t *testing.T) Input {
				aw := appWrapper().Phase(awv1beta2.AppWrapperSuspended).Suspend(true).UID("new-aw-uid").Creation(now.Add(-5 * time.Second)).Obj()
				return withRecord(input(t, aw, Trigger{}, jobs().Obj()), earlier())
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name: "a record copied onto an AppWrapper created again, its own trigger running",
			in: func(t *testing.T) Input {
				aw := appWrapper().Creation(now.Add(-time.Minute)).UID("new-aw-uid").
					Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-2*time.Hour), "old-job-uid").RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
				own := util.MakeJob("bench").OwnedBy(aw).UID(jobUID2).Started(now.Add(-time.Minute))
				return withRecord(input(t, aw, trigger(own), jobs().Obj()), earlier())
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
			// An upgrade: the world bears the old record out, and the
			// outcome is recorded again now (its TTL counts from now).
			name: "a record of an older wrapup for the live trigger, which shows it: decided afresh, recorded now",
			in: func(t *testing.T) Input {
				aw := appWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Hour), jobUID).RecordedBy("jobs", "").Obj()
				return input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Obj())
			},
			want: VerdictDelete, write: true,
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
												ComponentStatus("inference", "gen-xyz").Obj()
				rule := jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
				rerun := util.MakeJob("gen-xyz").OwnedBy(aw).UID(jobUID2).Started(now.Add(-time.Hour)).Obj()
				ref := Ref{Index: 1, Kind: jobRef.Kind, Version: "v1", Name: "gen-xyz", Template: "gen-*"}
				return withRecord(input(t, aw, live(ref, rerun), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute)))
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
			if d.Verdict != tc.want || (d.Write != nil) != tc.write || (d.Store != nil) != tc.write {
				t.Errorf("verdict %s, write %+v, store %v; want %s, write %v: %s", d.Verdict, d.Write, d.Store != nil, tc.want, tc.write, d.Reason)
			}
			if d.Store != nil && d.Store.ResourceVersion != "" {
				t.Errorf("a new outcome of this AppWrapper is stored under resourceVersion %q: want a create", d.Store.ResourceVersion)
			}
		})
	}
}

// With a TTL of 0 the record and the deletion come in one reconcile: the
// decision on the record as the API server answered its create deletes,
// with the outcome recorded, and writes nothing more.
func TestRecordThenDeleteAtOnce(t *testing.T) {
	aw := appWrapper().Obj()
	in := input(t, aw, trigger(bench(jobUID).Complete(now)), jobs().Obj())
	in.Now = now.Add(123456 * time.Nanosecond)
	first := Decide(context.Background(), in)
	if first.Verdict != VerdictDelete || first.Write == nil || first.Store == nil || first.Store.ResourceVersion != "" {
		t.Fatalf("%s after %s (write %v, store %+v), want Delete with a record to create", first.Verdict, first.After, first.Write != nil, first.Store)
	}
	in.Record = stored(t, first.Store, "1")
	again := Decide(context.Background(), in)
	if again.Verdict != VerdictDelete || again.Write != nil || again.Clear || again.Stamp != nil || again.Store != nil || again.Outcome != first.Outcome {
		t.Errorf("on the record as stored: %s after %s, write %v, clear %v, stamp %+v, store %v", again.Verdict, again.After, again.Write != nil, again.Clear, again.Stamp, again.Store != nil)
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
		name string
		aw   *awv1beta2.AppWrapper
		trig Trigger
		rule *wrapupv1alpha1.CompletionRule
		// recorded is the outcome the run's record holds; "" for none.
		recorded wrapupv1alpha1.Outcome
		write    bool
	}{
		{"succeeded", worker().Obj(), trigger(bench(jobUID).Complete(now)), jobs().Obj(), "", true},
		{"succeeded, recorded", worker().Obj(), trigger(bench(jobUID).Complete(now)), jobs().Obj(), wrapupv1alpha1.OutcomeSucceeded, false},
		{"failed for good", worker().Phase(awv1beta2.AppWrapperFailed).Obj(), trigger(bench(jobUID).Failed(now)), jobs().Obj(), "", true},
		{"failed, recorded, no TTL", worker().Phase(awv1beta2.AppWrapperFailed).Obj(),
			trigger(bench(jobUID).Failed(now)), jobs().OnFailure(wrapupv1alpha1.ActionDeleteAll, 0).Obj(), wrapupv1alpha1.OutcomeFailed, false},
		{"AppWrapper Succeeded, trigger gone", worker().Phase(awv1beta2.AppWrapperSucceeded).Obj(), Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().Obj(), "", true},
		{"dry run", worker().Obj(), trigger(bench(jobUID).Complete(now)), jobs().DryRun().Obj(), "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := input(t, c.aw, c.trig, c.rule)
			if c.recorded != "" {
				// Recorded an hour ago on the worker, with what wrapup
				// does there in force: record only.
				in.Record = util.MakeRecord(c.aw, c.rule, c.recorded, now.Add(-time.Hour)).Trigger(jobRef.Index, jobUID).
					Stamp("jobs", "uid-jobs", wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionUpdateStatus}, false, nil).ResourceVersion("1").Obj()
			}
			d := Decide(context.Background(), in)
			if d.Verdict != VerdictRecordOnly {
				t.Fatalf("verdict %s (%s), want %s", d.Verdict, d.Reason, VerdictRecordOnly)
			}
			if d.Action.Action != wrapupv1alpha1.ActionUpdateStatus || d.DryRun || !d.DueAt.IsZero() {
				t.Errorf("effective action %+v dryRun %v dueAt %v, want UpdateStatus only", d.Action, d.DryRun, d.DueAt)
			}
			if !strings.Contains(d.Reason, "manager cluster's wrapup finishes") {
				t.Errorf("reason %q does not say who finishes the AppWrapper", d.Reason)
			}
			if (d.Write != nil) != c.write || (d.Store != nil) != c.write {
				t.Fatalf("write %v, store %+v; want a write %v", d.Write, d.Store, c.write)
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
