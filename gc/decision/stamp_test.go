package decision

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// No change makes a deletion sooner: the stamp of a recorded run keeps its
// due time until the action in force changes; a change that makes the
// deletion later takes effect at once, and any other counts the new TTL
// from when wrapup sees it.

const day = 24 * time.Hour

// deleting is the stamp of rule uid-jobs's DeleteAll after ttl, due at due.
// Its TTL counts from due less ttl.
func deleting(ttl time.Duration, due time.Time) Stamp {
	s := Stamp{Rule: "jobs", RuleUID: "uid-jobs", Action: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To(int32(ttl / time.Second))}, DueAt: due}
	if !due.IsZero() {
		s.Since = due.Add(-ttl)
	}
	return s
}

// TestStampFor holds StampFor's rule on its own: the due time of the action
// cur for the run rec, at now.
func TestStampFor(t *testing.T) {
	finished := now.Add(-10 * day)
	keep := Stamp{Rule: "jobs", RuleUID: "uid-jobs", Action: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionUpdateStatus}}
	dry := deleting(time.Hour, time.Time{})
	dry.DryRun = true
	other := deleting(time.Hour, time.Time{})
	other.Rule, other.RuleUID = "urgent", "uid-urgent"
	for _, tc := range []struct {
		name     string
		old, cur Stamp
		finished time.Time
		now      time.Time
		want     time.Time // zero: no deletion
	}{
		{"a new record: the TTL after the finish", Stamp{}, deleting(time.Hour, time.Time{}), finished, now, finished.Add(time.Hour)},
		{"a new record of a run that finished an instant ago: rounded up to the microsecond", Stamp{}, deleting(time.Hour, time.Time{}), now.Add(1500), now.Add(2 * time.Microsecond), now.Add(time.Hour + 2*time.Microsecond)},
		{"the same action: the stamped due, whatever the finish", deleting(time.Hour, now.Add(5*time.Hour)), deleting(time.Hour, time.Time{}), finished, now, now.Add(5 * time.Hour)},
		{"the same action, its due passed: still due then", deleting(time.Hour, finished.Add(time.Hour)), deleting(time.Hour, time.Time{}), finished, now, finished.Add(time.Hour)},
		{"the TTL shortened: from now", deleting(30*day, finished.Add(30*day)), deleting(time.Hour, time.Time{}), finished, now, now.Add(time.Hour)},
		{"the TTL lengthened: the natural due at once", deleting(11*day, finished.Add(11*day)), deleting(20*day, time.Time{}), finished, now, finished.Add(20 * day)},
		{"a TTL lengthened to a natural due before a stamped later one: from now", deleting(time.Hour, now.Add(time.Hour)), deleting(2*time.Hour, time.Time{}), finished, now, now.Add(2 * time.Hour)},
		{"UpdateStatus to DeleteAll: from now", keep, deleting(time.Hour, time.Time{}), finished, now, now.Add(time.Hour)},
		{"dryRun turned off: from now", dry, deleting(time.Hour, time.Time{}), finished, now, now.Add(time.Hour)},
		{"another rule of a shorter TTL: from now", deleting(30*day, finished.Add(30*day)), other, finished, now, now.Add(time.Hour)},
		{"another rule of a later natural due: at once", deleting(time.Hour, finished.Add(time.Hour)), deleting(11*day, time.Time{}), finished, now, finished.Add(11 * day)},
		{"a stamp that deletes with no due (never written so): from now", deleting(time.Hour, time.Time{}), other, finished, now, now.Add(time.Hour)},
		{"seen before the finish (the clocks apart): from the finish", keep, deleting(time.Hour, time.Time{}), now.Add(time.Minute), now, now.Add(time.Minute + time.Hour)},
		{"UpdateStatus deletes nothing", deleting(time.Hour, finished.Add(time.Hour)), keep, finished, now, time.Time{}},
		{"dryRun deletes nothing", deleting(time.Hour, finished.Add(time.Hour)), dry, finished, now, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &Record{FinishedAt: tc.finished, Stamp: tc.old}
			cur := tc.cur
			cur.Since, cur.DueAt = now.Add(-101*day), now.Add(-100*day) // ignored
			got := StampFor(cur, rec, tc.now)
			if !got.DueAt.Equal(tc.want) {
				t.Errorf("due %s, want %s", got.DueAt, tc.want)
			}
			want := tc.cur
			want.DueAt = tc.want
			if !tc.want.IsZero() {
				want.Since = tc.want.Add(-want.ttl())
			}
			if !got.Same(want) {
				t.Errorf("stamp %+v, want %+v", got, want)
			}
		})
	}
}

