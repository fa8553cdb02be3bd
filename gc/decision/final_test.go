package decision

import (
	"context"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// The record is final for the triggers it names, by component index and
// UID, whichever rule wins now and whichever components it takes.

// TestRecordStandsWhenTheRuleTakesAnotherComponent: rule jobs recorded
// the success (or failure) of the Job bench (component 1) ten minutes ago,
// due in 50 minutes; then an admin edits it to take the Job other
// (component 2). Whatever other does, the record stands: nothing is
// cleared, recorded again or deleted sooner than the stamp says. A record
// acted on only under a rule that takes the same component would have the
// run decided afresh: the deletion cancelled while other runs, a new
// record and TTL once it ends.
func TestRecordStandsWhenTheRuleTakesAnotherComponent(t *testing.T) {
	aw := runWith(util.MakeObject("batch/v1", "Job", "bench").Obj(), util.MakeObject("batch/v1", "Job", "other").Obj()).Obj()
	otherRef := Ref{Index: 2, Kind: jobRef.Kind, Version: "v1", Name: "other", Template: "other"}
	other := func() *util.JobWrapper {
		return util.MakeJob("other").OwnedBy(aw).UID("other-uid").Started(now.Add(-time.Hour))
	}
	before := jobs().TriggerKind("batch", "Job", "bench").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).OnFailure(wrapupv1alpha1.ActionDeleteAll, 3600).Obj()
	after := jobs().TriggerKind("batch", "Job", "other").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).OnFailure(wrapupv1alpha1.ActionDeleteAll, 3600).Obj()
	finished := now.Add(-10 * time.Minute)
	for _, o := range []wrapupv1alpha1.Outcome{wrapupv1alpha1.OutcomeSucceeded, wrapupv1alpha1.OutcomeFailed} {
		for _, tc := range []struct {
			name string
			trig Trigger
		}{
			{"other running", live(otherRef, other().Obj())},
			{"other complete", live(otherRef, other().Complete(now).Obj())},
			{"other failed", live(otherRef, other().Failed(now).Obj())},
			{"other re-created, running", live(otherRef, other().UID("other-uid-2").Obj())},
			{"other absent", Trigger{Ref: otherRef, State: TriggerAbsent}},
		} {
			t.Run(string(o)+"/"+tc.name, func(t *testing.T) {
				in := withRecord(input(t, aw, tc.trig, after), recorded(aw, before, o, finished))
				in.FailureSeen = FailureSeen{TriggerUID: "other-uid", At: now.Add(-time.Hour)}
				d := Decide(context.Background(), in)
				if d.Verdict != VerdictDeleteAfterTTL || !d.DueAt.Equal(finished.Add(time.Hour)) || d.Outcome != o {
					t.Fatalf("%s due %s, outcome %q; want %s due %s, outcome %s: %s", d.Verdict, d.DueAt, d.Outcome, VerdictDeleteAfterTTL, finished.Add(time.Hour), o, d.Reason)
				}
				if d.Clear || d.Write != nil || d.Stamp != nil || d.Store != nil {
					t.Errorf("clear %v, write %+v, stamp %+v, store %v: want the record to stand as it is", d.Clear, d.Write, d.Stamp, d.Store != nil)
				}
			})
		}
	}
}

