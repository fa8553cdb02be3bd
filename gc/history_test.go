package gc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// TestHistoryDeadline: a CompletionRecord that cannot be written holds a
// deletion for at most HistoryWriteDeadline after the deletion was due,
// however often the deletion is decided again.
func TestHistoryDeadline(t *testing.T) {
	scheme := apiruntime.NewScheme()
	for _, add := range []func(*apiruntime.Scheme) error{corev1.AddToScheme, awv1beta2.AddToScheme, wrapupv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	fc := fake.NewClientBuilder().WithScheme(scheme).Build()
	refused := interceptor.NewClient(fc.(client.WithWatch), interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return errors.New("exceeded quota: count/completionrecords.wrapup.dev")
		},
	})
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid"}}
	rec := &decision.Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "jobs", FinishedAt: finished}
	for _, tc := range []struct {
		name   string
		d      decision.Decision
		now    time.Duration // after the finish
		delete bool
	}{
		{"a deletion due at the finish, a minute later", decision.Decision{Verdict: decision.VerdictDelete, Steps: decision.Steps{DueAt: finished}}, time.Minute, false},
		{"a deletion due at the finish, past the deadline", decision.Decision{Verdict: decision.VerdictDelete, Steps: decision.Steps{DueAt: finished}}, 3 * time.Minute, true},
		{"a deletion due at the finish, a day later", decision.Decision{Verdict: decision.VerdictDelete, Steps: decision.Steps{DueAt: finished}}, 24 * time.Hour, true},
		{"a deletion due an hour after the finish (its TTL), at the hour", decision.Decision{Verdict: decision.VerdictDelete, Steps: decision.Steps{DueAt: finished.Add(time.Hour)}}, time.Hour, false},
		{"a deletion due an hour after the finish, past its deadline", decision.Decision{Verdict: decision.VerdictDelete, Steps: decision.Steps{DueAt: finished.Add(time.Hour)}}, time.Hour + 3*time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &appWrapperReconciler{Cache: fc, Writer: refused, APIReader: fc, Recorder: events.NewFakeRecorder(16)}
			in := decision.Input{Now: finished.Add(tc.now), AppWrapper: aw, Rules: []decision.Rule{{Rule: rule}}}
			var mem awMemory
			// The decision writes the record now.
			d := tc.d
			d.Write, d.Outcome, d.Winner = rec, rec.Outcome, "jobs"
			if got := r.ensureHistory(context.Background(), in, planned(in, d), &mem); got != tc.delete {
				t.Errorf("ensureHistory = %v, want %v (the deletion may go ahead)", got, tc.delete)
			}
		})
	}
}

// planned is d with the history step Decide gives it on in.
func planned(in decision.Input, d decision.Decision) decision.Decision {
	d.History, d.HistoryWritten = decision.HistoryStepOf(in, d)
	return d
}

// historyBed is a fake API server for ensureHistory's unit tests.
func historyBed(t *testing.T) client.WithWatch {
	t.Helper()
	scheme := apiruntime.NewScheme()
	for _, add := range []func(*apiruntime.Scheme) error{corev1.AddToScheme, awv1beta2.AddToScheme, wrapupv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(scheme).Build()
}

func records(t *testing.T, c client.Client) int {
	t.Helper()
	var l wrapupv1alpha1.CompletionRecordList
	if err := c.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// TestHistoryOfTheDecidingRule: the rule that recorded the outcome was
// renamed (deleted, and its spec created under another name) before the
// record was written; the rule that deletes now keeps history, so the
// deletion waits on the record, which is written.
func TestHistoryOfTheDecidingRule(t *testing.T) {
	fc := historyBed(t)
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	renamed := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "r4"}}
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid"},
		Status: awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperFailed}}
	rec := &decision.Record{Outcome: wrapupv1alpha1.OutcomeFailed, Rule: "r2", FinishedAt: finished}
	d := decision.Decision{Verdict: decision.VerdictDelete, Steps: decision.Steps{DueAt: finished, Outcome: rec.Outcome}, Why: decision.Why{Winner: "r4", Recorded: rec}}
	in := decision.Input{Now: finished.Add(14 * time.Second), AppWrapper: aw, Rules: []decision.Rule{{Rule: renamed}}}
	r := &appWrapperReconciler{Cache: fc, Writer: fc, APIReader: fc, Recorder: events.NewFakeRecorder(16)}
	var mem awMemory
	ok := r.ensureHistory(context.Background(), in, planned(in, d), &mem)
	if n := records(t, fc); !ok || n != 1 {
		t.Errorf("ensureHistory = %v with %d CompletionRecords; want the record written before the deletion under r4", ok, n)
	}
}

