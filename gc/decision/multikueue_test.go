package decision

import (
	"context"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

const (
	copyUID  = types.UID("copy-uid")
	workload = "appwrapper-run-1a2b3"
)

// managed is the AppWrapper "run" on a MultiKueue manager cluster.
func managed() *util.AppWrapperWrapper {
	return appWrapper().ManagedBy(kueue.MultiKueueControllerName)
}

// workerCopy is MultiKueue's copy of "run" on worker cluster "worker-1".
// A Job the worker's AppWrapper controller creates is OwnedBy it.
func workerCopy() *util.AppWrapperWrapper {
	return appWrapper().UID(copyUID).Label(PrebuiltWorkloadLabel, workload).Label(kueue.MultiKueueOriginLabel, "multikueue")
}

func dispatched(copy *awv1beta2.AppWrapper) *Worker {
	return &Worker{Cluster: "worker-1", Workload: workload, AppWrapper: copy}
}

// TestMultiKueueManager holds the decisions on an AppWrapper that
// MultiKueue dispatches to a worker: the trigger is read there, it must be
// a component of MultiKueue's copy there, and nothing is recorded or
// deleted while the worker cannot be read.
func TestMultiKueueManager(t *testing.T) {
	tests := []struct {
		name string
		aw   func(t *testing.T) *awv1beta2.AppWrapper
		// recorded is the outcome the run's record holds, seen ago
		// before now; "" for none.
		recorded wrapupv1alpha1.Outcome
		ago      time.Duration
		worker   func(t *testing.T) *Worker
		trig     Trigger
		want     Verdict
		write    bool
		reason   string
		events   []string
		problem  string
	}{
		{
			name: "a trigger complete on the worker deletes the manager's AppWrapper",
			aw:   func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(t *testing.T) *Worker {
				return dispatched(workerCopy().Obj())
			},
			trig: trigger(bench(jobUID).OwnedBy(workerCopy().Obj()).Complete(now)), want: VerdictDelete, write: true,
			events: []string{wrapupv1alpha1.ReasonDeleted, wrapupv1alpha1.ReasonTriggerSucceeded},
		},
		{
			name:     "a recorded outcome is acted on after the same trigger is read on the worker",
			aw:       func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			recorded: wrapupv1alpha1.OutcomeSucceeded, ago: time.Second,
			worker: func(t *testing.T) *Worker { return dispatched(workerCopy().Obj()) },
			trig:   trigger(bench(jobUID).OwnedBy(workerCopy().Obj()).Complete(now)), want: VerdictDelete,
			events: []string{wrapupv1alpha1.ReasonDeleted},
		},
		{
			name: "a worker that cannot be read: nothing is recorded",
			aw:   func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(t *testing.T) *Worker {
				return &Worker{Cluster: "worker-1", Workload: workload, Problem: "reading worker-1: connection refused"}
			},
			trig: trigger(bench(jobUID).OwnedBy(workerCopy().Obj()).Complete(now)), want: VerdictWorkerUnreachable, reason: "connection refused",
			events: []string{wrapupv1alpha1.ReasonWorkerUnreachable},
		},
		{
			name:     "a worker that cannot be read: a recorded failure deletes nothing",
			aw:       func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			recorded: wrapupv1alpha1.OutcomeFailed, ago: time.Hour,
			worker: func(t *testing.T) *Worker {
				return &Worker{Cluster: "worker-1", Workload: workload, Problem: "no kubeconfig Secret wrapup-system/worker-1"}
			},
			want: VerdictWorkerUnreachable, reason: "no kubeconfig Secret", events: []string{wrapupv1alpha1.ReasonWorkerUnreachable},
		},
		{
			name:   "a worker not read yet: nothing is decided",
			aw:     func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(*testing.T) *Worker { return nil },
			trig:   trigger(bench(jobUID).OwnedBy(workerCopy().Obj()).Complete(now)), want: VerdictWaitingForTrigger, reason: "was not read",
		},
		{
			name:   "not dispatched yet",
			aw:     func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(*testing.T) *Worker { return &Worker{Workload: workload} },
			want:   VerdictWaitingForTrigger, reason: "has not dispatched",
		},
		{
			name:   "no copy on the worker yet",
			aw:     func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(*testing.T) *Worker { return dispatched(nil) },
			want:   VerdictWaitingForTrigger, reason: "has no copy",
		},
		{
			name: "the AppWrapper of that name on the worker is not MultiKueue's copy of this one",
			aw:   func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(t *testing.T) *Worker {
				return dispatched(workerCopy().Label(PrebuiltWorkloadLabel, "appwrapper-run-other").Obj())
			},
			trig: trigger(bench(jobUID).OwnedBy(workerCopy().Obj()).Complete(now)), want: VerdictWaitingForTrigger, reason: "is not MultiKueue's copy of this one",
		},
		{
			name: "a copy still suspended on the worker has no components",
			aw:   func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(t *testing.T) *Worker {
				return dispatched(workerCopy().Phase(awv1beta2.AppWrapperSuspended).Obj())
			},
			trig: trigger(bench(jobUID).OwnedBy(workerCopy().Obj()).Complete(now)), want: VerdictWaitingForTrigger, reason: "is Suspended",
		},
		{
			name:   "a Job on the worker that the copy does not control is not the trigger",
			aw:     func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(t *testing.T) *Worker { return dispatched(workerCopy().Obj()) },
			// Controlled by the manager's UID: not a component of the copy.
			trig: trigger(bench(jobUID).Complete(now)), want: VerdictNoTrigger, reason: "not controlled by MultiKueue's copy",
			events: []string{wrapupv1alpha1.ReasonTriggerNotOwned},
		},
		{
			// MultiKueue copies the status of whatever AppWrapper of that
			// name the worker holds: here a stale copy of an older one,
			// which failed. This AppWrapper never ran.
			name: "a Failed status mirrored from another AppWrapper's stale copy records nothing",
			aw:   func(t *testing.T) *awv1beta2.AppWrapper { return managed().Phase(awv1beta2.AppWrapperFailed).Obj() },
			worker: func(t *testing.T) *Worker {
				return dispatched(workerCopy().Label(PrebuiltWorkloadLabel, "appwrapper-run-older").Phase(awv1beta2.AppWrapperFailed).Obj())
			},
			want: VerdictWaitingForTrigger, reason: "is not MultiKueue's copy of this one",
		},
		{
			name: "the verified copy's Failed phase is final, whatever the manager's late status says",
			aw:   func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(t *testing.T) *Worker {
				return dispatched(workerCopy().Phase(awv1beta2.AppWrapperFailed).Obj())
			},
			trig: trigger(bench(jobUID).OwnedBy(workerCopy().Obj())), want: VerdictDelete, write: true,
			events: []string{wrapupv1alpha1.ReasonDeleted, wrapupv1alpha1.ReasonTriggerFailed},
		},
		{
			// The copy failed, Kueue finished the Workload, and MultiKueue
			// removed the copy before wrapup looked again.
			name: "a finished Workload whose copy MultiKueue removed is decided on the status kept here",
			aw:   func(t *testing.T) *awv1beta2.AppWrapper { return managed().Phase(awv1beta2.AppWrapperFailed).Obj() },
			worker: func(t *testing.T) *Worker {
				w := dispatched(nil)
				w.Finished, w.FinishedReason = true, kueue.WorkloadFinishedReasonFailed
				return w
			},
			want: VerdictDelete, write: true, reason: "",
			events: []string{wrapupv1alpha1.ReasonDeleted, wrapupv1alpha1.ReasonTriggerFailed},
		},
		{
			// The manager's status is a mirror of an earlier copy of that
			// name (Succeeded); this run's Workload finished Failed.
			name: "a finished Workload is decided as it finished, not on a stale mirror of another copy",
			aw:   func(t *testing.T) *awv1beta2.AppWrapper { return managed().Phase(awv1beta2.AppWrapperSucceeded).Obj() },
			worker: func(t *testing.T) *Worker {
				w := dispatched(nil)
				w.Finished, w.FinishedReason = true, kueue.WorkloadFinishedReasonFailed
				return w
			},
			want: VerdictDelete, write: true, reason: "",
			events: []string{wrapupv1alpha1.ReasonDeleted, wrapupv1alpha1.ReasonTriggerFailed},
		},
		{
			name: "a Workload finished out of sync says nothing of how the run went",
			aw:   func(t *testing.T) *awv1beta2.AppWrapper { return managed().Phase(awv1beta2.AppWrapperSucceeded).Obj() },
			worker: func(t *testing.T) *Worker {
				w := dispatched(nil)
				w.Finished, w.FinishedReason = true, kueue.WorkloadFinishedReasonOutOfSync
				return w
			},
			want: VerdictWaitingForTrigger,
		},
		{
			name:   "a running trigger on the worker",
			aw:     func(t *testing.T) *awv1beta2.AppWrapper { return managed().Obj() },
			worker: func(t *testing.T) *Worker { return dispatched(workerCopy().Obj()) },
			trig:   trigger(bench(jobUID).OwnedBy(workerCopy().Obj())), want: VerdictWaitingForTrigger,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			aw, rule := tc.aw(t), jobs().Obj()
			in := input(t, aw, tc.trig, rule)
			if tc.recorded != "" {
				in.Record = recorded(aw, rule, tc.recorded, now.Add(-tc.ago))
			}
			if tc.trig.Object == nil {
				in.Triggers = nil
			}
			in.Worker = tc.worker(t)
			d := Decide(context.Background(), in)
			if d.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s (reason: %s)", d.Verdict, tc.want, d.Reason)
			}
			if (d.Write != nil) != tc.write {
				t.Errorf("write %v, want %v", d.Write, tc.write)
			}
			if tc.write && tc.trig.Object != nil && (len(d.Write.Triggers) != 1 || d.Write.Triggers[0] != (RecordedTrigger{Index: jobRef.Index, UID: jobUID})) {
				t.Errorf("recorded triggers %+v, want the worker's %s", d.Write.Triggers, jobUID)
			}
			if (d.Store != nil) != tc.write {
				t.Errorf("store %+v, want a CompletionRecord written %v", d.Store, tc.write)
			}
			reason := d.Reason
			if d.Trigger != nil {
				reason += " / " + d.Trigger.Problem
			}
			if !strings.Contains(reason, tc.reason) {
				t.Errorf("reason %q, want it to say %q", reason, tc.reason)
			}
			var got []string
			for _, e := range d.Events {
				got = append(got, e.Reason)
			}
			if strings.Join(got, ",") != strings.Join(tc.events, ",") {
				t.Errorf("events %v, want %v", got, tc.events)
			}
			if len(d.Claims) > 0 {
				t.Errorf("claims %v on the manager, want none: the triggers are watched on the worker", d.Claims)
			}
			if tc.want != VerdictDelete && d.Verdict == VerdictDelete && d.Write == nil && !d.Clear {
				t.Errorf("the decision would delete")
			}
		})
	}
}

