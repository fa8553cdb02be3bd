package decision

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Builders for AppWrappers with several triggers: the inference
// Deployment, then the harness Jobs h0, h1, h2... as components 1, 2, 3...

var podGK = schema.GroupKind{Kind: "Pod"}

func harnessAW(t *testing.T, n int) *awBuilder {
	t.Helper()
	b := appWrapper(t)
	b.aw.Spec.Components = b.aw.Spec.Components[:1]
	for i := range n {
		b.aw.Spec.Components = append(b.aw.Spec.Components, component(t, "batch/v1", "Job", fmt.Sprintf("h%d", i), nil))
	}
	return b
}

func harnessRef(i int) Ref {
	name := fmt.Sprintf("h%d", i)
	return Ref{Index: i + 1, Kind: jobRef.Kind, Version: "v1", Name: name, Template: name}
}

func hUID(i int, attempt int) types.UID { return types.UID(fmt.Sprintf("h%d-uid-%d", i, attempt)) }

// hjob is harness Job i of the given attempt: state "" (running),
// "Complete", "Failed", or "Error" (a status the rule's expression cannot
// read).
func hjob(i, attempt int, state string) Trigger {
	tr := job(hUID(i, attempt), state)
	if state == "Error" {
		tr = job(hUID(i, attempt), "")
		tr.Object.Object["status"] = map[string]any{"bad": "many"}
	}
	tr.Ref = harnessRef(i)
	tr.Object.SetName(tr.Ref.Name)
	return tr
}

// recordedMany writes a record of several candidates, as the controller does.
func (b *awBuilder) recordedMany(o wrapupv1alpha1.Outcome, ago time.Duration, deciders ...RecordedTrigger) *awBuilder {
	first := harnessRef(deciders[0].Index - 1)
	(&Record{Outcome: o, Rule: "harness", FinishedAt: now.Add(-ago), Message: "done", TriggerUID: deciders[0].UID,
		TriggerRef: first.String(), Triggers: deciders, Policy: policyOf(o, deciders)}).Apply(b.aw)
	return b
}

// policyOf is the policy that records deciders for o, in these tables:
// All records every candidate for a success and one for a failure.
func policyOf(o wrapupv1alpha1.Outcome, deciders []RecordedTrigger) wrapupv1alpha1.TriggerPolicy {
	if (o == wrapupv1alpha1.OutcomeSucceeded) == (len(deciders) > 1) {
		return wrapupv1alpha1.TriggerPolicyAll
	}
	return wrapupv1alpha1.TriggerPolicyAny
}

func decider(i, attempt int) RecordedTrigger {
	return RecordedTrigger{Index: i + 1, UID: hUID(i, attempt)}
}

// harnessRule's success is the Job's built-in one, and fails at run time
// on a Job whose status has "bad".
func harnessRule(policy wrapupv1alpha1.TriggerPolicy, mods ...func(*wrapupv1alpha1.CompletionRule)) *wrapupv1alpha1.CompletionRule {
	r := jobRule("harness", 0, mods...)
	r.Spec.Success = "has(object.status.bad) ? object.status.bad > 1 : object.status.?conditions.orValue([]).exists(c, c.type == 'Complete' && c.status == 'True')"
	r.Spec.Trigger.Policy = policy
	return r
}