// TestHistoryRetentionOnFreshRules: the cached rule keeps records 30 s,
// the API server's (just edited) 7 days. 40 s after the run, the record is
// written: the retention that has passed is only the stale cache's.
func TestHistoryRetentionOnFreshRules(t *testing.T) {
	fc := historyBed(t)
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cachedRule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}
	cachedRule.Spec.History.TTLSecondsAfterFinished = ptr.To[int32](30)
	freshRule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid"},
		Status: awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperSucceeded}}
	rec := &decision.Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "jobs", FinishedAt: finished}
	d := decision.Decision{Verdict: decision.VerdictDeleteAfterTTL, Steps: decision.Steps{DueAt: finished.Add(time.Hour), Outcome: rec.Outcome}, Why: decision.Why{Winner: "jobs", Recorded: rec}}
	in := decision.Input{Now: finished.Add(40 * time.Second), AppWrapper: aw, Rules: []decision.Rule{{Rule: cachedRule}}}
	fresh := decision.Input{Now: in.Now, AppWrapper: aw, Rules: []decision.Rule{{Rule: freshRule}}}
	r := &appWrapperReconciler{Cache: fc, Writer: fc, APIReader: fc, Recorder: events.NewFakeRecorder(16)}
	var mem awMemory
	if planned(in, d).History == nil {
		t.Fatal("the decision on the caches leaves no CompletionRecord to write: the retention that has passed is only the stale cache's")
	}
	r.ensureHistory(context.Background(), fresh, planned(fresh, d), &mem)
	if n := records(t, fc); n != 1 {
		t.Errorf("%d CompletionRecords, want the run's: the API server's rule keeps them 7 days", n)
	}
}

// TestHistoryDeadlineOnFreshRules: the cached rule deletes at once (due at
// the finish), the API server's after an hour. 3 minutes after the finish,
// late by the cached deadline only, the decision on the caches leaves the
// record to write after a final check, whose read fails; an hour later,
// with the API server back, the deletion waits on the record, which is
// written.
func TestHistoryDeadlineOnFreshRules(t *testing.T) {
	fc := historyBed(t)
	finished := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid"},
		Status: awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperSucceeded}}
	rec := &decision.Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "jobs", FinishedAt: finished}
	cached := decision.Decision{Verdict: decision.VerdictDelete, Steps: decision.Steps{DueAt: finished, Outcome: rec.Outcome}, Why: decision.Why{Winner: "jobs", Recorded: rec}}
	r := &appWrapperReconciler{Cache: fc, Writer: fc, APIReader: fc, Recorder: events.NewFakeRecorder(16)}
	var mem awMemory
	in := decision.Input{Now: finished.Add(3 * time.Minute), AppWrapper: aw, Rules: []decision.Rule{{Rule: rule}}}
	// The final check's read fails: nothing is written, and nothing is
	// remembered of the cached deadline.
	if c := planned(in, cached); c.History == nil || c.HistoryWritten != nil || mem.history != nil {
		t.Fatalf("the decision on the caches 3 minutes after the finish: want the record due, and nothing remembered (%v)", mem.history)
	}
	fresh := decision.Decision{Verdict: decision.VerdictDelete, Steps: decision.Steps{DueAt: finished.Add(time.Hour), Outcome: rec.Outcome}, Why: decision.Why{Winner: "jobs", Recorded: rec}}
	later := decision.Input{Now: finished.Add(time.Hour), AppWrapper: aw, Rules: []decision.Rule{{Rule: rule}}}
	ok := r.ensureHistory(context.Background(), later, planned(later, fresh), &mem)
	if n := records(t, fc); !ok || n != 1 {
		t.Errorf("ensureHistory = %v with %d CompletionRecords; want the record written before the deletion due an hour after the finish", ok, n)
	}
}

