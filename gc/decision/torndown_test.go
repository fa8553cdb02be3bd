package decision

import (
	"context"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// A finished status of each built-in kind, as its operator writes it
// (the shapes of celpolicies' samples, taken from the upstream types).
var finishedStatuses = []struct {
	apiVersion, kind string
	succeeded        map[string]any
	failed           map[string]any
}{
	{"batch/v1", "Job",
		conds("SuccessCriteriaMet", "Complete"), conds("FailureTarget", "Failed")},
	{"jobset.x-k8s.io/v1alpha2", "JobSet",
		withField(conds("Completed"), "terminalState", "Completed"), withField(conds("Failed"), "terminalState", "Failed")},
	{"kubeflow.org/v1", "PyTorchJob",
		conds("Created", "Running", "Succeeded"), conds("Created", "Running", "Failed")},
	// mpi-operator's Failed is final only with completionTime (an evicted
	// worker sets Failed without it, and the launcher goes on).
	{"kubeflow.org/v2beta1", "MPIJob",
		conds("Created", "Running", "Succeeded"), withField(conds("Created", "Running", "Failed"), "completionTime", "2026-03-01T10:42:00Z")},
	{"trainer.kubeflow.org/v1alpha1", "TrainJob",
		conds("Complete"), conds("Failed")},
	{"ray.io/v1", "RayJob",
		map[string]any{"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, map[string]any{"jobDeploymentStatus": "Failed", "jobStatus": "FAILED"}},
	{"argoproj.io/v1alpha1", "Workflow",
		map[string]any{"phase": "Succeeded"}, map[string]any{"phase": "Failed"}},
	{"v1", "Pod",
		map[string]any{"phase": "Succeeded"}, map[string]any{"phase": "Failed"}},
}

// conds is a status whose conditions of the given types are all True.
func conds(types ...string) map[string]any {
	cs := make([]any, len(types))
	for i, t := range types {
		cs[i] = map[string]any{"type": t, "status": "True", "reason": t, "message": t}
	}
	return map[string]any{"conditions": cs}
}

func withField(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }

// kindRun is run wrapping, as its component 1, a trigger "bench" of
// apiVersion/kind.
func kindRun(apiVersion, kind string) *util.AppWrapperWrapper {
	return runWith(util.MakeObject(apiVersion, kind, "bench").Obj())
}

// benchOf is the live trigger of a kindRun, of apiVersion/kind, whose status
// is status.
func benchOf(apiVersion, kind string, status map[string]any) *util.ObjectWrapper {
	return util.MakeObject(apiVersion, kind, "bench").Status(status)
}

// kindInput is the decision on aw, a kindRun, whose live trigger is obj,
// created by the AppWrapper controller with the UID jobUID, under a rule
// for its kind with its built-in expressions.
func kindInput(t *testing.T, aw *util.AppWrapperWrapper, obj *util.ObjectWrapper) Input {
	t.Helper()
	u := obj.OwnedBy(aw.Obj()).UID(jobUID).Obj()
	gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
	ref := Ref{Index: 1, Kind: schema.GroupKind{Group: gv.Group, Kind: u.GetKind()}, Version: gv.Version, Name: "bench", Template: "bench"}
	r := util.MakeRule("by-kind").UID("uid-by-kind").TriggerKind(gv.Group, u.GetKind(), "").Obj()
	in := input(t, aw.Obj(), live(ref, u), r)
	in.Kinds = map[schema.GroupKind]Kind{ref.Kind: {State: KindWatched}}
	return in
}

// deleted is when the trigger's deletion began, for a trigger being
// deleted.
var deleted = now.Add(-time.Second)

// A trigger being torn down is never a new completion, whatever its
// status says: the kubelet makes a Pod being deleted Succeeded when its
// containers exit 0 on SIGTERM, and a Job, a JobSet or a PyTorchJob being
// deleted may be finished by its operator on the way. Each case's control
// (the same object, not being deleted) is recorded, so that the case is
// the deletion's doing.
func TestTornDownTriggerIsNoCompletion(t *testing.T) {
	for _, k := range finishedStatuses {
		for _, outcome := range []wrapupv1alpha1.Outcome{wrapupv1alpha1.OutcomeSucceeded, wrapupv1alpha1.OutcomeFailed} {
			status := k.succeeded
			if outcome == wrapupv1alpha1.OutcomeFailed {
				status = k.failed
			}
			t.Run(k.kind+"/"+string(outcome), func(t *testing.T) {
				// A failure needs the AppWrapper controller to be done
				// retrying: it was seen failed long enough ago.
				decide := func(deleting bool) Decision {
					obj := benchOf(k.apiVersion, k.kind, status)
					if deleting {
						obj.Deleting(deleted)
					}
					in := kindInput(t, kindRun(k.apiVersion, k.kind), obj)
					in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-time.Hour)}
					return Decide(context.Background(), in)
				}
				if control := decide(false); control.Write == nil || control.Write.Outcome != outcome {
					t.Fatalf("control: %s, write %+v: %s", control.Verdict, control.Write, control.Reason)
				}
				d := decide(true)
				if d.Write != nil || d.Verdict != VerdictWaitingForTrigger || d.Outcome != "" {
					t.Fatalf("being deleted: %s, outcome %q, write %+v; want %s and nothing recorded", d.Verdict, d.Outcome, d.Write, VerdictWaitingForTrigger)
				}
				if !strings.Contains(d.Reason, "being deleted") || d.Trigger.UID != jobUID {
					t.Errorf("reason %q, trigger %+v: want it to say the trigger is being deleted", d.Reason, d.Trigger)
				}
				for _, e := range d.Events {
					if e.Type == "Warning" {
						t.Errorf("a trigger torn down is no news: Warning %s %q", e.Reason, e.Message)
					}
				}
			})
		}
	}
}

// A Pod with DisruptionTarget=True is being evicted, preempted or shut
// down: Succeeded or Failed, it is no completion, deleted or not.
func TestDisruptedPodIsNoCompletion(t *testing.T) {
	disrupted := func(phase string) map[string]any {
		return map[string]any{"phase": phase, "conditions": []any{
			map[string]any{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": "Kueue preempted it"},
			map[string]any{"type": "Ready", "status": "False", "reason": "PodCompleted"},
		}}
	}
	for _, phase := range []string{"Succeeded", "Failed"} {
		t.Run(phase, func(t *testing.T) {
			in := kindInput(t, kindRun("v1", "Pod"), benchOf("v1", "Pod", disrupted(phase)))
			in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-time.Hour)}
			d := Decide(context.Background(), in)
			if d.Write != nil || d.Verdict != VerdictWaitingForTrigger {
				t.Fatalf("%s, write %+v; want %s: %s", d.Verdict, d.Write, VerdictWaitingForTrigger, d.Reason)
			}
			if !strings.Contains(d.Reason, "DisruptionTarget=True, reason PreemptionByScheduler") {
				t.Errorf("reason %q does not say why", d.Reason)
			}
		})
	}
	// A condition that is not True changes nothing.
	st := map[string]any{"phase": "Succeeded", "conditions": []any{map[string]any{"type": "DisruptionTarget", "status": "False"}}}
	if d := Decide(context.Background(), kindInput(t, kindRun("v1", "Pod"), benchOf("v1", "Pod", st))); d.Write == nil {
		t.Errorf("DisruptionTarget=False: %s, want a record", d.Verdict)
	}
	// A DisruptionTarget condition is a Pod's: another kind's is its own.
	if d := Decide(context.Background(), kindInput(t, kindRun("batch/v1", "Job"), benchOf("batch/v1", "Job",
		map[string]any{"conditions": []any{map[string]any{"type": "DisruptionTarget", "status": "True"}, map[string]any{"type": "Complete", "status": "True"}}}))); d.Write == nil {
		t.Errorf("a Job's DisruptionTarget: %s, want a record", d.Verdict)
	}
}