// TestDecideMany holds the policy decisions over several candidates.
func TestDecideMany(t *testing.T) {
	all, anyOf := wrapupv1alpha1.TriggerPolicyAll, wrapupv1alpha1.TriggerPolicyAny
	long := DefaultFailureGracePeriod + time.Second
	cases := []struct {
		name     string
		aw       *awv1beta2.AppWrapper
		triggers []Trigger
		policy   wrapupv1alpha1.TriggerPolicy
		// failureSeen is the controller's memory of a failure.
		failureSeen FailureSeen
		verdict     Verdict
		// write is the outcome written ("" for none); deciders the
		// component indexes of the candidates it records.
		write    wrapupv1alpha1.Outcome
		deciders []int
		clear    bool
		// warning is the reason of a Warning Event expected; reason a
		// part of the decision's reason.
		warning, reason string
	}{
		{name: "All: every candidate running waits", aw: harnessAW(t, 3).obj(), policy: all,
			triggers: []Trigger{hjob(0, 0, ""), hjob(1, 0, ""), hjob(2, 0, "")},
			verdict:  VerdictWaitingForTrigger, reason: "3 of 3 triggers have not finished"},
		{name: "All: two of three succeeded waits for the third, and says which", aw: harnessAW(t, 3).obj(), policy: all,
			triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, "Complete"), hjob(2, 0, "")},
			verdict:  VerdictWaitingForTrigger, reason: "1 of 3 triggers have not finished (Job h2)"},
		{name: "All: every candidate succeeded deletes, recording all three", aw: harnessAW(t, 3).obj(), policy: all,
			triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, "Complete"), hjob(2, 0, "Complete")},
			verdict:  VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded, deciders: []int{1, 2, 3}},
		{name: "All: a candidate not read yet stops a success", aw: harnessAW(t, 3).obj(), policy: all,
			triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, "Complete"), {Ref: harnessRef(2), State: TriggerPending}},
			verdict:  VerdictWaitingForTrigger, reason: "1 of 3 triggers were not read"},
		{name: "All: one failure just seen waits for the AppWrapper controller's retry", aw: harnessAW(t, 3).obj(), policy: all,
			triggers: []Trigger{hjob(0, 0, ""), hjob(1, 0, "Failed"), hjob(2, 0, "")},
			verdict:  VerdictWaitingForRetries, reason: "Job h1 failed"},
		{name: "All: one failure, final, fails the AppWrapper while the others run", aw: harnessAW(t, 3).obj(), policy: all,
			triggers:    []Trigger{hjob(0, 0, ""), hjob(1, 0, "Failed"), hjob(2, 0, "")},
			failureSeen: FailureSeen{TriggerUID: hUID(1, 0), At: now.Add(-long)},
			verdict:     VerdictDelete, write: wrapupv1alpha1.OutcomeFailed, deciders: []int{2}},
		{name: "All: a failure while the AppWrapper controller resets is not final", aw: harnessAW(t, 3).phase(awv1beta2.AppWrapperResetting).obj(), policy: all,
			triggers:    []Trigger{hjob(0, 0, ""), hjob(1, 0, "Failed"), hjob(2, 0, "")},
			failureSeen: FailureSeen{TriggerUID: hUID(1, 0), At: now.Add(-long)},
			verdict:     VerdictWaitingForRetries},
		{name: "All: the retry of the failed candidate (new UIDs) clears the failure",
			aw:     harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeFailed, time.Minute, decider(1, 0)).obj(),
			policy: all, triggers: []Trigger{hjob(0, 1, ""), hjob(1, 1, ""), hjob(2, 1, "")},
			verdict: VerdictClearOutcome, clear: true},
		{name: "All: a recorded failure is not cleared by the other candidates still running",
			aw:     harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeFailed, time.Minute, decider(1, 0)).obj(),
			policy: all, triggers: []Trigger{hjob(0, 0, ""), hjob(1, 0, "Failed"), hjob(2, 0, "")},
			verdict: VerdictDelete},
		{name: "All: a recorded failure is final after a restart (no memory): no second record",
			aw:     harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeFailed, 10*time.Second, decider(1, 0)).obj(),
			policy: all, triggers: []Trigger{hjob(0, 0, ""), hjob(1, 0, "Failed"), hjob(2, 0, "")},
			verdict: VerdictDelete},
		{name: "All: a recorded success is not cleared by a candidate re-created after it (a re-admission): deleted at once",
			aw:     harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(0, 0), decider(1, 0), decider(2, 0)).obj(),
			policy: all, triggers: []Trigger{hjob(0, 1, ""), hjob(1, 1, ""), hjob(2, 1, "")},
			verdict: VerdictDelete, reason: "the run started again"},
		{name: "Any: a recorded success, then the AppWrapper controller resets it: deleted at once",
			aw:     harnessAW(t, 3).phase(awv1beta2.AppWrapperResetting).recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Second, decider(1, 0)).obj(),
			policy: anyOf, triggers: []Trigger{{Ref: harnessRef(0), State: TriggerAbsent}, {Ref: harnessRef(1), State: TriggerAbsent}, {Ref: harnessRef(2), State: TriggerAbsent}},
			verdict: VerdictDelete, reason: "Resetting after its recorded success"},
		{name: "All: a recorded success is cleared when a candidate that decided runs again",
			aw:     harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(0, 0), decider(1, 0), decider(2, 0)).obj(),
			policy: all, triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, ""), hjob(2, 0, "Complete")},
			verdict: VerdictClearOutcome, clear: true},
		{name: "All: an evaluation error on one candidate is not finished, with a Warning", aw: harnessAW(t, 3).obj(), policy: all,
			triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, "Error"), hjob(2, 0, "Complete")},
			verdict:  VerdictWaitingForTrigger, warning: wrapupv1alpha1.ReasonEvaluationError, reason: "evaluation(s) failed"},
		{name: "All: an evaluation error on a candidate that decided keeps the record and deletes nothing",
			aw:     harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(0, 0), decider(1, 0), decider(2, 0)).obj(),
			policy: all, triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, "Error"), hjob(2, 0, "Complete")},
			verdict: VerdictWaitingForTrigger, warning: wrapupv1alpha1.ReasonEvaluationError},
		{name: "All: the AppWrapper controller failing the AppWrapper fails it", aw: harnessAW(t, 3).phase(awv1beta2.AppWrapperFailed).obj(), policy: all,
			triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, ""), hjob(2, 0, "")},
			verdict:  VerdictDelete, write: wrapupv1alpha1.OutcomeFailed, deciders: []int{1, 2, 3}},
		{name: "All: Succeeded phase with the finished candidates gone (their TTL) succeeded",
			aw:     harnessAW(t, 2).phase(awv1beta2.AppWrapperSucceeded).obj(),
			policy: all, triggers: []Trigger{hjob(0, 0, "Complete"), {Ref: harnessRef(1), State: TriggerAbsent}},
			verdict: VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded, deciders: []int{1, 2}},

		{name: "Any: one success deletes, recording that one", aw: harnessAW(t, 3).obj(), policy: anyOf,
			triggers: []Trigger{hjob(0, 0, ""), hjob(1, 0, "Complete"), hjob(2, 0, "Failed")},
			verdict:  VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded, deciders: []int{2}},
		{name: "Any: two of three failed waits for the third", aw: harnessAW(t, 3).obj(), policy: anyOf,
			triggers:    []Trigger{hjob(0, 0, "Failed"), hjob(1, 0, "Failed"), hjob(2, 0, "")},
			failureSeen: FailureSeen{TriggerUID: hUID(0, 0), At: now.Add(-time.Hour)},
			verdict:     VerdictWaitingForTrigger},
		{name: "Any: every candidate failed, final, fails it, recording all three", aw: harnessAW(t, 3).obj(), policy: anyOf,
			triggers:    []Trigger{hjob(0, 0, "Failed"), hjob(1, 0, "Failed"), hjob(2, 0, "Failed")},
			failureSeen: FailureSeen{TriggerUID: types.UID(strings.Join([]string{string(hUID(0, 0)), string(hUID(1, 0)), string(hUID(2, 0))}, ",")), At: now.Add(-long)},
			verdict:     VerdictDelete, write: wrapupv1alpha1.OutcomeFailed, deciders: []int{1, 2, 3}},
		{name: "Any: every candidate failed, but only one failure was seen long ago: not final yet", aw: harnessAW(t, 3).obj(), policy: anyOf,
			triggers:    []Trigger{hjob(0, 0, "Failed"), hjob(1, 0, "Failed"), hjob(2, 0, "Failed")},
			failureSeen: FailureSeen{TriggerUID: hUID(0, 0), At: now.Add(-long)},
			verdict:     VerdictWaitingForRetries},
		{name: "Any: a recorded success is cleared when the candidate that decided runs again",
			aw:     harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(1, 0)).obj(),
			policy: anyOf, triggers: []Trigger{hjob(0, 0, ""), hjob(1, 0, ""), hjob(2, 0, "")},
			verdict: VerdictClearOutcome, clear: true},
		{name: "Any: a recorded success stands while the others run", aw: harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(1, 0)).obj(),
			policy: anyOf, triggers: []Trigger{hjob(0, 0, ""), hjob(1, 0, "Complete"), hjob(2, 0, "")},
			verdict: VerdictDelete},

		{name: "All: of two failures, the one the controller remembers decides, from when it saw it", aw: harnessAW(t, 3).obj(), policy: all,
			triggers:    []Trigger{hjob(0, 0, "Failed"), hjob(1, 0, "Failed"), hjob(2, 0, "")},
			failureSeen: FailureSeen{TriggerUID: hUID(1, 0), At: now.Add(-long)},
			verdict:     VerdictDelete, write: wrapupv1alpha1.OutcomeFailed, deciders: []int{2}},
		{name: "a record decided under another policy: the rule decides afresh (Any: not every candidate failed)",
			aw:     harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeFailed, time.Minute, decider(1, 0)).obj(),
			policy: anyOf, triggers: []Trigger{hjob(0, 0, ""), hjob(1, 0, "Failed"), hjob(2, 0, "")},
			verdict: VerdictWaitingForTrigger},
		{name: "a success of every candidate, recorded when there were fewer, is not the record of the candidates there are now",
			aw:     harnessAW(t, 3).recordedMany(wrapupv1alpha1.OutcomeSucceeded, time.Minute, decider(0, 0), decider(1, 0)).obj(),
			policy: all, triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, "Complete"), hjob(2, 0, "")},
			verdict: VerdictWaitingForTrigger},
		{name: "Any: a Succeeded AppWrapper whose candidates finished or are gone succeeded, even with one the rule calls failed",
			aw:     harnessAW(t, 2).phase(awv1beta2.AppWrapperSucceeded).obj(),
			policy: anyOf, triggers: []Trigger{hjob(0, 0, "Failed"), {Ref: harnessRef(1), State: TriggerAbsent}},
			verdict: VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded, deciders: []int{1, 2}},
		{name: "One: several candidates are ambiguous", aw: harnessAW(t, 3).obj(), policy: wrapupv1alpha1.TriggerPolicyOne,
			triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, "Complete"), hjob(2, 0, "Complete")},
			verdict:  VerdictNoTrigger, warning: wrapupv1alpha1.ReasonAmbiguousTrigger, reason: "set trigger.policy to All or Any"},
		{name: "unset policy is One", aw: harnessAW(t, 2).obj(), policy: "",
			triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, "Complete")},
			verdict:  VerdictNoTrigger, warning: wrapupv1alpha1.ReasonAmbiguousTrigger},
		{name: "more candidates than the bound: nothing is decided, with a Warning", aw: harnessAW(t, wrapupv1alpha1.MaxTriggers+1).obj(), policy: all,
			verdict: VerdictNoTrigger, warning: wrapupv1alpha1.ReasonTooManyTriggers, reason: "more than the 64"},
		{name: "All with one candidate records as One does", aw: harnessAW(t, 1).obj(), policy: all,
			triggers: []Trigger{hjob(0, 0, "Complete")},
			verdict:  VerdictDelete, write: wrapupv1alpha1.OutcomeSucceeded},
		{name: "a single trigger's record is not one of several candidates': they decide afresh",
			aw:     harnessAW(t, 2).recorded(wrapupv1alpha1.OutcomeSucceeded, time.Minute, hUID(0, 0)).obj(),
			policy: all, triggers: []Trigger{hjob(0, 0, "Complete"), hjob(1, 0, "")},
			verdict: VerdictWaitingForTrigger},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := input(t, tc.aw, Trigger{}, harnessRule(tc.policy))
			in.Triggers = tc.triggers
			in.FailureSeen = tc.failureSeen
			d := Decide(context.Background(), in)
			if d.Verdict != tc.verdict {
				t.Fatalf("verdict = %s (%s), want %s", d.Verdict, d.Reason, tc.verdict)
			}
			if tc.reason != "" && !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason = %q, want it to say %q", d.Reason, tc.reason)
			}
			switch {
			case tc.write == "" && d.Write != nil:
				t.Errorf("writes %+v, want no write", d.Write)
			case tc.write != "" && (d.Write == nil || d.Write.Outcome != tc.write):
				t.Errorf("writes %+v, want the outcome %s", d.Write, tc.write)
			case tc.write != "":
				var got []int
				for _, tr := range d.Write.Triggers {
					got = append(got, tr.Index)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.deciders) {
					t.Errorf("records the candidates %v, want %v", got, tc.deciders)
				}
				if len(tc.deciders) > 0 && d.Write.TriggerRef != harnessRef(tc.deciders[0]-1).String() {
					t.Errorf("trigger ref = %q, want the first that decided", d.Write.TriggerRef)
				}
			}
			if d.Clear != tc.clear {
				t.Errorf("clear = %v, want %v", d.Clear, tc.clear)
			}
			warned := ""
			for _, e := range d.Events {
				if e.Type == "Warning" {
					warned = e.Reason
				}
			}
			if warned != tc.warning {
				t.Errorf("warning = %q, want %q (events %+v)", warned, tc.warning, d.Events)
			}
			for _, e := range d.Events {
				if len(e.Message) > MaxMessage {
					t.Errorf("event %s is %d bytes long", e.Reason, len(e.Message))
				}
			}
		})
	}
}

