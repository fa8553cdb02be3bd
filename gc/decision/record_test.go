package decision

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// TestMakeRecordIsWhatWrapupWrites: the records the tests build with
// test/util's MakeRecord are those wrapup writes (CompletionRecordOf), in
// everything a decision reads back (RecordOf), so that the tables decide
// on the records wrapup would have stored.
func TestMakeRecordIsWhatWrapupWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		aw   *awv1beta2.AppWrapper
		rule *wrapupv1alpha1.CompletionRule
		trig []Trigger
		make func(aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule) *util.RecordWrapper
	}{
		{"a success of one trigger, deleted after its TTL", appWrapper().Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).Obj(),
			[]Trigger{trigger(bench(jobUID).Complete(now))},
			func(aw *awv1beta2.AppWrapper, r *wrapupv1alpha1.CompletionRule) *util.RecordWrapper {
				return util.MakeRecord(aw, r, wrapupv1alpha1.OutcomeSucceeded, now).Trigger(1, jobUID)
			}},
		{"a failure the AppWrapper's phase decided, no trigger", appWrapper().Phase(awv1beta2.AppWrapperFailed).Obj(), jobs().Obj(),
			[]Trigger{{Ref: jobRef, State: TriggerAbsent}},
			func(aw *awv1beta2.AppWrapper, r *wrapupv1alpha1.CompletionRule) *util.RecordWrapper {
				return util.MakeRecord(aw, r, wrapupv1alpha1.OutcomeFailed, now).Trigger(1, "")
			}},
		{"a success kept (UpdateStatus)", appWrapper().Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).Obj(),
			[]Trigger{trigger(bench(jobUID).Complete(now))},
			func(aw *awv1beta2.AppWrapper, r *wrapupv1alpha1.CompletionRule) *util.RecordWrapper {
				return util.MakeRecord(aw, r, wrapupv1alpha1.OutcomeSucceeded, now).Trigger(1, jobUID)
			}},
		{"a dry run", appWrapper().Obj(), jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 60).DryRun().Obj(),
			[]Trigger{trigger(bench(jobUID).Complete(now))},
			func(aw *awv1beta2.AppWrapper, r *wrapupv1alpha1.CompletionRule) *util.RecordWrapper {
				return util.MakeRecord(aw, r, wrapupv1alpha1.OutcomeSucceeded, now).Trigger(1, jobUID)
			}},
		{"a success of every candidate", harnessAW(2).Obj(), harnessRule(wrapupv1alpha1.TriggerPolicyAll),
			[]Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now))},
			func(aw *awv1beta2.AppWrapper, r *wrapupv1alpha1.CompletionRule) *util.RecordWrapper {
				return util.MakeRecord(aw, r, wrapupv1alpha1.OutcomeSucceeded, now).Trigger(1, hUID(0, 0)).Trigger(2, hUID(1, 0))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(t, tc.aw, Trigger{}, tc.rule)
			in.Triggers = tc.trig
			d := Decide(context.Background(), in)
			if d.Store == nil {
				t.Fatalf("%s: nothing to store: %s", d.Verdict, d.Reason)
			}
			built := tc.make(tc.aw, tc.rule).Obj()
			got, want := RecordOf(d.Store, tc.aw), RecordOf(built, tc.aw)
			got.Message, want.Message = "", ""
			if !reflect.DeepEqual(got, want) {
				t.Errorf("wrapup writes %+v; MakeRecord builds %+v", got, want)
			}
			if d.Store.Name != built.Name || d.Store.Namespace != built.Namespace || d.Store.AppWrapper.UID != built.AppWrapper.UID || d.Store.Policy != built.Policy {
				t.Errorf("wrapup writes %s/%s of %s (%s); MakeRecord %s/%s of %s (%s)", d.Store.Namespace, d.Store.Name, d.Store.AppWrapper.UID, d.Store.Policy,
					built.Namespace, built.Name, built.AppWrapper.UID, built.Policy)
			}
			// The decision on what it wrote writes nothing more.
			if again := Decide(context.Background(), withRecord(in, stored(t, built, "1"))); again.Store != nil {
				t.Errorf("on MakeRecord's record: %s, store %+v; want nothing written", again.Verdict, again.Store)
			}
		})
	}
}