// TestComponentIndexIsTheIdentity: an AppWrapper wraps two Jobs of one
// generateName (gen-), named gen-a and gen-b by the AppWrapper controller.
// The record names component 1 (gen-a, UID a); the live Job of component
// 2, of another UID, is no new attempt of the recorded trigger, and no
// sign the run started again. Named by kind and template name
// ("batch/Job/gen-*"), the same for both, the trigger annotation moved to
// component 2 would make its Job a new trigger: the finished run deleted
// at once, or its failure cleared.
func TestComponentIndexIsTheIdentity(t *testing.T) {
	const uidA, uidB, uidA2 = types.UID("a-uid"), types.UID("b-uid"), types.UID("a-uid-2")
	gen := func() *util.ObjectWrapper { return util.MakeObject("batch/v1", "Job", "") } // generateName: gen-
	// run wraps gen-a and gen-b, annotated as the trigger at index
	// annotated (0: neither).
	run := func(annotated int) *awv1beta2.AppWrapper {
		w := runWith().ComponentStatus("inference", "gen-a", "gen-b")
		for i := 1; i <= 2; i++ {
			var ann map[string]string
			if i == annotated {
				ann = map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
			}
			w.Component(gen().Obj(), ann)
		}
		return w.Obj()
	}
	job := func(aw *awv1beta2.AppWrapper, name string, uid types.UID) *util.JobWrapper {
		return util.MakeJob(name).OwnedBy(aw).UID(uid).Started(now.Add(-time.Hour))
	}
	annotated := util.MakeRule("annotated-triggers").UID("uid-annotated").Priority(-1000).
		OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).OnFailure(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
	policy := func(p wrapupv1alpha1.TriggerPolicy) *wrapupv1alpha1.CompletionRule {
		return jobs().Policy(p).OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).OnFailure(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
	}
	finished := now.Add(-time.Minute)
	for _, tc := range []struct {
		name string
		aw   *awv1beta2.AppWrapper
		rule *wrapupv1alpha1.CompletionRule
		// recorded is the record's outcome, of component 1 (uid a).
		recorded wrapupv1alpha1.Outcome
		// live builds the live Jobs: gen-a and gen-b's.
		live  func(aw *awv1beta2.AppWrapper) (a, b *util.JobWrapper)
		want  Verdict
		clear bool
	}{
		{"the annotation moved to component 2, a success recorded of 1: the TTL holds", run(2), annotated, wrapupv1alpha1.OutcomeSucceeded,
			func(aw *awv1beta2.AppWrapper) (a, b *util.JobWrapper) {
				return job(aw, "gen-a", uidA).Complete(now), job(aw, "gen-b", uidB)
			},
			VerdictDeleteAfterTTL, false},
		{"the annotation moved to component 2, a failure recorded of 1: not cleared", run(2), annotated, wrapupv1alpha1.OutcomeFailed,
			func(aw *awv1beta2.AppWrapper) (a, b *util.JobWrapper) {
				return job(aw, "gen-a", uidA).Failed(now), job(aw, "gen-b", uidB)
			},
			VerdictDeleteAfterTTL, false},
		{"Any: a success recorded of 1, 2 running: the TTL holds", run(0), policy(wrapupv1alpha1.TriggerPolicyAny), wrapupv1alpha1.OutcomeSucceeded,
			func(aw *awv1beta2.AppWrapper) (a, b *util.JobWrapper) {
				return job(aw, "gen-a", uidA).Complete(now), job(aw, "gen-b", uidB)
			},
			VerdictDeleteAfterTTL, false},
		{"All: a failure recorded of 1, 2 running: not cleared", run(0), policy(wrapupv1alpha1.TriggerPolicyAll), wrapupv1alpha1.OutcomeFailed,
			func(aw *awv1beta2.AppWrapper) (a, b *util.JobWrapper) {
				return job(aw, "gen-a", uidA).Failed(now), job(aw, "gen-b", uidB)
			},
			VerdictDeleteAfterTTL, false},
		// Controls: a new UID at the recorded index is a new attempt.
		{"All: a failure recorded of 1, 1 re-created: cleared", run(0), policy(wrapupv1alpha1.TriggerPolicyAll), wrapupv1alpha1.OutcomeFailed,
			func(aw *awv1beta2.AppWrapper) (a, b *util.JobWrapper) {
				return job(aw, "gen-a", uidA2), job(aw, "gen-b", uidB)
			},
			VerdictClearOutcome, true},
		{"the trigger annotated at 1, a success recorded of it, 1 re-created: the run started again", run(1), annotated, wrapupv1alpha1.OutcomeSucceeded,
			func(aw *awv1beta2.AppWrapper) (a, b *util.JobWrapper) {
				return job(aw, "gen-a", uidA2), job(aw, "gen-b", uidB)
			},
			VerdictDelete, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs, nt := FindTriggers(tc.aw, tc.rule)
			if nt != nil {
				t.Fatalf("no trigger: %s", nt.Message)
			}
			a, b := tc.live(tc.aw)
			in := input(t, tc.aw, Trigger{}, tc.rule)
			in.Triggers = nil
			for _, ref := range refs {
				switch ref.Name {
				case "gen-a":
					in.Triggers = append(in.Triggers, live(ref, a.Obj()))
				case "gen-b":
					in.Triggers = append(in.Triggers, live(ref, b.Obj()))
				}
			}
			in.FailureSeen = FailureSeen{TriggerUID: uidA, At: now.Add(-time.Hour)}
			cr := util.MakeRecord(tc.aw, tc.rule, tc.recorded, finished).Trigger(1, uidA).ResourceVersion("1")
			if p := Policy(tc.rule); p != wrapupv1alpha1.TriggerPolicyOne {
				cr.Policy(p)
			}
			d := Decide(context.Background(), withRecord(in, cr.Obj()))
			if d.Verdict != tc.want || d.Clear != tc.clear || d.Write != nil {
				t.Fatalf("%s, clear %v, write %+v; want %s, clear %v: %s", d.Verdict, d.Clear, d.Write, tc.want, tc.clear, d.Reason)
			}
			if tc.want == VerdictDeleteAfterTTL && !d.DueAt.Equal(finished.Add(300*time.Second)) {
				t.Errorf("due %s, want the recorded %s", d.DueAt, finished.Add(300*time.Second))
			}
		})
	}
}

