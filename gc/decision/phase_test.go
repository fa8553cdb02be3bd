package decision

import (
	"context"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TestSucceededAppWrapperKeepsItsTTL: the AppWrapper controller marked
// the AppWrapper Succeeded after the recorded success, and a Job of the
// trigger's name under another UID is read (a user's, or one the cache
// lags on). A Succeeded AppWrapper makes no new attempt: the TTL holds,
// and the run is not taken as started again (deleted at once).
func TestSucceededAppWrapperKeepsItsTTL(t *testing.T) {
	aw, rule := appWrapper().Phase(awv1beta2.AppWrapperSucceeded).Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).Obj()
	in := input(t, aw, trigger(bench(jobUID2).Complete(now.Add(-30*time.Second))), rule)
	d := Decide(context.Background(), withRecord(in, recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute))))
	if d.Verdict != VerdictDeleteAfterTTL || !d.DueAt.Equal(now.Add(-time.Minute).Add(time.Hour)) || d.Store != nil {
		t.Errorf("verdict %s, due %s (%s); want DeleteAfterTTL, due an hour after the recorded finish", d.Verdict, d.DueAt, d.Reason)
	}
}
