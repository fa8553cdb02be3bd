package decision

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/test/util"
)

// The decisions are on the AppWrapper "run" in namespace "ns", built with
// test/util's builders: Running, it wraps an inference Deployment, then
// (most often) the benchmark Job "bench", whose live Job is the trigger;
// rules select it. What wrapup decided before is the run's CompletionRecord
// (Input.Record, built by recorded), never the AppWrapper's metadata.

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const (
	awUID   = types.UID("aw-uid")
	jobUID  = types.UID("job-uid")
	jobUID2 = types.UID("job-uid-2")
)

var jobRef = Ref{Index: 1, Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: "bench", Template: "bench"}

var errBroken = errors.New("spec.success: syntax error")

// runWith is the AppWrapper run, Running, wrapping an inference Deployment
// as its component 0, then objs as components 1, 2...
func runWith(objs ...runtime.Object) *util.AppWrapperWrapper {
	w := util.MakeAppWrapper("run", "ns").UID(awUID).Phase(awv1beta2.AppWrapperRunning).
		Component(util.MakeObject("apps/v1", "Deployment", "inference").Obj(), nil)
	for _, o := range objs {
		w.Component(o, nil)
	}
	return w
}

// appWrapper is run wrapping the benchmark Job bench (jobRef).
func appWrapper() *util.AppWrapperWrapper {
	return runWith(util.MakeObject("batch/v1", "Job", "bench").Obj())
}

// bench is run's live Job bench, as its controller created it with the
// UID uid, running.
func bench(uid types.UID) *util.JobWrapper {
	return util.MakeJob("bench").OwnedBy(appWrapper().Obj()).UID(uid).Started(now.Add(-time.Hour))
}

// trigger is the Job j as the trigger's cache holds it, for the component
// bench.
func trigger(j *util.JobWrapper) Trigger { return live(jobRef, j.Obj()) }

// live is obj as the trigger's cache holds it, for the component ref.
func live(ref Ref, obj runtime.Object) Trigger {
	return Trigger{Ref: ref, State: TriggerPresent, Object: util.Unstructured(obj)}
}

// jobs is the rule "jobs" for the Job bench, of priority 0, as admins
// write one first.
func jobs() *util.RuleWrapper {
	return util.MakeRule("jobs").UID("uid-jobs").TriggerKind("batch", "Job", "")
}

// input is the decision's input on aw, its trigger trig and rules.
func input(t *testing.T, aw *awv1beta2.AppWrapper, trig Trigger, rules ...*wrapupv1alpha1.CompletionRule) Input {
	t.Helper()
	in := Input{Now: now, AppWrapper: aw, Triggers: []Trigger{trig},
		Namespace: util.MakeNamespace("ns").Obj(),
		Kinds:     map[schema.GroupKind]Kind{jobRef.Kind: {State: KindWatched}}}
	for _, r := range rules {
		in.Rules = append(in.Rules, compiled(t, r))
	}
	return in
}

// compiled is rule with its compiled policy, as the controller's cache gives it.
func compiled(t *testing.T, rule *wrapupv1alpha1.CompletionRule) Rule {
	t.Helper()
	p, err := celpolicies.Compile(&rule.Spec)
	if err != nil {
		t.Fatalf("compiling rule %s: %v", rule.Name, err)
	}
	return Rule{Rule: rule, Policy: p}
}

// recorded is the CompletionRecord wrapup stored of aw's run when rule
// decided outcome o at at on the Job bench of UID jobUID (component 1),
// with rule's action for o in force (test/util's MakeRecord). Records of
// other triggers are built with MakeRecord(...).Trigger(index, uid).
func recorded(aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule, o wrapupv1alpha1.Outcome, at time.Time) *wrapupv1alpha1.CompletionRecord {
	return util.MakeRecord(aw, rule, o, at).Trigger(jobRef.Index, jobUID).ResourceVersion("1").Obj()
}

// withRecord is in with the run's stored CompletionRecord cr.
func withRecord(in Input, cr *wrapupv1alpha1.CompletionRecord) Input {
	in.Record = cr
	return in
}

// stored is cr as the API server answers it: through JSON (times to the
// microsecond), under the resourceVersion rv.
func stored(t *testing.T, cr *wrapupv1alpha1.CompletionRecord, rv string) *wrapupv1alpha1.CompletionRecord {
	t.Helper()
	b, err := json.Marshal(cr)
	if err != nil {
		t.Fatal(err)
	}
	var out wrapupv1alpha1.CompletionRecord
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	out.ResourceVersion = rv
	return &out
}
