package decision

import (
	"maps"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// TestUtilRecordsAreApplys: the records tests write with test/util's
// Recorded are the records wrapup writes (Record.Apply), label for label
// and annotation for annotation, and read back as written.
func TestUtilRecordsAreApplys(t *testing.T) {
	at := now.Add(1234567 * time.Microsecond)
	for _, tc := range []struct {
		name string
		rec  Record
		w    *util.AppWrapperWrapper
	}{
		{"a record of one trigger",
			Record{AppWrapperUID: awUID, Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "jobs", FinishedAt: at, Message: "done", TriggerUID: jobUID, TriggerRef: jobRef.String()},
			util.MakeAppWrapper("run", "ns").Recorded(wrapupv1alpha1.OutcomeSucceeded, at, jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").RecordedOn(awUID)},
		{"a record of an older wrapup, naming no component nor AppWrapper",
			Record{Outcome: wrapupv1alpha1.OutcomeFailed, Rule: "jobs", FinishedAt: now, TriggerUID: jobUID},
			util.MakeAppWrapper("run", "ns").RecordedBy("jobs", "").Recorded(wrapupv1alpha1.OutcomeFailed, now, jobUID)},
		{"a record the AppWrapper's phase decided, with no trigger",
			Record{Outcome: wrapupv1alpha1.OutcomeFailed, FinishedAt: at},
			util.MakeAppWrapper("run", "ns").Recorded(wrapupv1alpha1.OutcomeFailed, at, "")},
		{"a record of several candidates",
			Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "harness", FinishedAt: at, Message: "done", TriggerUID: "h0", TriggerRef: "batch/Job/h0",
				Triggers: []RecordedTrigger{{Index: 1, UID: "h0"}, {Index: 3, UID: ""}}, Policy: wrapupv1alpha1.TriggerPolicyAll},
			util.MakeAppWrapper("run", "ns").Recorded(wrapupv1alpha1.OutcomeSucceeded, at, "h0").RecordedBy("harness", "batch/Job/h0").RecordedMessage("done").
				RecordedCandidates(wrapupv1alpha1.TriggerPolicyAll, util.RecordedCandidate{Index: 1, UID: "h0"}, util.RecordedCandidate{Index: 3, UID: types.UID("")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := util.MakeAppWrapper("run", "ns").Obj()
			tc.rec.Apply(want)
			got := tc.w.Obj()
			if !maps.Equal(got.Labels, want.Labels) || !maps.Equal(got.Annotations, want.Annotations) {
				t.Errorf("test/util writes labels %v, annotations %v; Apply writes %v, %v", got.Labels, got.Annotations, want.Labels, want.Annotations)
			}
			if back := ReadRecord(got); !back.Same(&tc.rec) || back.Message != tc.rec.Message {
				t.Errorf("read back %+v, want %+v", back, tc.rec)
			}
		})
	}
}
