package decision

import (
	"context"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// A rule's status says since when it deletes after each outcome.
func TestDeletingSince(t *testing.T) {
	created := now.Add(-time.Hour)
	at := func(tm time.Time) *metav1.Time { return &metav1.Time{Time: tm} }
	fresh := func(mods ...func(*wrapupv1alpha1.CompletionRule)) *wrapupv1alpha1.CompletionRule {
		r := jobRule("jobs", 0, mods...)
		r.Generation, r.CreationTimestamp = 1, metav1.NewTime(created)
		return r
	}
	later := now.Add(1500 * time.Millisecond)
	cases := []struct {
		name     string
		rule     *wrapupv1alpha1.CompletionRule
		now      time.Time
		succ, fa *metav1.Time
	}{
		{"a rule never edited deletes since its creation", fresh(), now, at(created), at(created)},
		{"UpdateStatus deletes nothing", fresh(onSuccess(wrapupv1alpha1.ActionUpdateStatus, 0)), now, nil, at(created)},
		{"dry run deletes nothing", fresh(func(r *wrapupv1alpha1.CompletionRule) { r.Spec.DryRun = true }), now, nil, nil},
		{"an edited rule first seen deleting: from now, rounded up to the second", func() *wrapupv1alpha1.CompletionRule {
			r := fresh()
			r.Generation = 3
			return r
		}(), later, at(now.Add(2 * time.Second)), at(now.Add(2 * time.Second))},
		{"what the status says is kept while the rule deletes", func() *wrapupv1alpha1.CompletionRule {
			r := fresh(onSuccess(wrapupv1alpha1.ActionUpdateStatus, 0))
			r.Generation = 4
			r.Status.DeletingSince = &wrapupv1alpha1.DeletingSince{ObservedGeneration: 3, Succeeded: at(now.Add(-time.Minute)), Failed: at(now.Add(-time.Minute))}
			return r
		}(), now, nil, at(now.Add(-time.Minute))},
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
		return appWrapper(t).recorded(wrapupv1alpha1.OutcomeFailed, 14*24*time.Hour, jobUID).obj()
	}
	deletingFrom := func(r *wrapupv1alpha1.CompletionRule, gen int64, at time.Time) *wrapupv1alpha1.CompletionRule {
		r.Generation = 2
		r.Status.DeletingSince = &wrapupv1alpha1.DeletingSince{ObservedGeneration: gen, Failed: &metav1.Time{Time: at}}
		return r
	}
	cases := []struct {
		name  string
		rule  *wrapupv1alpha1.CompletionRule
		want  Verdict
		after time.Duration
	}{
		{"onFailure UpdateStatus -> DeleteAll, TTL 300", deletingFrom(jobRule("jobs", 0, onFailure(wrapupv1alpha1.ActionDeleteAll, 300)), 2, since),
			VerdictDeleteAfterTTL, 4 * time.Minute},
		{"dryRun true -> false, TTL 300", deletingFrom(jobRule("jobs", 0, onFailure(wrapupv1alpha1.ActionDeleteAll, 300)), 2, since),
			VerdictDeleteAfterTTL, 4 * time.Minute},
		{"the status not written for this generation yet: counted from now", deletingFrom(jobRule("jobs", 0, onFailure(wrapupv1alpha1.ActionDeleteAll, 300)), 1, now.Add(-time.Hour)),
			VerdictDeleteAfterTTL, 5 * time.Minute},
		{"a TTL of 0 deletes once the rule deletes", deletingFrom(jobRule("jobs", 0, onFailure(wrapupv1alpha1.ActionDeleteAll, 0)), 2, since),
			VerdictDelete, 0},
		{"a rule deleting since before the run: the TTL from the run", deletingFrom(jobRule("jobs", 0, onFailure(wrapupv1alpha1.ActionDeleteAll, 300)), 2, now.Add(-30*24*time.Hour)),
			VerdictDelete, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := input(t, recordedLongAgo(), job(jobUID, "Failed"), c.rule)
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
