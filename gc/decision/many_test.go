package decision

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// AppWrappers with several triggers: run wrapping the harness Jobs h0, h1,
// h2... as its components 1, 2, 3...

var podGK = schema.GroupKind{Kind: "Pod"}

// harnessAW is run wrapping n harness Jobs.
func harnessAW(n int) *util.AppWrapperWrapper {
	objs := make([]runtime.Object, n)
	for i := range n {
		objs[i] = util.MakeObject("batch/v1", "Job", fmt.Sprintf("h%d", i)).Obj()
	}
	return runWith(objs...)
}

func harnessRef(i int) Ref {
	name := fmt.Sprintf("h%d", i)
	return Ref{Index: i + 1, Kind: jobRef.Kind, Version: "v1", Name: name, Template: name}
}

func hUID(i int, attempt int) types.UID { return types.UID(fmt.Sprintf("h%d-uid-%d", i, attempt)) }

// hjob is harness Job i of the given attempt, as its controller created
// it, running.
func hjob(i, attempt int) *util.JobWrapper {
	return util.MakeJob(fmt.Sprintf("h%d", i)).OwnedBy(appWrapper().Obj()).UID(hUID(i, attempt)).Started(now.Add(-time.Hour))
}

// candidate is the harness Job j as the trigger's cache holds it, for its
// component (h<i> is component i+1).
func candidate(j *util.JobWrapper) Trigger {
	i, err := strconv.Atoi(strings.TrimPrefix(j.Name, "h"))
	if err != nil {
		panic(err)
	}
	return live(harnessRef(i), j.Obj())
}

// unreadable is tr with a status the harness rule's expression cannot
// read.
func unreadable(tr Trigger) Trigger {
	tr.Object.Object["status"] = map[string]any{"bad": "many"}
	return tr
}

// recordedMany is the harness rule's stored record of outcome o, seen ago
// before now, decided by the candidates deciders, as the controller
// writes it.
func recordedMany(o wrapupv1alpha1.Outcome, ago time.Duration, deciders ...RecordedTrigger) *wrapupv1alpha1.CompletionRecord {
	policy := policyOf(o, deciders)
	w := util.MakeRecord(harnessAW(0).Obj(), harnessRule(policy), o, now.Add(-ago)).Message("done")
	for _, c := range deciders {
		w.Trigger(c.Index, c.UID)
	}
	return w.ResourceVersion("1").Obj()
}

// policyOf is the policy that records deciders for o, in these tables:
// All records every candidate for a success and one for a failure.
func policyOf(o wrapupv1alpha1.Outcome, deciders []RecordedTrigger) wrapupv1alpha1.TriggerPolicy {
	if (o == wrapupv1alpha1.OutcomeSucceeded) == (len(deciders) > 1) {
		return wrapupv1alpha1.TriggerPolicyAll
	}
	return wrapupv1alpha1.TriggerPolicyAny
}

func decider(i, attempt int) RecordedTrigger {
	return RecordedTrigger{Index: i + 1, UID: hUID(i, attempt)}
}

// harnessRule's success is the Job's built-in one, and fails at run time
// on a Job whose status has "bad".
func harnessRule(policy wrapupv1alpha1.TriggerPolicy) *wrapupv1alpha1.CompletionRule {
	return util.MakeRule("harness").UID("uid-harness").TriggerKind("batch", "Job", "").Policy(policy).
		Success("has(object.status.bad) ? object.status.bad > 1 : object.status.?conditions.orValue([]).exists(c, c.type == 'Complete' && c.status == 'True')").Obj()
}

