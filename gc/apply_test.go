package gc

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

func jobComponent(t *testing.T, apiVersion, kind, name string) awv1beta2.AppWrapperComponent {
	raw, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}})
	if err != nil {
		t.Fatal(err)
	}
	return awv1beta2.AppWrapperComponent{Template: runtime.RawExtension{Raw: raw}}
}

// A Job completes under a rule that deletes 3 s after the finish; the
// CompletionRecord's create fails twice (a transient API error). apply
// records the outcome, and asks to be called again when the deletion is due
// (or when the CompletionRecord is tried again, whichever is later), never
// a minute later.
func TestHistoryRetryAfterWriteKeepsTheTTLRequeue(t *testing.T) {
	ctx := context.Background()
	fc := historyBed(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	aw := &awv1beta2.AppWrapper{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid", Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec:       awv1beta2.AppWrapperSpec{Components: []awv1beta2.AppWrapperComponent{jobComponent(t, "batch/v1", "Job", "bench")}},
		Status:     awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperRunning},
	}
	if err := fc.Create(ctx, aw); err != nil {
		t.Fatal(err)
	}
	failures := 2
	w := interceptor.NewClient(fc, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*wrapupv1alpha1.CompletionRecord); ok && failures > 0 {
				failures--
				return errors.New("etcdserver: request timed out")
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs", UID: "uid-jobs"}}
	rule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}
	rule.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](3)}
	rule.Status.DeletingSince = decision.DeletingSince(rule, now.Add(-30*24*time.Hour))
	p, err := celpolicies.Compile(&rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "status": map[string]any{"conditions": []any{
		map[string]any{"type": "SuccessCriteriaMet", "status": "True"}, map[string]any{"type": "Complete", "status": "True"}}}}}
	job.SetName("bench")
	job.SetNamespace("ns")
	job.SetUID("job-uid")
	job.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: "run", UID: "aw-uid", Controller: ptr.To(true)}})
	gk := schema.GroupKind{Group: "batch", Kind: "Job"}
	ref := decision.Ref{Index: 0, Kind: gk, Version: "v1", Name: "bench", Template: "bench"}
	cur := &awv1beta2.AppWrapper{}
	if err := fc.Get(ctx, client.ObjectKeyFromObject(aw), cur); err != nil {
		t.Fatal(err)
	}
	fin := decision.Input{Now: now, AppWrapper: cur, Rules: []decision.Rule{{Rule: rule, Policy: p}},
		Triggers:  []decision.Trigger{{Ref: ref, State: decision.TriggerPresent, Object: job}},
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
		Kinds:     map[schema.GroupKind]decision.Kind{gk: {State: decision.KindWatched}}}
	fd := decision.Decide(ctx, fin)
	if fd.Write == nil || fd.Verdict != decision.VerdictDeleteAfterTTL {
		t.Fatalf("setup: %s (%s), write %v", fd.Verdict, fd.Reason, fd.Write != nil)
	}
	r := &appWrapperReconciler{Cache: fc, Writer: w, APIReader: fc, Recorder: events.NewFakeRecorder(64), Counters: nopCounter{}}
	var mem awMemory
	res, err := r.apply(ctx, fd, fin, fd, true, &mem)
	t.Logf("fresh decision: %s, requeue %s; apply: %+v, %v", fd.Verdict, fd.Requeue, res, err)
	if res.RequeueAfter == 0 || res.RequeueAfter > max(fd.Requeue, historyRetry) {
		t.Errorf("apply asks to be called again in %s; the deletion is due in %s, the CompletionRecord tried again in %s", res.RequeueAfter, fd.Requeue, historyRetry)
	}
}
