package decision

import (
	"context"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TestHistoryOfAManagerAppWrapperIsJudgedOnItsOwnStatus: an AppWrapper
// MultiKueue dispatched carries a record this process did not count (a
// restart), its Workload finished and its copy gone. Whether the record is
// borne out, for its CompletionRecord, is judged on the AppWrapper as
// gathered (its own mirrored status), not on the copy's status the
// decision reads for the rest.
func TestHistoryOfAManagerAppWrapperIsJudgedOnItsOwnStatus(t *testing.T) {
	rule := jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0).OnFailure(wrapupv1alpha1.ActionDeleteAll, 0)
	for _, tc := range []struct {
		name    string
		phase   awv1beta2.AppWrapperPhase // the manager's own (mirrored) status
		outcome wrapupv1alpha1.Outcome    // recorded, not counted
		reason  string                    // the Workload's Finished reason
		refused bool
	}{
		{"mirror late, Workload failed", awv1beta2.AppWrapperRunning, wrapupv1alpha1.OutcomeFailed, kueue.WorkloadFinishedReasonFailed, true},
		{"mirror late, Workload succeeded", awv1beta2.AppWrapperRunning, wrapupv1alpha1.OutcomeSucceeded, kueue.WorkloadFinishedReasonSucceeded, true},
		{"mirror Succeeded, Workload failed", awv1beta2.AppWrapperSucceeded, wrapupv1alpha1.OutcomeSucceeded, kueue.WorkloadFinishedReasonFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aw := managed().Phase(tc.phase).Recorded(tc.outcome, now.Add(-10*time.Second), jobUID).RecordedBy("jobs", jobRef.String()).Obj()
			in := input(t, aw, Trigger{}, rule.Obj())
			in.Triggers = nil
			w := dispatched(nil)
			w.Finished, w.FinishedReason = true, tc.reason
			in.Worker = w
			d := Decide(context.Background(), in)
			if d.Verdict != VerdictDelete || d.Write != nil || d.History == nil {
				t.Fatalf("verdict %s, write %v, history %+v: %s", d.Verdict, d.Write, d.History, d.Reason)
			}
			if refused := d.History.Refused == RefusedNotBorneOut; refused != tc.refused {
				t.Errorf("refused %v, want %v", refused, tc.refused)
			}
		})
	}
}