// TestDecideMany holds the policy decisions over several candidates.
func TestDecideMany(t *testing.T) {
	all, anyOf := wrapupv1alpha1.TriggerPolicyAll, wrapupv1alpha1.TriggerPolicyAny
	long := DefaultFailureGracePeriod + time.Second
	cases := []struct {
		name string
		aw   *awv1beta2.AppWrapper
		// record is the run's stored CompletionRecord; nil for none.
		record   *wrapupv1alpha1.CompletionRecord
		triggers []Trigger
		policy   wrapupv1alpha1.TriggerPolicy
		// failureSeen is the controller's memory of a failure.
		failureSeen FailureSeen
		verdict     Verdict
		// write is the outcome written ("" for none); deciders the
		// component indexes of the candidates it records.
		write    wrapupv1alpha1.Outcome
		deciders []int
		clear    bool
		// warning is the reason of a Warning Event expected; reason a
		// part of the decision's reason.
		warning, reason string
	}{
		{name: "All: every candidate running waits", aw: harnessAW(3).Obj(), policy: all,
			triggers: []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0)), candidate(hjob(2, 0))},
			verdict:  VerdictWaitingForTrigger, reason: "3 of 3 triggers have not finished"},
		{name: "All: two of three succeeded waits for the third, and says which", aw: harnessAW(3).Obj(), policy: all,
			triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0))},
			verdict:  VerdictWaitingForTrigger, reason: "1 of 3 triggers have not finished (Job h2)"},
		{name: "All: every candidate succeeded deletes, recording all three", aw: harnessAW(3).Obj(), policy: all,
			triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0).Complete(now))},
			verdict:  VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded, deciders: []int{1, 2, 3}},
		{name: "All: a candidate not read yet stops a success", aw: harnessAW(3).Obj(), policy: all,
			triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now)), {Ref: harnessRef(2), State: TriggerPending}},
			verdict:  VerdictWaitingForTrigger, reason: "1 of 3 triggers were not read"},
		{name: "All: one failure just seen waits for the AppWrapper controller's retry", aw: harnessAW(3).Obj(), policy: all,
			triggers: []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0))},
			verdict:  VerdictWaitingForRetries, reason: "Job h1 failed"},
		{name: "All: one failure, final, fails the AppWrapper while the others run", aw: harnessAW(3).Obj(), policy: all,
			triggers:    []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0))},
			failureSeen: FailureSeen{TriggerUID: hUID(1, 0), At: now.Add(-long)},
			verdict:     VerdictDelete, write: wrapupv1alpha1.OutcomeFailed, deciders: []int{2}},
		{name: "All: a failure while the AppWrapper controller resets is not final", aw: harnessAW(3).Phase(awv1beta2.AppWrapperResetting).Obj(), policy: all,
			triggers:    []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0))},
			failureSeen: FailureSeen{TriggerUID: hUID(1, 0), At: now.Add(-long)},
			verdict:     VerdictWaitingForRetries},
		{name: "All: the retry of the failed candidate (new UIDs) clears the failure",
			aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeFailed, time.Minute, decider(1, 0)),
			policy: all, triggers: []Trigger{candidate(hjob(0, 1)), candidate(hjob(1, 1)), candidate(hjob(2, 1))},
			verdict: VerdictClearOutcome, clear: true},
		{name: "All: a recorded failure is not cleared by the other candidates still running",
			aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeFailed, time.Minute, decider(1, 0)),
			policy: all, triggers: []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0))},
			verdict: VerdictDelete},
		{name: "All: a recorded failure is final after a restart (no memory): no second record",
			aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeFailed, 10*time.Second, decider(1, 0)),
			policy: all, triggers: []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0))},
			verdict: VerdictDelete},
		{name: "All: a recorded success is not cleared by a candidate re-created after it (a re-admission): deleted at once",
			aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(0, 0), decider(1, 0), decider(2, 0)),
			policy: all, triggers: []Trigger{candidate(hjob(0, 1)), candidate(hjob(1, 1)), candidate(hjob(2, 1))},
			verdict: VerdictDelete, reason: "the run started again"},
		{name: "Any: a recorded success, then the AppWrapper controller resets it: deleted at once",
			aw: harnessAW(3).Phase(awv1beta2.AppWrapperResetting).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Second, decider(1, 0)),
			policy: anyOf, triggers: []Trigger{{Ref: harnessRef(0), State: TriggerAbsent}, {Ref: harnessRef(1), State: TriggerAbsent}, {Ref: harnessRef(2), State: TriggerAbsent}},
			verdict: VerdictDelete, reason: "Resetting after its recorded success"},
		{name: "All: a recorded success is cleared when a candidate that decided runs again",
			aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(0, 0), decider(1, 0), decider(2, 0)),
			policy: all, triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0)), candidate(hjob(2, 0).Complete(now))},
			verdict: VerdictClearOutcome, clear: true},
		{name: "All: an evaluation error on one candidate is not finished, with a Warning", aw: harnessAW(3).Obj(), policy: all,
			triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), unreadable(candidate(hjob(1, 0))), candidate(hjob(2, 0).Complete(now))},
			verdict:  VerdictWaitingForTrigger, warning: wrapupv1alpha1.ReasonEvaluationError, reason: "evaluation(s) failed"},
		{name: "All: an evaluation error on a candidate that decided keeps the record and deletes nothing",
			aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(0, 0), decider(1, 0), decider(2, 0)),
			policy: all, triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), unreadable(candidate(hjob(1, 0))), candidate(hjob(2, 0).Complete(now))},
			verdict: VerdictWaitingForTrigger, warning: wrapupv1alpha1.ReasonEvaluationError},
		{name: "All: the AppWrapper controller failing the AppWrapper fails it", aw: harnessAW(3).Phase(awv1beta2.AppWrapperFailed).Obj(), policy: all,
			triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0)), candidate(hjob(2, 0))},
			verdict:  VerdictDelete, write: wrapupv1alpha1.OutcomeFailed, deciders: []int{1, 2, 3}},
		{name: "All: Succeeded phase with the finished candidates gone (their TTL) succeeded",
			aw:     harnessAW(2).Phase(awv1beta2.AppWrapperSucceeded).Obj(),
			policy: all, triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), {Ref: harnessRef(1), State: TriggerAbsent}},
			verdict: VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded, deciders: []int{1, 2}},

		{name: "Any: one success deletes, recording that one", aw: harnessAW(3).Obj(), policy: anyOf,
			triggers: []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0).Failed(now))},
			verdict:  VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded, deciders: []int{2}},
		{name: "Any: two of three failed waits for the third", aw: harnessAW(3).Obj(), policy: anyOf,
			triggers:    []Trigger{candidate(hjob(0, 0).Failed(now)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0))},
			failureSeen: FailureSeen{TriggerUID: hUID(0, 0), At: now.Add(-time.Hour)},
			verdict:     VerdictWaitingForTrigger},
		{name: "Any: every candidate failed, final, fails it, recording all three", aw: harnessAW(3).Obj(), policy: anyOf,
			triggers:    []Trigger{candidate(hjob(0, 0).Failed(now)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0).Failed(now))},
			failureSeen: FailureSeen{TriggerUID: types.UID(strings.Join([]string{string(hUID(0, 0)), string(hUID(1, 0)), string(hUID(2, 0))}, ",")), At: now.Add(-long)},
			verdict:     VerdictDelete, write: wrapupv1alpha1.OutcomeFailed, deciders: []int{1, 2, 3}},
		{name: "Any: every candidate failed, but only one failure was seen long ago: not final yet", aw: harnessAW(3).Obj(), policy: anyOf,
			triggers:    []Trigger{candidate(hjob(0, 0).Failed(now)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0).Failed(now))},
			failureSeen: FailureSeen{TriggerUID: hUID(0, 0), At: now.Add(-long)},
			verdict:     VerdictWaitingForRetries},
		{name: "Any: a recorded success is cleared when the candidate that decided runs again",
			aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(1, 0)),
			policy: anyOf, triggers: []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0)), candidate(hjob(2, 0))},
			verdict: VerdictClearOutcome, clear: true},
		{name: "Any: a recorded success stands while the others run", aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(1, 0)),
			policy: anyOf, triggers: []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0))},
			verdict: VerdictDelete},

		{name: "All: of two failures, the one the controller remembers decides, from when it saw it", aw: harnessAW(3).Obj(), policy: all,
			triggers:    []Trigger{candidate(hjob(0, 0).Failed(now)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0))},
			failureSeen: FailureSeen{TriggerUID: hUID(1, 0), At: now.Add(-long)},
			verdict:     VerdictDelete, write: wrapupv1alpha1.OutcomeFailed, deciders: []int{2}},
		// The record is final for the triggers it names, whichever rule,
		// and whatever policy, wins now: an edit of the rule after the run
		// finished does not decide it again.
		{name: "a failure recorded under All stands when the rule's policy becomes Any (not every candidate failed)",
			aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeFailed, time.Minute, decider(1, 0)),
			policy: anyOf, triggers: []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0))},
			verdict: VerdictDelete},
		{name: "a success of every candidate, recorded when the rule took fewer, stands while a candidate it takes now runs",
			aw: harnessAW(3).Obj(), record: recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(0, 0), decider(1, 0)),
			policy: all, triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0))},
			verdict: VerdictDelete},
		{name: "Any: a Succeeded AppWrapper whose candidates finished or are gone succeeded, even with one the rule calls failed",
			aw:     harnessAW(2).Phase(awv1beta2.AppWrapperSucceeded).Obj(),
			policy: anyOf, triggers: []Trigger{candidate(hjob(0, 0).Failed(now)), {Ref: harnessRef(1), State: TriggerAbsent}},
			verdict: VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded, deciders: []int{1, 2}},
		// A candidate of another owner is not taken as a trigger: among
		// several it holds back the AppWrapper controller's Succeeded; a
		// single one does not (TestSucceededPhaseWithATriggerOfAnotherOwner).
		{name: "All: a Succeeded AppWrapper with a candidate of another owner waits",
			aw:     harnessAW(2).Phase(awv1beta2.AppWrapperSucceeded).Obj(),
			policy: all, triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), live(harnessRef(1), util.MakeJob("h1").UID("someone-elses").Obj())},
			verdict: VerdictWaitingForTrigger, warning: wrapupv1alpha1.ReasonTriggerNotOwned, reason: "1 of 2 triggers have not finished"},
		{name: "One: several candidates are ambiguous", aw: harnessAW(3).Obj(), policy: wrapupv1alpha1.TriggerPolicyOne,
			triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0).Complete(now))},
			verdict:  VerdictNoTrigger, warning: wrapupv1alpha1.ReasonAmbiguousTrigger, reason: "set trigger.policy to All or Any"},
		{name: "unset policy is One", aw: harnessAW(2).Obj(), policy: "",
			triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now))},
			verdict:  VerdictNoTrigger, warning: wrapupv1alpha1.ReasonAmbiguousTrigger},
		{name: "more candidates than the bound: nothing is decided, with a Warning", aw: harnessAW(wrapupv1alpha1.MaxTriggers + 1).Obj(), policy: all,
			verdict: VerdictNoTrigger, warning: wrapupv1alpha1.ReasonTooManyTriggers, reason: "more than the 64"},
		{name: "All with one candidate records as One does", aw: harnessAW(1).Obj(), policy: all,
			triggers: []Trigger{candidate(hjob(0, 0).Complete(now))},
			verdict:  VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded, deciders: []int{1}},
		{name: "a single trigger's record stands under a rule that now takes several candidates",
			aw: harnessAW(2).Obj(), record: util.MakeRecord(harnessAW(2).Obj(), harnessRule(wrapupv1alpha1.TriggerPolicyOne), wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute)).
				Trigger(1, hUID(0, 0)).ResourceVersion("1").Obj(),
			policy: all, triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0))},
			verdict: VerdictDelete},
		{name: "the metadata record of a single trigger (a tenant's, or an earlier version's) is nothing: the candidates decide",
			aw:     harnessAW(2).Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), hUID(0, 0)).RecordedBy("harness", harnessRef(0).String()).RecordedMessage("done").Obj(),
			policy: all, triggers: []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0))},
			verdict: VerdictWaitingForTrigger},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := withRecord(input(t, tc.aw, Trigger{}, harnessRule(tc.policy)), tc.record)
			in.Triggers = tc.triggers
			in.FailureSeen = tc.failureSeen
			d := Decide(context.Background(), in)
			if err := CheckVerdict(d); err != nil {
				t.Errorf("the verdict table: %v", err)
			}
			// The records here are stamped with the harness rule's action,
			// whatever its policy: only a new outcome or a clear writes.
			if (d.Store != nil) != (tc.write != "" || tc.clear) || d.Stamp != nil && tc.write == "" {
				t.Errorf("store %+v, stamp %+v; want a CompletionRecord written only for a new outcome or a clear", d.Store, d.Stamp)
			}
			if d.Verdict != tc.verdict {
				t.Fatalf("verdict = %s (%s), want %s", d.Verdict, d.Reason, tc.verdict)
			}
			if tc.reason != "" && !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason = %q, want it to say %q", d.Reason, tc.reason)
			}
			switch {
			case tc.write == "" && d.Write != nil:
				t.Errorf("writes %+v, want no write", d.Write)
			case tc.write != "" && (d.Write == nil || d.Write.Outcome != tc.write):
				t.Errorf("writes %+v, want the outcome %s", d.Write, tc.write)
			case tc.write != "":
				var got []int
				for _, tr := range d.Write.Triggers {
					got = append(got, tr.Index)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.deciders) {
					t.Errorf("records the candidates %v, want %v", got, tc.deciders)
				}
				for _, tr := range d.Write.Triggers {
					var live types.UID
					for _, c := range tc.triggers {
						if c.Ref.Index == tr.Index && c.Object != nil {
							live = c.Object.GetUID()
						}
					}
					if tr.UID != live {
						t.Errorf("records the candidate %d as of UID %q, want the live one's, %q", tr.Index, tr.UID, live)
					}
				}
			}
			if d.Clear != tc.clear {
				t.Errorf("clear = %v, want %v", d.Clear, tc.clear)
			}
			warned := ""
			for _, e := range d.Events {
				if e.Type == "Warning" {
					warned = e.Reason
				}
			}
			if warned != tc.warning {
				t.Errorf("warning = %q, want %q (events %+v)", warned, tc.warning, d.Events)
			}
			for _, e := range d.Events {
				if len(e.Message) > MaxMessage {
					t.Errorf("event %s is %d bytes long", e.Reason, len(e.Message))
				}
			}
		})
	}
}