// A record already there keeps its meaning when its trigger is torn down:
// not cleared, acted on; and an AppWrapper its controller failed is failed,
// whatever the trigger being torn down says.
func TestTornDownTriggerAndTheRecord(t *testing.T) {
	running := map[string]any{"phase": "Running"}
	// podRecord is the record of the Pod's success a minute ago.
	podRecord := func(in Input) Input {
		return withRecord(in, recorded(in.AppWrapper, in.Rules[0].Rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute)))
	}
	t.Run("a recorded success is kept while its Pod is deleted", func(t *testing.T) {
		in := podRecord(kindInput(t, kindRun("v1", "Pod"), benchOf("v1", "Pod", running).Deleting(deleted)))
		d := Decide(context.Background(), in)
		if d.Clear || d.Verdict != VerdictDelete || d.Outcome != wrapupv1alpha1.OutcomeSucceeded {
			t.Fatalf("%s, clear %v, outcome %q; want %s of the recorded success: %s", d.Verdict, d.Clear, d.Outcome, VerdictDelete, d.Reason)
		}
	})
	t.Run("the same Pod running, not being deleted, clears it", func(t *testing.T) {
		in := podRecord(kindInput(t, kindRun("v1", "Pod"), benchOf("v1", "Pod", running)))
		if d := Decide(context.Background(), in); !d.Clear {
			t.Fatalf("%s: want the record cleared", d.Verdict)
		}
	})
	t.Run("a Failed AppWrapper whose trigger is torn down Succeeded failed", func(t *testing.T) {
		in := kindInput(t, kindRun("v1", "Pod").Phase(awv1beta2.AppWrapperFailed), benchOf("v1", "Pod", map[string]any{"phase": "Succeeded"}).Deleting(deleted))
		d := Decide(context.Background(), in)
		if d.Write == nil || d.Write.Outcome != wrapupv1alpha1.OutcomeFailed || !d.Evaluation.FromAppWrapperPhase {
			t.Fatalf("%s, write %+v: want Failed by the AppWrapper's phase: %s", d.Verdict, d.Write, d.Reason)
		}
	})
}