// TestStampThroughDecide: a run whose success was recorded ten days ago,
// its AppWrapper still there (a rule kept it), then a change. A TTL
// counted from the finish, whichever rule wins now, deletes at once after
// a shortened TTL, another rule taking the run over, the deciding rule
// deleted or a relabelled namespace: each is due the new TTL after wrapup
// sees it.
func TestStampThroughDecide(t *testing.T) {
	finished := now.Add(-10 * day)
	seconds := func(d time.Duration) int32 { return int32(d / time.Second) }
	jobsAfter := func(ttl time.Duration) *wrapupv1alpha1.CompletionRule {
		return jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, seconds(ttl)).Obj()
	}
	keep := func() *wrapupv1alpha1.CompletionRule {
		return jobs().OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).Obj()
	}
	urgent := util.MakeRule("urgent").UID("uid-urgent").TriggerKind("batch", "Job", "").Priority(10).OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).Obj()
	cleanup := util.MakeRule("cleanup").UID("uid-cleanup").TriggerKind("batch", "Job", "").Priority(-10).OnSuccess(wrapupv1alpha1.ActionDeleteAll, 600).Obj()
	team := util.MakeRule("team").UID("uid-team").TriggerKind("batch", "Job", "").Priority(10).NamespaceLabels(map[string]string{"team": "a"}).
		OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).Obj()
	// shortened is the record as a decision at now left it after the TTL
	// went from 30 days to an hour: due now + 1h.
	shortened := func(w *util.RecordWrapper) {
		w.Stamp("jobs", "uid-jobs", wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](3600)}, false, ptr.To(now.Add(time.Hour)))
	}
	for _, tc := range []struct {
		name string
		// recordedBy is the rule whose action the record holds; restamp,
		// if set, rewrites that stamp as an earlier decision did.
		recordedBy *wrapupv1alpha1.CompletionRule
		restamp    func(*util.RecordWrapper)
		// rules, the namespace's labels and how long after now the
		// decision comes.
		rules []*wrapupv1alpha1.CompletionRule
		ns    map[string]string
		later time.Duration
		want  Verdict
		due   time.Time // zero: none
		stamp string    // the rule of the new stamp; "" for the record's stamp kept
	}{
		{name: "nothing changed: the stamp kept, nothing written", recordedBy: jobsAfter(30 * day), rules: []*wrapupv1alpha1.CompletionRule{jobsAfter(30 * day)},
			want: VerdictDeleteAfterTTL, due: finished.Add(30 * day)},
		{name: "the TTL shortened after the run was recorded: due the new TTL after wrapup sees it", recordedBy: jobsAfter(30 * day), rules: []*wrapupv1alpha1.CompletionRule{jobsAfter(time.Hour)},
			want: VerdictDeleteAfterTTL, due: now.Add(time.Hour), stamp: "jobs"},
		{name: "shortened again, half an hour later: from then", recordedBy: jobsAfter(30 * day), restamp: shortened, rules: []*wrapupv1alpha1.CompletionRule{jobsAfter(10 * time.Minute)}, later: 30 * time.Minute,
			want: VerdictDeleteAfterTTL, due: now.Add(40 * time.Minute), stamp: "jobs"},
		{name: "the TTL lengthened: the natural due at once", recordedBy: jobsAfter(11 * day), rules: []*wrapupv1alpha1.CompletionRule{jobsAfter(20 * day)},
			want: VerdictDeleteAfterTTL, due: finished.Add(20 * day), stamp: "jobs"},
		{name: "a shortened TTL lengthened back: the natural due at once", recordedBy: jobsAfter(30 * day), restamp: shortened, rules: []*wrapupv1alpha1.CompletionRule{jobsAfter(30 * day)},
			want: VerdictDeleteAfterTTL, due: finished.Add(30 * day), stamp: "jobs"},
		{name: "UpdateStatus to DeleteAll: due the TTL after wrapup sees it", recordedBy: keep(), rules: []*wrapupv1alpha1.CompletionRule{jobsAfter(time.Hour)},
			want: VerdictDeleteAfterTTL, due: now.Add(time.Hour), stamp: "jobs"},
		{name: "dryRun turned off: due the TTL after wrapup sees it", recordedBy: jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).DryRun().Obj(), rules: []*wrapupv1alpha1.CompletionRule{jobsAfter(time.Hour)},
			want: VerdictDeleteAfterTTL, due: now.Add(time.Hour), stamp: "jobs"},
		{name: "a rule of higher priority and a shorter TTL takes the run over: its TTL from now", recordedBy: jobsAfter(30 * day), rules: []*wrapupv1alpha1.CompletionRule{jobsAfter(30 * day), urgent},
			want: VerdictDeleteAfterTTL, due: now.Add(time.Hour), stamp: "urgent"},
		{name: "the deciding rule deleted, a lower-priority DeleteAll takes the run over: its TTL from now", recordedBy: keep(), rules: []*wrapupv1alpha1.CompletionRule{cleanup},
			want: VerdictDeleteAfterTTL, due: now.Add(10 * time.Minute), stamp: "cleanup"},
		{name: "the deciding rule being deleted: the same", recordedBy: keep(), rules: []*wrapupv1alpha1.CompletionRule{jobs().OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).DeletionTimestamp(now).Obj(), cleanup},
			want: VerdictDeleteAfterTTL, due: now.Add(10 * time.Minute), stamp: "cleanup"},
		{name: "the namespace relabelled: another rule wins, its TTL from now", recordedBy: team, rules: []*wrapupv1alpha1.CompletionRule{team, jobsAfter(time.Hour)}, ns: map[string]string{"team": "b"},
			want: VerdictDeleteAfterTTL, due: now.Add(time.Hour), stamp: "jobs"},
		{name: "the same namespace, the same rule: nothing written", recordedBy: team, rules: []*wrapupv1alpha1.CompletionRule{team, jobsAfter(time.Hour)}, ns: map[string]string{"team": "a"},
			want: VerdictRecordOnly},
		{name: "dryRun turned on: nothing due", recordedBy: jobsAfter(time.Hour), rules: []*wrapupv1alpha1.CompletionRule{jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).DryRun().Obj()},
			want: VerdictDryRun, stamp: "jobs"},
		{name: "UpdateStatus: nothing due", recordedBy: jobsAfter(30 * day), rules: []*wrapupv1alpha1.CompletionRule{keep()},
			want: VerdictRecordOnly, stamp: "jobs"},
		{name: "the stamped due passed, nothing changed: deleted", recordedBy: jobsAfter(time.Hour), rules: []*wrapupv1alpha1.CompletionRule{jobsAfter(time.Hour)},
			want: VerdictDelete, due: finished.Add(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aw := appWrapper().Obj()
			w := util.MakeRecord(aw, tc.recordedBy, wrapupv1alpha1.OutcomeSucceeded, finished).Trigger(jobRef.Index, jobUID).Message("done").ResourceVersion("5")
			if tc.restamp != nil {
				tc.restamp(w)
			}
			in := withRecord(input(t, aw, trigger(bench(jobUID).Complete(finished)), tc.rules...), w.Obj())
			in.Namespace = util.MakeNamespace("ns").Obj()
			in.Namespace.Labels = tc.ns
			in.Now = now.Add(tc.later)
			d := Decide(context.Background(), in)
			if err := CheckVerdict(d); err != nil {
				t.Errorf("the verdict table: %v", err)
			}
			if d.Verdict != tc.want || !d.DueAt.Equal(tc.due) {
				t.Fatalf("%s due %s, want %s due %s: %s", d.Verdict, d.DueAt, tc.want, tc.due, d.Reason)
			}
			if d.Write != nil || d.Clear {
				t.Errorf("write %+v, clear %v: the record stands", d.Write, d.Clear)
			}
			if tc.stamp == "" {
				if d.Stamp != nil || d.Store != nil {
					t.Fatalf("stamp %+v, store %v: want the record's stamp kept and nothing written", d.Stamp, d.Store != nil)
				}
				return
			}
			if d.Stamp == nil || d.Stamp.Rule != tc.stamp || !d.Stamp.DueAt.Equal(tc.due) || d.Store == nil {
				t.Fatalf("stamp %+v, store %v: want %s's, due %s, stored", d.Stamp, d.Store != nil, tc.stamp, tc.due)
			}
			// The update is the record as stored, restamped, under its
			// resourceVersion.
			want := in.Record.DeepCopy()
			want.Action = recordedAction(*d.Stamp)
			if !reflect.DeepEqual(d.Store, want) {
				t.Errorf("stores %+v, want %+v", d.Store, want)
			}
			// Decided again on the record as the update answered it: the
			// stamp stands, and nothing is written again.
			in.Record = stored(t, d.Store, "6")
			in.Now = in.Now.Add(time.Minute)
			again := Decide(context.Background(), in)
			if again.Stamp != nil || again.Store != nil || !again.DueAt.Equal(d.DueAt) || again.Verdict != d.Verdict {
				t.Errorf("on the restamped record: %s due %s, stamp %+v, store %v; want %s due %s and nothing written",
					again.Verdict, again.DueAt, again.Stamp, again.Store != nil, d.Verdict, d.DueAt)
			}
		})
	}
}

