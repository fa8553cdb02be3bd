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
		aw := appWrapper(t).phase(awv1beta2.AppWrapperFailed).annotate(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").
			recorded(wrapupv1alpha1.OutcomeFailed, 11*time.Minute, jobUID).obj()
		aw.Status.Conditions = []metav1.Condition{{Type: string(awv1beta2.DeletingResources), Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}}
		return aw
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
			in := input(t, c.aw, Trigger{Ref: jobRef, State: TriggerAbsent}, jobRule("jobs", 0))
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
