package decision

import (
	"context"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"testing"
	"time"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TestHistoryStep: a decision that acts on an outcome under a rule that
// keeps history says to write its CompletionRecord (Steps.History), unless
// the controller remembers it written or finds it in its cache (then
// Remember.HistoryWritten says so); an outcome recorded by no decision the
// controller knows of, which nothing bears out, is refused one.
func TestHistoryStep(t *testing.T) {
	deletes := jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0)
	noHistory := jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0).History(wrapupv1alpha1.HistorySpec{Disabled: true})
	succeeded := func(ago time.Duration) *awv1beta2.AppWrapper {
		return appWrapper().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-ago), jobUID).RecordedBy("jobs", jobRef.String()).Obj()
	}
	recorded := func(ago time.Duration) Input {
		return input(t, succeeded(ago), trigger(bench(jobUID).Complete(now.Add(-ago))), deletes.Obj())
	}

	// Decided now: the record and its CompletionRecord are written.
	d := Decide(context.Background(), input(t, appWrapper().Obj(), trigger(bench(jobUID).Complete(now)), deletes.Obj()))
	if d.Verdict != VerdictDelete || d.Write == nil || d.History == nil || d.History.Of != d.Write || d.History.Refused != "" ||
		d.History.Record.Name != RecordName("run", string(awUID)) || d.History.Record.Rule != "jobs" {
		t.Fatalf("a success decided now: verdict %s, write %v, history %+v; want its CompletionRecord written", d.Verdict, d.Write, d.History)
	}
	if err := CheckVerdict(d); err != nil {
		t.Error(err)
	}
	// Recorded a moment ago, by this process.
	in := recorded(10 * time.Second)
	d = Decide(context.Background(), in)
	if d.Verdict != VerdictDelete || d.Write != nil || d.History == nil || !d.History.Of.Same(d.Recorded) || d.History.Expired {
		t.Fatalf("a recorded success: verdict %s, history %+v; want the CompletionRecord of the recorded outcome", d.Verdict, d.History)
	}
	cr := d.History.Record

	for _, tc := range []struct {
		name    string
		in      func(Input) Input
		step    bool
		written bool
		refused Refusal
		expired bool
	}{
		{"remembered written", func(in Input) Input { in.History.Written = ReadRecord(in.AppWrapper); return in }, false, false, "", false},
		{"in the cache", func(in Input) Input { in.History.Cached = cr; return in }, false, true, "", false},
		{"another run's in the cache", func(in Input) Input {
			other := cr.DeepCopy()
			other.Outcome = wrapupv1alpha1.OutcomeFailed
			in.History.Cached = other
			return in
		}, true, false, "", false},
		{"no CompletionRecords here", func(in Input) Input { in.History.Off = true; return in }, false, false, "", false},
		{"a rule that keeps none", func(Input) Input {
			return input(t, succeeded(10*time.Second), trigger(bench(jobUID).Complete(now.Add(-10*time.Second))), noHistory.Obj())
		}, false, false, "", false},
		{"its retention passed", func(Input) Input { return recorded(8 * 24 * time.Hour) }, true, false, "", true},
		{"finished in an hour", func(Input) Input { return recorded(-time.Hour) }, true, false, RefusedOutsideLife, false},
		{"finished in an hour, counted by this process", func(Input) Input {
			in := recorded(-time.Hour)
			in.History.Counted = ReadRecord(in.AppWrapper)
			return in
		}, true, false, "", false},
		{"nothing bears it out (the Job runs)", func(Input) Input {
			return input(t, succeeded(10*time.Second), trigger(bench(jobUID)), deletes.Obj())
		}, false, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in(recorded(10 * time.Second))
			d := Decide(context.Background(), in)
			if err := CheckVerdict(d); err != nil {
				t.Error(err)
			}
			if (d.History != nil) != tc.step || (d.HistoryWritten != nil) != tc.written {
				t.Fatalf("verdict %s: history step %+v, written %v; want a step %v, written %v", d.Verdict, d.History, d.HistoryWritten, tc.step, tc.written)
			}
			if d.History != nil && (d.History.Refused != tc.refused || d.History.Expired != tc.expired) {
				t.Errorf("verdict %s (write %v: %s): refused %q, expired %v; want %q, %v", d.Verdict, d.Write != nil, d.Reason, d.History.Refused, d.History.Expired, tc.refused, tc.expired)
			}
		})
	}
}
