package decision

import (
	"context"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// A rule's status says since when it deletes after each outcome.
func TestDeletingSince(t *testing.T) {
	created := now.Add(-time.Hour)
	at := func(tm time.Time) *metav1.Time { return &metav1.Time{Time: tm} }
	// fresh is the rule jobs as the API server created it, never edited.
	fresh := func() *util.RuleWrapper { return jobs().Generation(1).Creation(created) }
	later := now.Add(1500 * time.Millisecond)
	cases := []struct {
		name     string
		rule     *wrapupv1alpha1.CompletionRule
		now      time.Time
		succ, fa *metav1.Time
	}{
		{"a rule never edited deletes since its creation", fresh().Obj(), now, at(created), at(created)},
		{"UpdateStatus deletes nothing", fresh().OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).Obj(), now, nil, at(created)},
		{"dry run deletes nothing", fresh().DryRun().Obj(), now, nil, nil},
		{"an edited rule first seen deleting: from now, rounded up to the second", fresh().Generation(3).Obj(),
			later, at(now.Add(2 * time.Second)), at(now.Add(2 * time.Second))},
		{"what the status says is kept while the rule deletes", fresh().OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).Generation(4).
			DeletingSince(wrapupv1alpha1.DeletingSince{ObservedGeneration: 3, Succeeded: at(now.Add(-time.Minute)), Failed: at(now.Add(-time.Minute))}).Obj(),
			now, nil, at(now.Add(-time.Minute))},
		// Two edits the controller saw as one (its queue holds a key once):
		// the one between may have stopped the deletions (a dry run), and
		// its status cannot say it did not.
		{"an edit unseen since the status: from now", fresh().Generation(5).
			DeletingSince(wrapupv1alpha1.DeletingSince{ObservedGeneration: 3, Succeeded: at(now.Add(-time.Minute)), Failed: at(now.Add(-time.Minute))}).Obj(),
			later, at(now.Add(2 * time.Second)), at(now.Add(2 * time.Second))},
		{"the same generation seen again: kept", fresh().Generation(3).
			DeletingSince(wrapupv1alpha1.DeletingSince{ObservedGeneration: 3, Succeeded: at(now.Add(-time.Minute)), Failed: at(now.Add(-time.Minute))}).Obj(),
			later, at(now.Add(-time.Minute)), at(now.Add(-time.Minute))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DeletingSince(c.rule, c.now)
			if got.ObservedGeneration != c.rule.Generation {
				t.Errorf("generation %d, want %d", got.ObservedGeneration, c.rule.Generation)
			}
			same := func(a, b *metav1.Time) bool { return a == nil && b == nil || a != nil && b != nil && a.Equal(b) }
			if !same(got.Succeeded, c.succ) || !same(got.Failed, c.fa) {
				t.Errorf("succeeded %v, failed %v; want %v, %v", got.Succeeded, got.Failed, c.succ, c.fa)
			}
		})
	}
}

// Changing a rule's action is not retroactive: a run recorded long ago,
// under an action that kept it, is deleted the TTL after the rule started
// deleting, not at once.
func TestActionChangeIsNotRetroactive(t *testing.T) {
	since := now.Add(-time.Minute)
	recordedLongAgo := func() *awv1beta2.AppWrapper {
		return appWrapper().Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-14*24*time.Hour), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("done").Obj()
	}
	// deletingFrom is w, of generation 2, whose status says it deletes after
	// a failure since at, as observed at generation gen.
	deletingFrom := func(w *util.RuleWrapper, gen int64, at time.Time) *wrapupv1alpha1.CompletionRule {
		return w.Generation(2).DeletingSince(wrapupv1alpha1.DeletingSince{ObservedGeneration: gen, Failed: &metav1.Time{Time: at}}).Obj()
	}
	cases := []struct {
		name  string
		rule  *wrapupv1alpha1.CompletionRule
		want  Verdict
		after time.Duration
	}{
		{"onFailure UpdateStatus -> DeleteAll, TTL 300", deletingFrom(jobs().OnFailure(wrapupv1alpha1.ActionDeleteAll, 300), 2, since),
			VerdictDeleteAfterTTL, 4 * time.Minute},
		{"dryRun true -> false, TTL 300", deletingFrom(jobs().OnFailure(wrapupv1alpha1.ActionDeleteAll, 300), 2, since),
			VerdictDeleteAfterTTL, 4 * time.Minute},
		{"the status not written for this generation yet: counted from now", deletingFrom(jobs().OnFailure(wrapupv1alpha1.ActionDeleteAll, 300), 1, now.Add(-time.Hour)),
			VerdictDeleteAfterTTL, 5 * time.Minute},
		{"a TTL of 0 deletes once the rule deletes", deletingFrom(jobs().OnFailure(wrapupv1alpha1.ActionDeleteAll, 0), 2, since),
			VerdictDelete, 0},
		{"a rule deleting since before the run: the TTL from the run", deletingFrom(jobs().OnFailure(wrapupv1alpha1.ActionDeleteAll, 300), 2, now.Add(-30*24*time.Hour)),
			VerdictDelete, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := input(t, recordedLongAgo(), trigger(bench(jobUID).Failed(now)), c.rule)
			d := Decide(context.Background(), in)
			if d.Verdict != c.want || d.After != c.after {
				t.Fatalf("%s after %s, want %s after %s: %s", d.Verdict, d.After, c.want, c.after, d.Reason)
			}
			if c.want == VerdictDeleteAfterTTL && !d.DueAt.Equal(now.Add(c.after)) {
				t.Errorf("due at %s, want %s", d.DueAt, now.Add(c.after))
			}
		})
	}
}
