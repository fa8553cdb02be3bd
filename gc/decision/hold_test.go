package decision

import (
	"context"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// The AppWrapper controller v1.2.2 restarts its failure hold's clock once
// it has torn the components down (DeletionInitiated, then DeletionPaused
// again with a new time): wrapup counts the hold from when it first saw it
// start, so the hold is waited once, not twice.
func TestFailureHoldIsCountedOnce(t *testing.T) {
	held := func(reason string, status metav1.ConditionStatus, at time.Time) *awv1beta2.AppWrapper {
		return appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").
			Condition(awv1beta2.DeletingResources, status, reason, at).Obj()
	}
	cases := []struct {
		name      string
		aw        *awv1beta2.AppWrapper
		remember  time.Time
		want      Verdict
		after     time.Duration
		holdStart time.Time
	}{
		{"the hold, first seen", held("DeletionPaused", metav1.ConditionFalse, now.Add(-4*time.Minute)), time.Time{},
			VerdictDeleteAfterTTL, 6 * time.Minute, now.Add(-4 * time.Minute)},
		{"the teardown at its end, the start remembered", held("DeletionInitiated", metav1.ConditionTrue, now.Add(-time.Second)), now.Add(-10*time.Minute - time.Second),
			VerdictDelete, 0, now.Add(-10*time.Minute - time.Second)},
		{"the hold set again after the teardown, the first start remembered", held("DeletionPaused", metav1.ConditionFalse, now.Add(-time.Second)), now.Add(-10*time.Minute - 2*time.Second),
			VerdictDelete, 0, now.Add(-10*time.Minute - 2*time.Second)},
		{"the hold set again, nothing remembered (a restart): waited from it, never less", held("DeletionPaused", metav1.ConditionFalse, now.Add(-time.Second)), time.Time{},
			VerdictDeleteAfterTTL, 10*time.Minute - time.Second, now.Add(-time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rule := jobs().Obj()
			in := withRecord(input(t, c.aw, Trigger{Ref: jobRef, State: TriggerAbsent}, rule), recorded(c.aw, rule, wrapupv1alpha1.OutcomeFailed, now.Add(-11*time.Minute)))
			in.HoldStart = c.remember
			d := Decide(context.Background(), in)
			if d.Verdict != c.want || d.After != c.after {
				t.Fatalf("%s after %s, want %s after %s: %s", d.Verdict, d.After, c.want, c.after, d.Reason)
			}
			if !d.HoldStart.Equal(c.holdStart) {
				t.Errorf("remembers the hold from %s, want %s", d.HoldStart, c.holdStart)
			}
		})
	}
}

// A record's time is this controller's clock, an AppWrapper's creation the
// API server's: with the controller's clock behind, a trigger that
// finished within that lag of the creation was recorded "before" the
// AppWrapper existed. The record names its AppWrapper's UID, which says
// whose it is, whatever the clocks.
func TestRecordOfThisAppWrapperDespiteClockSkew(t *testing.T) {
	// The controller's clock is 3 s behind the API server's.
	rule := jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
	aw := appWrapper().Creation(now.Add(-time.Second)).Obj()
	cr := recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-3*time.Second))
	d := Decide(context.Background(), withRecord(input(t, aw, trigger(bench(jobUID).Complete(now)), rule), cr))
	if d.Write != nil || d.Store != nil || d.Verdict != VerdictDeleteAfterTTL {
		t.Fatalf("%s, write %+v, store %v: want the record kept and acted on: %s", d.Verdict, d.Write, d.Store != nil, d.Reason)
	}

	// The same record read for an AppWrapper created again under the same
	// name (another UID), later than the record: not its record.
	again := appWrapper().Phase(awv1beta2.AppWrapperSuspended).Suspend(true).UID("aw-uid-2").Creation(now.Add(-time.Hour)).Obj()
	d = Decide(context.Background(), withRecord(input(t, again, Trigger{}, rule), cr))
	if d.Verdict != VerdictWaitingForTrigger || d.Recorded != nil || d.Store != nil {
		t.Fatalf("another AppWrapper's record: %s, recorded %+v, store %v; want %s on nothing recorded: %s", d.Verdict, d.Recorded, d.Store != nil, VerdictWaitingForTrigger, d.Reason)
	}
}
