package gc

import (
	"context"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
	"github.com/wrapup-dev/wrapup/test/util"
)

func TestAssignments(t *testing.T) {
	a := newAssignments()
	x, y := types.NamespacedName{Namespace: "n", Name: "x"}, types.NamespacedName{Namespace: "n", Name: "y"}
	a.Set(x, "r1")
	a.Set(y, "r1")
	a.Set(x, "r1") // no change
	if got := a.Count("r1"); got != 2 {
		t.Fatalf("Count(r1) = %d, want 2", got)
	}
	a.Set(x, "r2")
	a.Set(y, "")
	if a.Count("r1") != 0 || a.Count("r2") != 1 {
		t.Fatalf("counts r1=%d r2=%d, want 0 and 1", a.Count("r1"), a.Count("r2"))
	}
	// Each change notifies the rules it touched: r1 (x, y, x moved away, y gone), r2 once.
	if got := len(a.events); got != 5 {
		t.Errorf("%d rule notifications, want 5", got)
	}
}

// claimRecorder is a trigger cache that records the claims made on it.
type claimRecorder struct {
	mapTriggers
	claims map[triggers.Owner]bool
}

func (c *claimRecorder) Ensure(o triggers.Owner, _ schema.GroupKind, _ celpolicies.Fields) error {
	c.claims[o] = true
	return nil
}

func (c *claimRecorder) Keep(key types.NamespacedName, kinds []schema.GroupKind) {
	for o := range c.claims {
		if o.AppWrapper == key && !slices.Contains(kinds, o.Kind) {
			delete(c.claims, o)
		}
	}
}

// TestClaimsOfSeveralKinds: an AppWrapper whose annotated triggers are of
// two kinds claims a watch on each, keeps those its decision still reads,
// and drops the rest when it is forgotten, remembering none of them.
func TestClaimsOfSeveralKinds(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "checker"}}
	aw := util.MakeAppWrapper("run", "ns").Trigger(util.MakeJob("load").Obj()).Trigger(pod).Obj()
	key := types.NamespacedName{Namespace: "ns", Name: "run"}
	jobGK, podGK := schema.GroupKind{Group: "batch", Kind: "Job"}, schema.GroupKind{Kind: "Pod"}
	tc := &claimRecorder{mapTriggers: mapTriggers{}, claims: map[triggers.Owner]bool{}}
	r := &appWrapperReconciler{Triggers: tc, Assign: newAssignments()}
	mem := &awMemory{}
	v := &cacheView{r: r, key: key, mem: mem}
	for _, gk := range []schema.GroupKind{jobGK, podGK} {
		if _, err := v.Trigger(context.Background(), aw, decision.Ref{Kind: gk, Name: "x", Annotated: true}, celpolicies.Fields{}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[triggers.Owner]bool{triggers.AppWrapperOwner(key, jobGK): true, triggers.AppWrapperOwner(key, podGK): true}
	if !maps.Equal(tc.claims, want) {
		t.Fatalf("claims %v, want %v", tc.claims, want)
	}
	r.remember(context.Background(), decision.Input{AppWrapper: aw}, decision.Decision{Remember: decision.Remember{Claims: []schema.GroupKind{jobGK}}}, mem)
	if want := map[triggers.Owner]bool{triggers.AppWrapperOwner(key, jobGK): true}; !maps.Equal(tc.claims, want) {
		t.Fatalf("after a decision that reads the Job alone: claims %v, want %v", tc.claims, want)
	}
	if !mem.empty() {
		t.Errorf("the memory holds %+v; the claims need no memory", *mem)
	}
	r.forget(key, mem)
	if len(tc.claims) != 0 {
		t.Errorf("claims %v after the AppWrapper was forgotten, want none", tc.claims)
	}
}

// TestReconcileFuncNamesReconcile: ReconcileFunc is the runtime's name of
// the AppWrapper controller's Reconcile (a rename would leave the
// benchmark counting no request on the completion path).
func TestReconcileFuncNamesReconcile(t *testing.T) {
	if got := runtime.FuncForPC(reflect.ValueOf((*appWrapperReconciler).Reconcile).Pointer()).Name(); got != ReconcileFunc {
		t.Errorf("Reconcile is %q, ReconcileFunc says %q", got, ReconcileFunc)
	}
}

// TestReadyChanged: a rule's update wakes its AppWrappers when its Ready
// condition appears, goes, or changes status or reason, and only then.
func TestReadyChanged(t *testing.T) {
	rule := func(conds ...metav1.Condition) *wrapupv1alpha1.CompletionRule {
		return &wrapupv1alpha1.CompletionRule{Status: wrapupv1alpha1.CompletionRuleStatus{Conditions: conds}}
	}
	ready := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: wrapupv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name     string
		old, new *wrapupv1alpha1.CompletionRule
		want     bool
	}{
		{"none to none", rule(), rule(), false},
		{"appears", rule(), rule(ready(metav1.ConditionFalse, "TriggerKindNotFound", "")), true},
		{"goes", rule(ready(metav1.ConditionTrue, "Compiled", "")), rule(), true},
		{"status", rule(ready(metav1.ConditionFalse, "Compiled", "")), rule(ready(metav1.ConditionTrue, "Compiled", "")), true},
		{"reason", rule(ready(metav1.ConditionFalse, "TriggerKindNotFound", "")), rule(ready(metav1.ConditionFalse, "TriggerKindNotWatchable", "")), true},
		{"message only", rule(ready(metav1.ConditionTrue, "Compiled", "a")), rule(ready(metav1.ConditionTrue, "Compiled", "b")), false},
	} {
		if got := readyChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