// TestRecordOfSeveralTriggers: the record of several candidates reads
// back as written, within the annotation's bound, and a retried candidate
// (new UID) tells it apart.
func TestRecordOfSeveralTriggers(t *testing.T) {
	aw := harnessAW(t, wrapupv1alpha1.MaxTriggers).obj()
	var ts []RecordedTrigger
	for i := range wrapupv1alpha1.MaxTriggers {
		ts = append(ts, RecordedTrigger{Index: i + 1, UID: types.UID(fmt.Sprintf("%08d-0000-0000-0000-000000000000", i))})
	}
	rec := &Record{Outcome: wrapupv1alpha1.OutcomeSucceeded, Rule: "harness", FinishedAt: now, TriggerUID: ts[0].UID, TriggerRef: harnessRef(0).String(),
		Triggers: ts, Policy: wrapupv1alpha1.TriggerPolicyAll}
	rec.Apply(aw)
	if n := len(aw.Annotations[wrapupv1alpha1.TriggersAnnotation]); n > 4+64*40 {
		t.Errorf("the triggers annotation of %d candidates is %d bytes", len(ts), n)
	}
	back := ReadRecord(aw)
	if !back.Same(rec) {
		t.Fatalf("read back %+v, want %+v", back, rec)
	}
	other := *rec
	other.Triggers = append(append([]RecordedTrigger{}, ts[:3]...), RecordedTrigger{Index: 4, UID: "retried"})
	if back.Same(&other) {
		t.Error("a record with a retried candidate is the same as the first")
	}
	(*Record)(nil).Apply(aw)
	if _, ok := aw.Annotations[wrapupv1alpha1.TriggersAnnotation]; ok {
		t.Error("clearing the record leaves the triggers annotation")
	}
	aw.Labels[wrapupv1alpha1.OutcomeLabel] = "Succeeded"
	aw.Annotations[wrapupv1alpha1.FinishedAtAnnotation] = now.Format(time.RFC3339Nano)
	for _, bad := range []string{"All:one=uid", "1=uid", "Most:1=uid"} {
		aw.Annotations[wrapupv1alpha1.TriggersAnnotation] = bad
		if ReadRecord(aw) != nil {
			t.Errorf("the triggers annotation %q is read as a record", bad)
		}
	}
}