// Under a policy of several candidates, a candidate torn down has not
// finished: it neither completes All nor decides Any.
func TestTornDownCandidate(t *testing.T) {
	for _, tc := range []struct {
		policy   wrapupv1alpha1.TriggerPolicy
		triggers []Trigger
	}{
		{wrapupv1alpha1.TriggerPolicyAll, []Trigger{candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now).Deleting(deleted))}},
		{wrapupv1alpha1.TriggerPolicyAny, []Trigger{candidate(hjob(0, 0)), candidate(hjob(1, 0).Complete(now).Deleting(deleted))}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			in := input(t, harnessAW(2).Obj(), tc.triggers[0], harnessRule(tc.policy))
			in.Triggers = tc.triggers
			d := Decide(context.Background(), in)
			if d.Write != nil || d.Verdict != VerdictWaitingForTrigger {
				t.Fatalf("%s, write %+v; want %s: %s", d.Verdict, d.Write, VerdictWaitingForTrigger, d.Reason)
			}
			if got := d.Candidates[1].State; got != "TornDown" {
				t.Errorf("candidate 1 is %q, want TornDown", got)
			}
		})
	}
}

// A success recorded for an earlier trigger of an AppWrapper its
// controller then failed: no new attempt comes, and the AppWrapper's own
// deletion hold holds.
func TestSuccessThenFailedWithHold(t *testing.T) {
	aw := appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").
		Condition(awv1beta2.DeletingResources, metav1.ConditionTrue, "DeletionPaused", now.Add(-time.Minute)).Obj()
	rule := jobs().Obj()
	d := Decide(context.Background(), withRecord(input(t, aw, trigger(bench(jobUID2).Failed(now)), rule), recorded(aw, rule, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Hour))))
	if d.Verdict != VerdictDeleteAfterTTL || d.After != 9*time.Minute {
		t.Fatalf("%s after %s, want %s after 9m (the hold): %s", d.Verdict, d.After, VerdictDeleteAfterTTL, d.Reason)
	}
}

// A Job its own TTL removes (the TTL-after-finished controller deletes a
// finished Job with Foreground propagation, so that it is seen with a
// deletionTimestamp while its pods go) finished before its deletion began:
// its outcome is a completion. A Job finished within a second of its
// deletion, or after it, is torn down: its controller may have finished it
// on the way.
func TestJobRemovedByItsOwnTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  *util.JobWrapper
		want wrapupv1alpha1.Outcome // "" for torn down: nothing recorded
	}{
		{"complete, then deleted 5 s later", bench(jobUID).Complete(now.Add(-10 * time.Second)).Deleting(now.Add(-5 * time.Second)), wrapupv1alpha1.OutcomeSucceeded},
		{"complete, then deleted two seconds on", bench(jobUID).Complete(now.Add(-2100 * time.Millisecond)).Deleting(now.Add(-100 * time.Millisecond)), wrapupv1alpha1.OutcomeSucceeded},
		// Within a second of the deletion: a clock of kube-controller-manager
		// behind the API server's by less than a second could make a finish
		// after the deletion look as early.
		{"complete, then deleted the next second", bench(jobUID).Complete(now.Add(-1100 * time.Millisecond)).Deleting(now.Add(-100 * time.Millisecond)), ""},
		{"failed, then deleted", bench(jobUID).Failed(now.Add(-time.Hour)).Deleting(now.Add(-time.Minute)), wrapupv1alpha1.OutcomeFailed},
		{"complete in the second of its deletion", bench(jobUID).Complete(now.Add(-900 * time.Millisecond)).Deleting(now.Add(-time.Second)), ""},
		{"complete after its deletion began", bench(jobUID).Complete(now).Deleting(now.Add(-3 * time.Second)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(t, appWrapper().Obj(), trigger(tc.job), jobs().Obj())
			in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-time.Hour)}
			d := Decide(context.Background(), in)
			if tc.want == "" {
				if d.Write != nil || d.Verdict != VerdictWaitingForTrigger || !strings.Contains(d.Reason, "being deleted") {
					t.Fatalf("%s, write %+v; want %s, the Job being deleted: %s", d.Verdict, d.Write, VerdictWaitingForTrigger, d.Reason)
				}
				return
			}
			if d.Write == nil || d.Write.Outcome != tc.want {
				t.Fatalf("%s, write %+v; want %s recorded: %s", d.Verdict, d.Write, tc.want, d.Reason)
			}
		})
	}
}
