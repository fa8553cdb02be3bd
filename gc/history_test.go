package gc

import (
	"context"
	"errors"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
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
		{"a deletion due at the finish, a minute later", decision.Decision{Verdict: decision.VerdictDelete, DueAt: finished}, time.Minute, false},
		{"a deletion due at the finish, past the deadline", decision.Decision{Verdict: decision.VerdictDelete, DueAt: finished}, 3 * time.Minute, true},
		{"a deletion due at the finish, a day later", decision.Decision{Verdict: decision.VerdictDelete, DueAt: finished}, 24 * time.Hour, true},
		{"a deletion due an hour after the finish (its TTL), at the hour", decision.Decision{Verdict: decision.VerdictDelete, DueAt: finished.Add(time.Hour)}, time.Hour, false},
		{"a deletion due an hour after the finish, past its deadline", decision.Decision{Verdict: decision.VerdictDelete, DueAt: finished.Add(time.Hour)}, time.Hour + 3*time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &AppWrapperReconciler{Cache: fc, Writer: refused, APIReader: fc, Recorder: events.NewFakeRecorder(16)}
			in := decision.Input{Now: finished.Add(tc.now), AppWrapper: aw, Rules: []decision.Rule{{Rule: rule}}}
			var mem awMemory
			if got := r.ensureHistory(context.Background(), in, tc.d, rec, &mem, nil); got != tc.delete {
				t.Errorf("ensureHistory = %v, want %v (the deletion may go ahead)", got, tc.delete)
			}
		})
	}
}