// TestRecordOf: a stored record is the run's record only when it is of
// this AppWrapper (its UID), written by this version (a rule UID) and not
// cleared.
func TestRecordOf(t *testing.T) {
	aw, rule := appWrapper().Obj(), jobs().Obj()
	ok := func() *util.RecordWrapper {
		return util.MakeRecord(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now).Trigger(1, jobUID)
	}
	if RecordOf(ok().Obj(), aw) == nil {
		t.Fatal("the run's own record is not read")
	}
	other := ok().Obj()
	other.AppWrapper.UID = "another-aw-uid"
	legacy := ok().Obj()
	legacy.RuleUID = ""
	for name, cr := range map[string]*wrapupv1alpha1.CompletionRecord{
		"none": nil, "of another AppWrapper": other, "of an earlier version (no rule UID)": legacy, "cleared": ok().Cleared(now).Obj(),
	} {
		if rec := RecordOf(cr, aw); rec != nil {
			t.Errorf("a record %s reads as %+v", name, rec)
		}
	}
	if RecordOf(ok().Obj(), nil) != nil {
		t.Error("a record of no AppWrapper is read")
	}
}

// TestCompletionRecordLabelsAreWrapups: a CompletionRecord's wrapup.dev/*
// labels say what wrapup decided (its AppWrapper, rule and outcome); none
// is copied from the AppWrapper, whose tenant writes its labels. The
// AppWrapper's own labels are copied, to find runs by them.
func TestCompletionRecordLabelsAreWrapups(t *testing.T) {
	long := strings.Repeat("a", 70) // too long for a label value
	for _, tc := range []struct {
		name string
		aw   string
		// label is the record's wrapup.dev/appwrapper; "" for none.
		label string
	}{
		{"a name that fits a label", "run", "run"},
		{"a name over 63 characters", long, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aw := util.MakeAppWrapper(tc.aw, "ns").UID(awUID).Phase(awv1beta2.AppWrapperRunning).
				Component(util.MakeObject("apps/v1", "Deployment", "inference").Obj(), nil).
				Component(util.MakeObject("batch/v1", "Job", "bench").Obj(), nil).
				Label("team", "a").Label(util.QueueNameLabel, "q").
				// A tenant's own wrapup.dev labels, and the legacy record.
				Label(wrapupv1alpha1.RecordAppWrapperLabel, "victim").Label(wrapupv1alpha1.RecordRuleLabel, "keep-forever").
				Label(wrapupv1alpha1.OutcomeLabel, "Failed").Label("wrapup.dev/anything", "x").
				Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-time.Hour), "forged").RecordedBy("keep-forever", "batch/Job/bench").RecordedMessage("forged").Obj()
			job := util.MakeJob("bench").OwnedBy(aw).UID(jobUID).Complete(now)
			d := Decide(context.Background(), input(t, aw, trigger(job), jobs().Obj()))
			cr := d.Store
			if cr == nil {
				t.Fatalf("%s: nothing stored: %s", d.Verdict, d.Reason)
			}
			want := map[string]string{"team": "a", util.QueueNameLabel: "q", wrapupv1alpha1.RecordRuleLabel: "jobs", wrapupv1alpha1.OutcomeLabel: "Succeeded"}
			if tc.label != "" {
				want[wrapupv1alpha1.RecordAppWrapperLabel] = tc.label
			}
			if !reflect.DeepEqual(cr.Labels, want) {
				t.Errorf("labels %v, want %v", cr.Labels, want)
			}
			for k := range cr.AppWrapper.Labels {
				if strings.HasPrefix(k, "wrapup.dev/") {
					t.Errorf("appWrapper.labels keeps the AppWrapper's %s", k)
				}
			}
			if cr.AppWrapper.Name != tc.aw || cr.Rule != "jobs" || cr.Message == "forged" || !cr.FinishedAt.Time.Equal(now) || cr.Outcome != wrapupv1alpha1.OutcomeSucceeded {
				t.Errorf("record of %q by %s, %s at %s: %q; want wrapup's own", cr.AppWrapper.Name, cr.Rule, cr.Outcome, cr.FinishedAt, cr.Message)
			}
		})
	}
}