// TestMultiKueuePlan: the triggers of an AppWrapper that MultiKueue
// dispatches are read only from a worker whose copy is this AppWrapper's.
func TestMultiKueuePlan(t *testing.T) {
	aw := managed().Obj()
	in := input(t, aw, Trigger{}, jobs().Obj())
	in.Triggers = nil
	if !WorkerToRead(in) {
		t.Fatal("a Running AppWrapper that MultiKueue dispatches needs its worker read")
	}
	if n := Plan(in); len(n.Refs) != 0 {
		t.Errorf("before the worker is read, Plan names %v, want nothing to read", n.Refs)
	}
	in.Worker = dispatched(workerCopy().Obj())
	if n := Plan(in); len(n.Refs) != 1 || n.Refs[0] != jobRef {
		t.Errorf("Plan names %v, want %v", n.Refs, jobRef)
	}
	in.Worker = &Worker{Cluster: "worker-1", Workload: workload, Problem: "connection refused"}
	if n := Plan(in); len(n.Refs) != 0 {
		t.Errorf("with the worker unreadable, Plan names %v, want nothing to read", n.Refs)
	}
	plain := input(t, appWrapper().Obj(), Trigger{}, jobs().Obj())
	if WorkerToRead(plain) {
		t.Error("an AppWrapper that MultiKueue does not dispatch needs no worker read")
	}
	// The annotated trigger's kind is watched on the worker, not here.
	aw = runWith().Trigger(util.MakeObject("batch/v1", "Job", "bench").Obj()).ManagedBy(kueue.MultiKueueControllerName).Obj()
	r := util.MakeRule("annotated").Priority(-1000).Obj()
	in = input(t, aw, trigger(bench(jobUID).OwnedBy(workerCopy().Obj())), r)
	in.Worker = dispatched(workerCopy().Obj())
	in.Namespace = util.MakeNamespace("ns").Obj()
	if d := Decide(context.Background(), in); d.Verdict != VerdictWaitingForTrigger || len(d.Claims) != 0 {
		t.Errorf("annotated trigger on the worker: verdict %s claims %v, want WaitingForTrigger and no claim", d.Verdict, d.Claims)
	}
}