// TestHoldStartSurvivesEarlyReturns: the controller remembers when it
// first saw a Failed AppWrapper's deletion hold start (Input.HoldStart),
// since the AppWrapper controller restarts the hold's clock after its
// teardown. A decision that returns before it acts (an evaluation error,
// a rule being edited, a worker unreachable...) keeps it, so that the
// next one does not wait the hold again from its restarted clock.
func TestHoldStartSurvivesEarlyReturns(t *testing.T) {
	seen := now.Add(-9 * time.Minute)
	failed := func() *util.AppWrapperWrapper {
		return appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").
			Condition(awv1beta2.DeletingResources, metav1.ConditionFalse, "DeletionPaused", now.Add(-time.Second))
	}
	withFailure := func(in Input) Input {
		return withRecord(in, recorded(in.AppWrapper, in.Rules[0].Rule, wrapupv1alpha1.OutcomeFailed, now.Add(-10*time.Minute)))
	}
	broken := jobs().Success("object.status.noSuchField == 1").Obj()
	for _, tc := range []struct {
		name string
		in   func(t *testing.T) Input
		want Verdict
	}{
		{"an evaluation error", func(t *testing.T) Input {
			return input(t, failed().Obj(), trigger(bench(jobUID)), broken)
		}, VerdictWaitingForTrigger},
		{"an evaluation error of the recorded trigger", func(t *testing.T) Input {
			return withFailure(input(t, failed().Obj(), trigger(bench(jobUID)), broken))
		}, VerdictWaitingForTrigger},
		{"the rule being edited (not compiled yet)", func(t *testing.T) Input {
			in := withFailure(input(t, failed().Obj(), Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().Obj()))
			in.Rules[0].Policy = nil
			return in
		}, VerdictBlocked},
		{"a rule above that does not compile", func(t *testing.T) Input {
			in := withFailure(input(t, failed().Obj(), Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().Obj()))
			in.Rules = append(in.Rules, Rule{Rule: util.MakeRule("typo").UID("uid-typo").TriggerKind("batch", "Job", "").Priority(5).Obj(), Err: errBroken})
			return in
		}, VerdictBlocked},
		{"the trigger's cache not listed yet", func(t *testing.T) Input {
			return input(t, failed().Obj(), Trigger{Ref: jobRef, State: TriggerPending}, jobs().Obj())
		}, VerdictWaitingForTrigger},
		{"no single trigger", func(t *testing.T) Input {
			aw := failed().Component(util.MakeObject("batch/v1", "Job", "second").Obj(), nil).Obj()
			return input(t, aw, trigger(bench(jobUID)), jobs().Obj())
		}, VerdictNoTrigger},
		{"the annotated trigger's kind not watchable", func(t *testing.T) Input {
			aw := failed().Trigger(util.MakeObject("v1", "ConfigMap", "config").Obj()).Obj()
			in := input(t, aw, Trigger{}, util.MakeRule("annotated-triggers").UID("uid-annotated").Priority(-1000).Obj())
			in.Kinds[schema.GroupKind{Kind: "ConfigMap"}] = Kind{State: KindNotWatchable, Message: "configmaps is forbidden"}
			return in
		}, VerdictTriggerNotWatchable},
		{"its worker cluster unreachable", func(t *testing.T) Input {
			in := withFailure(input(t, failed().ManagedBy("kueue.x-k8s.io/multikueue").Obj(), Trigger{}, jobs().Obj()))
			in.Triggers = nil
			in.Worker = &Worker{Cluster: "worker-1", Workload: workload, Problem: "connection refused"}
			return in
		}, VerdictWorkerUnreachable},
		// The control: a decision that acts counts the hold from the start
		// remembered, not from the condition's newer time.
		{"the recorded failure acted on", func(t *testing.T) Input {
			return withFailure(input(t, failed().Obj(), Trigger{Ref: jobRef, State: TriggerAbsent}, jobs().Obj()))
		}, VerdictDeleteAfterTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in(t)
			in.HoldStart = seen
			d := Decide(context.Background(), in)
			if d.Verdict != tc.want {
				t.Fatalf("%s, want %s: %s", d.Verdict, tc.want, d.Reason)
			}
			if !d.HoldStart.Equal(seen) {
				t.Errorf("remembers the hold from %s, want %s", d.HoldStart, seen)
			}
		})
	}
	// A hold is a Failed AppWrapper's: one that runs again forgets it.
	in := input(t, appWrapper().Obj(), trigger(bench(jobUID)), jobs().Obj())
	in.HoldStart = seen
	if d := Decide(context.Background(), in); !d.HoldStart.IsZero() {
		t.Errorf("a Running AppWrapper remembers a hold from %s", d.HoldStart)
	}
}