// TestSeveralKindsAnnotated: a kind-less rule over a Job and a Pod
// annotated together watches both kinds for the AppWrapper, and waits
// for both under All.
func TestSeveralKindsAnnotated(t *testing.T) {
	ann := map[string]string{wrapupv1alpha1.TriggerAnnotation: "true"}
	b := appWrapper(t)
	b.aw.Spec.Components = []awv1beta2.AppWrapperComponent{
		component(t, "apps/v1", "Deployment", "inference", nil),
		component(t, "batch/v1", "Job", "load", ann),
		component(t, "v1", "Pod", "checker", ann),
	}
	loadRef := Ref{Index: 1, Kind: jobRef.Kind, Version: "v1", Name: "load", Template: "load", Annotated: true}
	checkRef := Ref{Index: 2, Kind: podGK, Version: "v1", Name: "checker", Template: "checker", Annotated: true}
	load := hjob(0, 0, "Complete")
	load.Ref = loadRef
	pod := func(phase string) Trigger {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "status": map[string]any{"phase": phase}}}
		u.SetName("checker")
		u.SetNamespace("ns")
		u.SetUID("pod-uid")
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: "run", UID: awUID, Controller: ptr.To(true)}})
		return Trigger{Ref: checkRef, State: TriggerPresent, Object: u}
	}
	r := rule("annotated-triggers", -1000, nil, nil)
	r.Spec.Trigger.Policy = wrapupv1alpha1.TriggerPolicyAll

	for _, tc := range []struct {
		phase   string
		verdict Verdict
	}{{"Running", VerdictWaitingForTrigger}, {"Succeeded", VerdictDelete}} {
		in := input(t, b.obj(), Trigger{}, r)
		in.Kinds[podGK] = Kind{State: KindWatched}
		in.Triggers = []Trigger{load, pod(tc.phase)}
		d := Decide(context.Background(), in)
		if d.Verdict != tc.verdict {
			t.Errorf("pod %s: verdict = %s (%s), want %s", tc.phase, d.Verdict, d.Reason, tc.verdict)
		}
		if fmt.Sprint(d.Claims) != fmt.Sprint([]schema.GroupKind{jobRef.Kind, podGK}) {
			t.Errorf("claims = %v, want the Job's kind and the Pod's", d.Claims)
		}
		if len(d.Candidates) != 2 || d.Candidates[1].State != tc.phase {
			t.Errorf("candidates = %+v, want the Pod %s", d.Candidates, tc.phase)
		}
		if p := Plan(in); len(p.Refs) != 2 {
			t.Errorf("plan reads %v, want both triggers", p.Refs)
		}
	}

	// A kind wrapup cannot watch among them: nothing is decided.
	in := input(t, b.obj(), Trigger{}, r)
	in.Kinds[podGK] = Kind{State: KindNotWatchable, Message: "pods is forbidden"}
	in.Triggers = []Trigger{load, pod("Succeeded")}
	if d := Decide(context.Background(), in); d.Verdict != VerdictTriggerNotWatchable || d.WillRecord() {
		t.Errorf("verdict = %s (%s), want TriggerNotWatchable and no record", d.Verdict, d.Reason)
	}
}