// A queued AppWrapper that MultiKueue dispatches (or one whose managedBy a
// tenant set) has no worker to read: it waits for a change, and is not
// looked at again every few seconds.
func TestMultiKueueQueuedIsNotPolled(t *testing.T) {
	for _, phase := range []awv1beta2.AppWrapperPhase{awv1beta2.AppWrapperEmpty, awv1beta2.AppWrapperSuspended} {
		t.Run(phaseOrNone(phase), func(t *testing.T) {
			in := input(t, managed().Phase(phase).Obj(), Trigger{}, jobs().Obj())
			in.Triggers = nil
			if WorkerToRead(in) {
				t.Fatalf("a worker to read for a %s AppWrapper", phaseOrNone(phase))
			}
			d := Decide(context.Background(), in)
			if d.Verdict != VerdictWaitingForTrigger || d.Requeue != 0 {
				t.Fatalf("%s, requeue %s; want %s on a change only: %s", d.Verdict, d.Requeue, VerdictWaitingForTrigger, d.Reason)
			}
			if !strings.Contains(d.Reason, "MultiKueue has not started the AppWrapper") {
				t.Errorf("reason %q does not say what it waits for", d.Reason)
			}
		})
	}
}

// TestMultiKueuePlanReadsTheCopysNames: a trigger named by generateName
// gets its name on the worker, where the copy's AppWrapper controller
// creates it; the manager's status is MultiKueue's mirror of it, late or
// of an earlier copy. The trigger is read under the copy's name.
func TestMultiKueuePlanReadsTheCopysNames(t *testing.T) {
	generated := util.MakeObject("batch/v1", "Job", "").Obj() // generateName: gen-
	aw := runWith(generated).ManagedBy(kueue.MultiKueueControllerName).ComponentStatus("inference", "gen-old").Obj()
	cp := runWith(generated).UID(copyUID).Label(PrebuiltWorkloadLabel, workload).Label(kueue.MultiKueueOriginLabel, "multikueue").
		ComponentStatus("inference", "gen-new").Obj()
	in := input(t, aw, Trigger{}, jobs().Obj())
	in.Worker = dispatched(cp)
	plan := Plan(in)
	if len(plan.Refs) != 1 || plan.Refs[0].Name != "gen-new" {
		t.Fatalf("refs to read %+v, want the Job the copy's controller named gen-new", plan.Refs)
	}
	in.Triggers = []Trigger{live(plan.Refs[0], util.MakeJob("gen-new").OwnedBy(cp).UID(jobUID).Complete(now).Obj())}
	if d := Decide(context.Background(), in); d.Verdict != VerdictDelete {
		t.Errorf("verdict %s (%s), want Delete on the copy's trigger", d.Verdict, d.Reason)
	}
}