// TestStore: the CompletionRecord a decision writes. A new outcome is a
// create (the compare-and-set: AlreadyExists says someone recorded it); a
// cleared one an update of the stored record under its resourceVersion,
// which keeps the outcome as history; a new outcome after a cleared (or a
// failed) one an update in its place; a record of an earlier version is
// replaced by update; a record of another AppWrapper of the same name is
// never written over.
func TestStore(t *testing.T) {
	rule := jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).OnFailure(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
	aw := appWrapper().Obj()
	failedAt := now.Add(-time.Hour)
	failed := func() *util.RecordWrapper {
		return util.MakeRecord(aw, rule, wrapupv1alpha1.OutcomeFailed, failedAt).Trigger(jobRef.Index, jobUID).Message("oom").ResourceVersion("7")
	}
	for _, tc := range []struct {
		name   string
		record *wrapupv1alpha1.CompletionRecord
		trig   Trigger
		// rv is the resourceVersion the write is under ("" for a create);
		// outcome the outcome it holds; cleared whether it is cleared.
		rv      string
		outcome wrapupv1alpha1.Outcome
		cleared bool
		// none: nothing is written.
		none bool
	}{
		{name: "a new outcome: a create", trig: trigger(bench(jobUID).Complete(now)), rv: "", outcome: wrapupv1alpha1.OutcomeSucceeded},
		{name: "the recorded failure's trigger replaced by a new attempt: cleared, by update, the outcome kept", record: failed().Obj(),
			trig: trigger(bench(jobUID2)), rv: "7", outcome: wrapupv1alpha1.OutcomeFailed, cleared: true},
		{name: "the new attempt succeeds: an update of the failed record", record: failed().Obj(),
			trig: trigger(bench(jobUID2).Complete(now)), rv: "7", outcome: wrapupv1alpha1.OutcomeSucceeded},
		{name: "the new attempt succeeds after the failure was cleared: an update of the cleared record", record: failed().Cleared(now.Add(-time.Minute)).ResourceVersion("8").Obj(),
			trig: trigger(bench(jobUID2).Complete(now)), rv: "8", outcome: wrapupv1alpha1.OutcomeSucceeded},
		{name: "a cleared record, the new attempt running: nothing", record: failed().Cleared(now.Add(-time.Minute)).ResourceVersion("8").Obj(),
			trig: trigger(bench(jobUID2)), none: true},
		{name: "a record of an earlier version (no rule UID): replaced by update", record: func() *wrapupv1alpha1.CompletionRecord {
			cr := failed().ResourceVersion("9").Obj()
			cr.RuleUID = ""
			return cr
		}(), trig: trigger(bench(jobUID).Complete(now)), rv: "9", outcome: wrapupv1alpha1.OutcomeSucceeded},
		{name: "a record of another AppWrapper of the name: a create, never its update", record: func() *wrapupv1alpha1.CompletionRecord {
			cr := failed().ResourceVersion("10").Obj()
			cr.AppWrapper.UID = "another-aw-uid"
			return cr
		}(), trig: trigger(bench(jobUID).Complete(now)), rv: "", outcome: wrapupv1alpha1.OutcomeSucceeded},
		{name: "a record of another AppWrapper of the name, its trigger running: nothing cleared", record: func() *wrapupv1alpha1.CompletionRecord {
			cr := failed().ResourceVersion("10").Obj()
			cr.AppWrapper.UID = "another-aw-uid"
			return cr
		}(), trig: trigger(bench(jobUID2)), none: true},
		{name: "the recorded failure stands: nothing", record: failed().Obj(), trig: trigger(bench(jobUID).Failed(failedAt)), none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := withRecord(input(t, aw, tc.trig, rule), tc.record)
			d := Decide(context.Background(), in)
			if err := CheckVerdict(d); err != nil {
				t.Errorf("the verdict table: %v", err)
			}
			if tc.none {
				if d.Store != nil {
					t.Fatalf("%s: stores %+v, want nothing", d.Verdict, d.Store)
				}
				return
			}
			cr := d.Store
			if cr == nil {
				t.Fatalf("%s: nothing stored: %s", d.Verdict, d.Reason)
			}
			if cr.ResourceVersion != tc.rv || cr.Outcome != tc.outcome || (cr.Cleared != nil) != tc.cleared {
				t.Fatalf("stores %s under resourceVersion %q, cleared %+v; want %s under %q, cleared %v", cr.Outcome, cr.ResourceVersion, cr.Cleared, tc.outcome, tc.rv, tc.cleared)
			}
			if cr.AppWrapper.UID != awUID || cr.Name != wrapupv1alpha1.RecordName(aw.Name, awUID) || cr.RuleUID != rule.UID {
				t.Errorf("stores the record of %s (%s), rule UID %q", cr.AppWrapper.UID, cr.Name, cr.RuleUID)
			}
			if tc.cleared {
				// The record as it was, its outcome kept, cleared now, and
				// no longer found by an outcome label.
				want := tc.record.DeepCopy()
				want.Cleared = cr.Cleared
				delete(want.Labels, wrapupv1alpha1.OutcomeLabel)
				if !reflect.DeepEqual(cr, want) || !cr.Cleared.At.Time.Equal(now) || cr.Cleared.Message == "" {
					t.Errorf("clears as %+v, want %+v cleared now with why", cr, want)
				}
				return
			}
			// A new outcome is the decision's, whole: its trigger and time.
			back := RecordOf(cr, aw)
			if back == nil || !back.FinishedAt.Equal(now) || len(back.Triggers) != 1 || back.Triggers[0].UID != types.UID(tc.trig.Object.GetUID()) {
				t.Errorf("a new outcome stores %+v, want the trigger seen now", back)
			}
		})
	}
}