// TestRecordOfSeveralTriggers: the record of several candidates, as
// stored, names every candidate that decided (by component index and UID),
// however many there are: a decision on it writes nothing more, one of
// them running again clears a success, and a new attempt after a failure
// that the last candidate decided clears the failure.
func TestRecordOfSeveralTriggers(t *testing.T) {
	all := harnessRule(wrapupv1alpha1.TriggerPolicyAll)
	for _, n := range []int{3, wrapupv1alpha1.MaxRecordedTriggers, wrapupv1alpha1.MaxRecordedTriggers + 1, wrapupv1alpha1.MaxTriggers} {
		t.Run(fmt.Sprintf("%d candidates", n), func(t *testing.T) {
			aw := harnessAW(n).Obj()
			attempt := func(a int, state func(i int, j *util.JobWrapper) *util.JobWrapper) []Trigger {
				ts := make([]Trigger, n)
				for i := range n {
					ts[i] = candidate(state(i, hjob(i, a)))
				}
				return ts
			}
			running := func(_ int, j *util.JobWrapper) *util.JobWrapper { return j }

			// Every candidate succeeded.
			in := input(t, aw, Trigger{}, all)
			in.Triggers = attempt(0, func(_ int, j *util.JobWrapper) *util.JobWrapper { return j.Complete(now) })
			d := Decide(context.Background(), in)
			if d.Write == nil || len(d.Write.Triggers) != n || d.Store == nil {
				t.Fatalf("%s, write %+v: want the success of the %d candidates recorded", d.Verdict, d.Write, n)
			}
			in.Record = stored(t, d.Store, "1")
			if back := RecordOf(in.Record, aw); back == nil || !reflect.DeepEqual(back.Triggers, d.Write.Triggers) {
				var got []RecordedTrigger
				if back != nil {
					got = back.Triggers
				}
				t.Errorf("the stored record names %d of the %d triggers that decided: %v", len(got), n, got)
			}
			if again := Decide(context.Background(), in); again.Store != nil || again.Verdict != VerdictDelete {
				t.Errorf("on the stored record: %s, store %v; want Delete and nothing written", again.Verdict, again.Store != nil)
			}
			// The last one runs again.
			in.Triggers[n-1] = candidate(hjob(n-1, 0))
			if again := Decide(context.Background(), in); !again.Clear {
				t.Errorf("the last candidate running again: %s (%s), want the success cleared", again.Verdict, again.Reason)
			}

			// The last candidate failed, for good, while the others ran.
			in = input(t, aw, Trigger{}, all)
			in.Triggers = attempt(0, func(i int, j *util.JobWrapper) *util.JobWrapper {
				if i == n-1 {
					return j.Failed(now)
				}
				return j
			})
			in.FailureSeen = FailureSeen{TriggerUID: hUID(n-1, 0), At: now.Add(-time.Hour)}
			d = Decide(context.Background(), in)
			if d.Write == nil || d.Write.Outcome != wrapupv1alpha1.OutcomeFailed || d.Store == nil {
				t.Fatalf("%s, write %+v: want the failure recorded", d.Verdict, d.Write)
			}
			// The AppWrapper controller retried: every candidate re-created,
			// running.
			in.Record = stored(t, d.Store, "1")
			in.FailureSeen = FailureSeen{}
			in.Triggers = attempt(1, running)
			in.Now = now.Add(time.Minute)
			if again := Decide(context.Background(), in); !again.Clear || again.Verdict == VerdictDelete {
				t.Errorf("a new attempt after the failure of candidate %d: %s (%s), want the failure cleared", n, again.Verdict, again.Reason)
			}
		})
	}
}