// TestMultiKueueUnreachableWorkerAfterSuccess: the success of the run on
// the worker is recorded, then the worker cannot be read. The record is
// final: the AppWrapper is deleted when due, not held until the worker
// comes back (Kueue's workerLostTimeout would have MultiKueue dispatch the
// finished run again elsewhere). A recorded failure, which a retry on the
// worker may clear, still waits for the worker. The metadata on the
// AppWrapper, whatever it says, changes neither.
func TestMultiKueueUnreachableWorkerAfterSuccess(t *testing.T) {
	for _, tc := range []struct {
		outcome wrapupv1alpha1.Outcome
		want    Verdict
	}{
		{wrapupv1alpha1.OutcomeSucceeded, VerdictDelete},
		{wrapupv1alpha1.OutcomeFailed, VerdictWorkerUnreachable},
	} {
		rule := jobs().Obj()
		decide := func(aw *awv1beta2.AppWrapper, cr *wrapupv1alpha1.CompletionRecord) Decision {
			in := withRecord(input(t, aw, Trigger{}, rule), cr)
			in.Triggers = nil
			in.Worker = &Worker{Cluster: "worker-1", Workload: workload, Problem: "connecting to worker cluster worker-1: connection refused"}
			return Decide(context.Background(), in)
		}
		aw := managed().Obj()
		cr := recorded(aw, rule, tc.outcome, now.Add(-time.Minute))
		if d := decide(aw, cr); d.Verdict != tc.want || d.Store != nil {
			t.Errorf("recorded %s, worker unreachable: verdict %s (%s), store %v; want %s, nothing written", tc.outcome, d.Verdict, d.Reason, d.Store != nil, tc.want)
		}
		// The opposite outcome on the metadata, for another component.
		other := wrapupv1alpha1.OutcomeFailed
		if tc.outcome == other {
			other = wrapupv1alpha1.OutcomeSucceeded
		}
		forged := managed().Recorded(other, now.Add(-time.Hour), "other-uid").RecordedBy("jobs", "batch/Job/other").Obj()
		if d := decide(forged, cr); d.Verdict != tc.want {
			t.Errorf("recorded %s, the metadata saying %s: verdict %s (%s), want %s", tc.outcome, other, d.Verdict, d.Reason, tc.want)
		}
		// The metadata alone records nothing.
		if d := decide(managed().Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Hour), jobUID).RecordedBy("jobs", jobRef.String()).Obj(), nil); d.Verdict != VerdictWorkerUnreachable {
			t.Errorf("a success on the metadata only, worker unreachable: verdict %s (%s), want WorkerUnreachable", d.Verdict, d.Reason)
		}
	}
}