// A stamp survives the round trip through the CompletionRecord: what
// CompletionRecordOf writes, RecordOf reads back as the same stamp and
// record, so that a decision on the record as written does not write it
// again.
func TestStampRoundTrip(t *testing.T) {
	for _, rule := range []*wrapupv1alpha1.CompletionRule{
		jobs().Obj(),
		jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj(),
		jobs().OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).Obj(),
		jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).DryRun().Obj(),
	} {
		aw := appWrapper().Obj()
		in := input(t, aw, trigger(bench(jobUID).Complete(now)), rule)
		in.Now = now.Add(987654321) // nanoseconds, as a clock reads
		d := Decide(context.Background(), in)
		if d.Write == nil || d.Store == nil || d.Stamp == nil {
			t.Fatalf("%s: write %+v, stamp %+v", d.Verdict, d.Write, d.Stamp)
		}
		back := RecordOf(stored(t, d.Store, "1"), aw)
		if back == nil || !back.Stamp.Same(*d.Stamp) || !back.Stamp.Same(d.Write.Stamp) || !back.FinishedAt.Equal(d.Write.FinishedAt) ||
			back.Outcome != d.Write.Outcome || back.RuleUID != d.Write.RuleUID || !reflect.DeepEqual(back.Triggers, d.Write.Triggers) {
			t.Errorf("%s: read back %+v, wrote %+v", d.Verdict, back, d.Write)
		}
	}
}