// TestNoHistoryOfAForgedRecord: a tenant who may patch an AppWrapper
// writes a record on it. wrapup writes a CompletionRecord only of a record
// the world bears out, under the rule that decides, whatever rule the
// record names; a finish in the future or before the AppWrapper existed,
// another AppWrapper's UID, or an outcome nothing shows gets none.
func TestNoHistoryOfAForgedRecord(t *testing.T) {
	created := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	now := created.Add(2 * time.Hour)
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}
	job := decision.TriggerInfo{Ref: decision.Ref{Index: 0, Name: "bench"}, UID: "job-uid"}
	succeeded := &decision.Evaluation{Outcome: "Succeeded"}
	running := &decision.Evaluation{Outcome: "Running"}
	for _, tc := range []struct {
		name  string
		rec   decision.Record
		phase awv1beta2.AppWrapperPhase
		eval  *decision.Evaluation
		want  bool
	}{
		{"the trigger read Succeeded bears it out", decision.Record{Outcome: "Succeeded", Rule: "made-up", FinishedAt: now.Add(-time.Minute), TriggerUID: "job-uid"}, awv1beta2.AppWrapperRunning, succeeded, true},
		{"the AppWrapper's phase bears it out", decision.Record{Outcome: "Failed", Rule: "jobs", FinishedAt: now.Add(-time.Minute)}, awv1beta2.AppWrapperFailed, nil, true},
		{"finished in 2999", decision.Record{Outcome: "Succeeded", Rule: "jobs", FinishedAt: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), TriggerUID: "job-uid"}, awv1beta2.AppWrapperRunning, succeeded, false},
		{"finished before the AppWrapper was created", decision.Record{Outcome: "Succeeded", Rule: "jobs", FinishedAt: created.Add(-time.Hour), TriggerUID: "job-uid"}, awv1beta2.AppWrapperRunning, succeeded, false},
		{"another AppWrapper's", decision.Record{AppWrapperUID: "other", Outcome: "Succeeded", Rule: "jobs", FinishedAt: now.Add(-time.Minute), TriggerUID: "job-uid"}, awv1beta2.AppWrapperRunning, succeeded, false},
		{"another trigger's", decision.Record{Outcome: "Succeeded", Rule: "jobs", FinishedAt: now.Add(-time.Minute), TriggerUID: "made-up"}, awv1beta2.AppWrapperRunning, succeeded, false},
		{"the trigger runs", decision.Record{Outcome: "Succeeded", Rule: "jobs", FinishedAt: now.Add(-time.Minute), TriggerUID: "job-uid"}, awv1beta2.AppWrapperRunning, running, false},
		{"a failure of a running AppWrapper", decision.Record{Outcome: "Failed", Rule: "jobs", FinishedAt: now.Add(-time.Minute), TriggerUID: "job-uid"}, awv1beta2.AppWrapperRunning, running, false},
		// The AppWrapper's phase does not bear out a record whose trigger
		// is read otherwise: a made-up trigger UID, or a flipped outcome.
		{"a Succeeded phase, a made-up trigger UID", decision.Record{Outcome: "Succeeded", Rule: "jobs", FinishedAt: now.Add(-time.Minute), TriggerUID: "never-ran"}, awv1beta2.AppWrapperSucceeded, succeeded, false},
		{"a Failed phase, the trigger read Succeeded, the record says Failed", decision.Record{Outcome: "Failed", Rule: "jobs", FinishedAt: now.Add(-time.Minute), TriggerUID: "job-uid"}, awv1beta2.AppWrapperFailed, succeeded, false},
		{"a Failed phase, the trigger still running, a failure recorded", decision.Record{Outcome: "Failed", Rule: "jobs", FinishedAt: now.Add(-time.Minute), TriggerUID: "job-uid"}, awv1beta2.AppWrapperFailed, running, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := historyBed(t)
			aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid", CreationTimestamp: metav1.NewTime(created)},
				Status: awv1beta2.AppWrapperStatus{Phase: tc.phase}}
			rec := tc.rec
			d := decision.Decision{Verdict: decision.VerdictDeleteAfterTTL, Steps: decision.Steps{Outcome: rec.Outcome}, Why: decision.Why{Winner: "jobs", Recorded: &rec, Trigger: &job, Evaluation: tc.eval}}
			in := decision.Input{Now: now, AppWrapper: aw, Rules: []decision.Rule{{Rule: rule}}}
			if got := decision.BorneOut(in, d); got != tc.want {
				t.Errorf("BorneOut = %v, want %v", got, tc.want)
			}
			r := &appWrapperReconciler{Cache: fc, Writer: fc, APIReader: fc, Recorder: events.NewFakeRecorder(16)}
			var mem awMemory
			// A record that finished in the AppWrapper's life, which nothing
			// bears out, holds a deletion as a record that cannot be
			// written does, until its deadline; any other does not.
			inLife := !rec.FinishedAt.After(now) && !rec.FinishedAt.Before(created)
			if got := r.ensureHistory(context.Background(), in, planned(in, d), &mem); got != (tc.want || !inLife) {
				t.Errorf("ensureHistory = %v, want %v (the deletion may go ahead)", got, tc.want || !inLife)
			}
			if late := (decision.Input{Now: now.Add(HistoryWriteDeadline), AppWrapper: aw, Rules: in.Rules}); !r.ensureHistory(context.Background(), late, planned(late, d), &mem) {
				t.Errorf("ensureHistory holds the deletion past the deadline")
			}
			var l wrapupv1alpha1.CompletionRecordList
			if err := fc.List(context.Background(), &l); err != nil {
				t.Fatal(err)
			}
			switch {
			case !tc.want && len(l.Items) != 0:
				t.Errorf("wrote %d CompletionRecords of a record nothing bears out", len(l.Items))
			case tc.want && len(l.Items) != 1:
				t.Errorf("wrote %d CompletionRecords, want the run's", len(l.Items))
			case tc.want && (l.Items[0].Rule != "jobs" || l.Items[0].Labels[wrapupv1alpha1.RecordRuleLabel] != "jobs"):
				t.Errorf("the CompletionRecord is of rule %q (label %q), want the deciding rule jobs", l.Items[0].Rule, l.Items[0].Labels[wrapupv1alpha1.RecordRuleLabel])
			}
			// What this process decided itself is written whatever the
			// AppWrapper says (it wrote the record a moment ago).
			if !tc.want && inLife && rec.AppWrapperUID == "" {
				var mem awMemory
				mine := d
				mine.Write = &rec
				r.ensureHistory(context.Background(), in, planned(in, mine), &mem)
				if n := records(t, fc); n != 1 {
					t.Errorf("%d CompletionRecords of a record this process decided, want 1", n)
				}
			}
		})
	}
}