// TestWorkerBackoffFromTheStreak: each decision that finds the worker
// unreadable counts one more failure in a row and waits twice as long
// (WorkerBackoff, at most WorkerBackoffMax); one that reads it forgets the
// streak.
func TestWorkerBackoffFromTheStreak(t *testing.T) {
	aw, rule := managed().Obj(), jobs().Obj()
	in := withRecord(input(t, aw, Trigger{}, rule), recorded(aw, rule, wrapupv1alpha1.OutcomeFailed, now.Add(-time.Minute)))
	in.Triggers = nil
	in.Worker = &Worker{Cluster: "worker-1", Workload: workload, Problem: "connecting to worker cluster worker-1: connection refused"}
	for streak, want := range []time.Duration{WorkerRetry, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, WorkerBackoffMax, WorkerBackoffMax} {
		in.WorkerFailures = streak
		d := Decide(context.Background(), in)
		if d.Verdict != VerdictWorkerUnreachable || d.Requeue != want || d.WorkerFailures != streak+1 {
			t.Errorf("after %d failures: %s in %s, streak %d; want WorkerUnreachable in %s, streak %d", streak, d.Verdict, d.Requeue, d.WorkerFailures, want, streak+1)
		}
	}
	in.Worker.Problem = ""
	if d := Decide(context.Background(), in); d.WorkerFailures != 0 {
		t.Errorf("a worker read after 6 failures: streak %d, want 0 (%s)", d.WorkerFailures, d.Verdict)
	}
}
