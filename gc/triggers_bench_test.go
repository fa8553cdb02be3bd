package gc

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// mapTriggers is a trigger cache over a map, for benchmarks.
type mapTriggers map[string]*unstructured.Unstructured

func (m mapTriggers) Ensure(triggers.Owner, schema.GroupKind, celpolicies.Fields) error { return nil }
func (m mapTriggers) Keep(types.NamespacedName, []schema.GroupKind)                     {}
func (m mapTriggers) Get(gk schema.GroupKind, ns, name string, _ celpolicies.Fields) (*unstructured.Unstructured, bool, error) {
	if o, ok := m[gk.String()+"/"+ns+"/"+name]; ok {
		return o.DeepCopy(), true, nil
	}
	return nil, true, nil
}
func (m mapTriggers) Kind(schema.GroupKind) decision.Kind {
	return decision.Kind{State: decision.KindWatched}
}
func (m mapTriggers) Resource(gk schema.GroupKind) (schema.GroupVersionResource, bool) {
	return schema.GroupVersionResource{Group: gk.Group, Version: "v1", Resource: "jobs"}, true
}
func (m mapTriggers) Wait(schema.GroupKind, types.NamespacedName) {}

type nopCounter struct{}

func (nopCounter) Add(context.Context, string, wrapupv1alpha1.Outcome) {}

// BenchmarkCompletion is the cost of one completion, from the reconcile
// that finds the triggers finished to the deletion: with one trigger
// (policy One) and with 8 harness Jobs (policy All), with the run's
// CompletionRecord written and without. It reports the API
// reads and writes and the trigger evaluations per completion beside the
// time and allocations. The API server is controller-runtime's fake
// client: the counts are the real reconciler's, the time is the decision's
// and the client's, not a network's.
func BenchmarkCompletion(b *testing.B) {
	for _, n := range []int{1, 8} {
		for _, history := range []bool{true, false} {
			b.Run(fmt.Sprintf("triggers=%d/history=%v", n, history), func(b *testing.B) { benchCompletion(b, n, history) })
		}
	}
}

func benchCompletion(b *testing.B, n int, history bool) {
	scheme := apiruntime.NewScheme()
	for _, add := range []func(*apiruntime.Scheme) error{corev1.AddToScheme, awv1beta2.AddToScheme, wrapupv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			b.Fatal(err)
		}
	}
	policy := wrapupv1alpha1.TriggerPolicyOne
	if n > 1 {
		policy = wrapupv1alpha1.TriggerPolicyAll
	}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "harness"},
		Spec: wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job", Policy: policy},
			History: wrapupv1alpha1.HistorySpec{Disabled: !history}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	var reads, writes atomic.Int64
	counting := interceptor.Funcs{
		Get: func(ctx context.Context, c ctrl.WithWatch, key ctrl.ObjectKey, obj ctrl.Object, opts ...ctrl.GetOption) error {
			reads.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c ctrl.WithWatch, list ctrl.ObjectList, opts ...ctrl.ListOption) error {
			reads.Add(1)
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.CreateOption) error {
			writes.Add(1)
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, patch ctrl.Patch, opts ...ctrl.PatchOption) error {
			writes.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.DeleteOption) error {
			writes.Add(1)
			return c.Delete(ctx, obj, opts...)
		},
	}
	fc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rule, ns).Build()
	api := interceptor.NewClient(fc.(ctrl.WithWatch), counting)
	triggers := mapTriggers{}
	r := &appWrapperReconciler{Cache: fc, Writer: api, APIReader: &unstructuredReader{api, triggers, &reads}, Recorder: events.NewFakeRecorder(1 << 20),
		Policies: &celpolicies.Cache{}, Triggers: triggers, Assign: newAssignments(), Counters: nopCounter{}}
	r.defaults()
	var evaluations int64
	r.observe = func(_ string, _ decision.Input, d decision.Decision) {
		if d.Evaluation != nil {
			evaluations++
		}
		for _, c := range d.Candidates {
			if c.Evaluation != nil {
				evaluations++
			}
		}
	}
	ctx := context.Background()
	reads.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		aw := completionAW(b, i, n, triggers)
		if err := fc.Create(ctx, aw); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: ctrl.ObjectKeyFromObject(aw)}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := fc.Get(ctx, ctrl.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{}); err == nil {
			b.Fatalf("the AppWrapper %s is not deleted", aw.Name)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(reads.Load())/float64(b.N), "reads/op")
	b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
	b.ReportMetric(float64(evaluations)/float64(b.N), "evaluations/op")
}

// unstructuredReader reads AppWrappers, rules and Namespaces from the
// client, and Jobs from the trigger map (the fake client has no Job type),
// counting each read as the client does.
type unstructuredReader struct {
	ctrl.Client
	triggers mapTriggers
	reads    *atomic.Int64
}

func (u *unstructuredReader) Get(ctx context.Context, key ctrl.ObjectKey, obj ctrl.Object, opts ...ctrl.GetOption) error {
	if o, ok := obj.(*unstructured.Unstructured); ok {
		u.reads.Add(1)
		live, _, _ := u.triggers.Get(o.GroupVersionKind().GroupKind(), key.Namespace, key.Name, celpolicies.Fields{})
		if live == nil {
			return fmt.Errorf("no trigger %s", key)
		}
		live.DeepCopyInto(o)
		return nil
	}
	return u.Client.Get(ctx, key, obj, opts...)
}

// completionAW is a Running AppWrapper "run-i" with n finished harness
// Jobs, which it puts in triggers.
func completionAW(b *testing.B, i, n int, triggers mapTriggers) *awv1beta2.AppWrapper {
	name := fmt.Sprintf("run-%d", i)
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"),
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))}}
	for j := range n {
		jn := fmt.Sprintf("%s-h%d", name, j)
		raw, _ := json.Marshal(map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": jn}})
		aw.Spec.Components = append(aw.Spec.Components, awv1beta2.AppWrapperComponent{Template: apiruntime.RawExtension{Raw: raw}})
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "status": map[string]any{
			"succeeded": int64(1),
			"conditions": []any{
				map[string]any{"type": "SuccessCriteriaMet", "status": "True"},
				map[string]any{"type": "Complete", "status": "True", "message": "done"},
			}}}}
		u.SetName(jn)
		u.SetNamespace("ns")
		u.SetUID(types.UID(jn + "-uid"))
		u.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: name})
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: name, UID: aw.UID, Controller: ptr.To(true)}})
		triggers["Job.batch/ns/"+jn] = u
	}
	aw.Status.Phase = awv1beta2.AppWrapperRunning
	return aw
}