// TestNoHistoryPastTheLimit: after a restart, a run whose CompletionRecord
// the count limit removed (limitPerNamespace newer ones of its rule are
// there) gets none again, which the history reconciler would delete at
// once; a newer run's is written.
func TestNoHistoryPastTheLimit(t *testing.T) {
	fc := historyBed(t)
	created := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}}
	rule.Spec.History.LimitPerNamespace = ptr.To[int32](2)
	for i := range 2 {
		cr := &wrapupv1alpha1.CompletionRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("newer-%d", i)},
			Rule: "jobs", FinishedAt: metav1.NewMicroTime(created.Add(time.Duration(30+i) * time.Minute))}
		if err := fc.Create(context.Background(), cr); err != nil {
			t.Fatal(err)
		}
	}
	r := &appWrapperReconciler{Cache: fc, Writer: fc, APIReader: fc, Recorder: events.NewFakeRecorder(16)}
	for _, tc := range []struct {
		finished time.Duration
		want     int
	}{{10 * time.Minute, 2}, {40 * time.Minute, 3}} {
		aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("run-%d", tc.finished/time.Minute), Namespace: "ns", UID: "aw-uid", CreationTimestamp: metav1.NewTime(created)},
			Status: awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperFailed}}
		rec := &decision.Record{Outcome: "Failed", Rule: "jobs", FinishedAt: created.Add(tc.finished)}
		d := decision.Decision{Verdict: decision.VerdictRecordOnly, Steps: decision.Steps{Outcome: rec.Outcome}, Why: decision.Why{Winner: "jobs", Recorded: rec}}
		in := decision.Input{Now: created.Add(time.Hour), AppWrapper: aw, Rules: []decision.Rule{{Rule: rule}}}
		var mem awMemory
		r.ensureHistory(context.Background(), in, planned(in, d), &mem)
		if n := records(t, fc); n != tc.want {
			t.Errorf("a run finished %s after the first: %d CompletionRecords, want %d", tc.finished, n, tc.want)
		}
	}
}