// TestSeveralKindsAnnotated: a kind-less rule over a Job and a Pod
// annotated together watches both kinds for the AppWrapper, and waits
// for both under All.
func TestSeveralKindsAnnotated(t *testing.T) {
	b := runWith().Trigger(util.MakeObject("batch/v1", "Job", "load").Obj()).Trigger(util.MakeObject("v1", "Pod", "checker").Obj())
	loadRef := Ref{Index: 1, Kind: jobRef.Kind, Version: "v1", Name: "load", Template: "load", Annotated: true}
	checkRef := Ref{Index: 2, Kind: podGK, Version: "v1", Name: "checker", Template: "checker", Annotated: true}
	load := live(loadRef, hjob(0, 0).Complete(now).Obj())
	pod := func(phase string) Trigger {
		return live(checkRef, util.MakeObject("v1", "Pod", "checker").OwnedBy(b.Obj()).UID("pod-uid").Status(map[string]any{"phase": phase}).Obj())
	}
	r := util.MakeRule("annotated-triggers").Priority(-1000).Policy(wrapupv1alpha1.TriggerPolicyAll).Obj()

	for _, tc := range []struct {
		phase   string
		verdict Verdict
	}{{"Running", VerdictWaitingForTrigger}, {"Succeeded", VerdictDelete}} {
		in := input(t, b.Obj(), Trigger{}, r)
		in.Kinds[podGK] = Kind{State: KindWatched}
		in.Triggers = []Trigger{load, pod(tc.phase)}
		d := Decide(context.Background(), in)
		if d.Verdict != tc.verdict {
			t.Errorf("pod %s: verdict = %s (%s), want %s", tc.phase, d.Verdict, d.Reason, tc.verdict)
		}
		if fmt.Sprint(d.Claims) != fmt.Sprint([]schema.GroupKind{jobRef.Kind, podGK}) {
			t.Errorf("claims = %v, want the Job's kind and the Pod's", d.Claims)
		}
		if len(d.Candidates) != 2 || d.Candidates[1].State != tc.phase {
			t.Errorf("candidates = %+v, want the Pod %s", d.Candidates, tc.phase)
		}
		if p := Plan(in); len(p.Refs) != 2 {
			t.Errorf("plan reads %v, want both triggers", p.Refs)
		}
	}

	// A kind wrapup cannot watch among them: nothing is decided.
	in := input(t, b.Obj(), Trigger{}, r)
	in.Kinds[podGK] = Kind{State: KindNotWatchable, Message: "pods is forbidden"}
	in.Triggers = []Trigger{load, pod("Succeeded")}
	if d := Decide(context.Background(), in); d.Verdict != VerdictTriggerNotWatchable || d.WillRecord() {
		t.Errorf("verdict = %s (%s), want TriggerNotWatchable and no record", d.Verdict, d.Reason)
	}
}

// TestSucceededPhaseWithATriggerOfAnotherOwner: with a single trigger, an
// object of its name that another owner controls is not taken as the
// trigger, and the AppWrapper controller's Succeeded decides the run.
func TestSucceededPhaseWithATriggerOfAnotherOwner(t *testing.T) {
	aw := appWrapper().Phase(awv1beta2.AppWrapperSucceeded).Obj()
	d := Decide(context.Background(), input(t, aw, trigger(util.MakeJob("bench").UID("someone-elses")), jobs().Obj()))
	if d.Verdict != VerdictDelete || d.Write == nil || d.Write.Outcome != wrapupv1alpha1.OutcomeSucceeded {
		t.Fatalf("verdict %s (%s), write %+v; want Delete, recording Succeeded from the AppWrapper's phase", d.Verdict, d.Reason, d.Write)
	}
}
