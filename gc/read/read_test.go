package read

import (
	"context"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// mkView is a view of a MultiKueue manager whose one AppWrapper is
// dispatched to a worker that holds its copy; its trigger is not read.
type mkView struct {
	aw, copy *awv1beta2.AppWrapper
	rule     *wrapupv1alpha1.CompletionRule
}

func (v *mkView) Kind(schema.GroupKind) decision.Kind {
	return decision.Kind{State: decision.KindWatched}
}
func (v *mkView) Trigger(_ context.Context, _ *awv1beta2.AppWrapper, ref decision.Ref, _ celpolicies.Fields) (decision.Trigger, error) {
	return decision.Trigger{Ref: ref, State: decision.TriggerAbsent}, nil
}
func (v *mkView) AppWrapper(context.Context, types.NamespacedName) (*awv1beta2.AppWrapper, error) {
	return v.aw, nil
}
func (v *mkView) Record(context.Context, *awv1beta2.AppWrapper) (*wrapupv1alpha1.CompletionRecord, error) {
	return nil, nil
}
func (v *mkView) Rules(context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
	return []wrapupv1alpha1.CompletionRule{*v.rule}, nil
}
func (v *mkView) Namespace(context.Context, string) (*corev1.Namespace, error) { return nil, nil }
func (v *mkView) RuleKind(*wrapupv1alpha1.CompletionRule, schema.GroupKind) decision.Kind {
	return decision.Kind{State: decision.KindWatched}
}
func (v *mkView) Worker(context.Context, types.NamespacedName, *awv1beta2.AppWrapper) (*decision.Worker, TriggerView) {
	return &decision.Worker{Cluster: "worker-1", Workload: "wl", AppWrapper: v.copy}, v
}
func (v *mkView) AppWrapperVariable(_ context.Context, aw *awv1beta2.AppWrapper, _ *celpolicies.Policy) (map[string]any, error) {
	return AppWrapperMap(aw)
}

// A rule that reads appWrapper.status, on a MultiKueue manager, reads the
// status of the copy that runs the AppWrapper on its worker, as every
// decision does, not the manager's mirror (late, or of an earlier copy).
func TestAppWrapperVariableUnderMultiKueue(t *testing.T) {
	bench := util.MakeObject("batch/v1", "Job", "bench").Obj()
	aw := util.MakeAppWrapper("run", "ns").UID("aw-uid").ManagedBy(kueue.MultiKueueControllerName).Component(bench, nil).
		Phase(awv1beta2.AppWrapperFailed).Retries(3).Condition(awv1beta2.ResourcesDeployed, metav1.ConditionTrue, "x", time.Time{}).Obj()
	cp := util.MakeAppWrapper("run", "ns").UID("copy-uid").Label(decision.PrebuiltWorkloadLabel, "wl").Label(kueue.MultiKueueOriginLabel, "multikueue").
		Component(bench, nil).
		Phase(awv1beta2.AppWrapperRunning).Retries(1).Condition(awv1beta2.ResourcesDeployed, metav1.ConditionTrue, "x", time.Time{}).Obj()
	rule := util.MakeRule("jobs").TriggerKind("batch", "Job", "").Success("appWrapper.status.resettingCount > 2").Obj()
	v := &mkView{aw: aw, copy: cp, rule: rule}
	in, err := Gather(context.Background(), v, &celpolicies.Cache{}, types.NamespacedName{Namespace: "ns", Name: "run"}, nil, decision.Input{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := in.AppWrapperVariable["status"].(map[string]any)
	if st["phase"] != string(awv1beta2.AppWrapperRunning) || st["resettingCount"] != int64(1) {
		t.Errorf("appWrapper.status is %v, want the copy's (Running, 1 retry), not the manager's mirror (Failed, 3)", st)
	}
}

// AheadOf reads ahead the triggers a decision on the caches read of this
// cluster, by the rules and the Namespace it read them by, and never a
// worker's (which are read through the worker's own view) nor anything
// when it read no trigger.
func TestAheadOf(t *testing.T) {
	gk := schema.GroupKind{Group: "batch", Kind: "Job"}
	ref := decision.Ref{Kind: gk, Version: "v1", Name: "bench", Template: "bench"}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs", UID: "uid-jobs", ResourceVersion: "7"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", ResourceVersion: "3"}}
	in := decision.Input{Rules: []decision.Rule{{Rule: rule}}, Namespace: ns, Triggers: []decision.Trigger{{Ref: ref, State: decision.TriggerPresent}}}
	a := AheadOf(in)
	if a == nil || len(a.Refs) != 1 || a.Refs[0] != ref || a.Rules[rule.UID] != "7" || len(a.Rules) != 1 || a.Namespace != "3" {
		t.Fatalf("AheadOf a decision on this cluster's trigger: %+v", a)
	}
	worker := in
	worker.Worker = &decision.Worker{Cluster: "worker-1"}
	if a := AheadOf(worker); a != nil {
		t.Fatalf("AheadOf a decision on a worker's trigger reads ahead %+v", a)
	}
	none := in
	none.Triggers = nil
	if a := AheadOf(none); a != nil {
		t.Fatalf("AheadOf a decision that read no trigger reads ahead %+v", a)
	}
}
