package gc

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Many outcomes of one rule finished together cost one status write.
func TestRuleCountersBatch(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := wrapupv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
	var updates atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rule).WithStatusSubresource(rule).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			updates.Add(1)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	rc := NewRuleCounters(c, c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rc.Start(ctx); close(done) }()
	for i := 0; i < 7; i++ {
		rc.Add(ctx, "r", wrapupv1alpha1.OutcomeSucceeded)
	}
	rc.Add(ctx, "r", wrapupv1alpha1.OutcomeFailed)
	got := &wrapupv1alpha1.CompletionRule{}
	gomega.NewWithT(t).Eventually(func() int64 {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(rule), got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Succeeded
	}, 5*time.Second, 20*time.Millisecond).Should(gomega.Equal(int64(7)))
	cancel()
	<-done
	if got.Status.Succeeded != 7 || got.Status.Failed != 1 {
		t.Errorf("counters = %d succeeded, %d failed; want 7 and 1", got.Status.Succeeded, got.Status.Failed)
	}
	if n := updates.Load(); n != 1 {
		t.Errorf("%d status writes, want 1", n)
	}
}

// What is counted when the manager stops is still written.
func TestRuleCountersFlushOnStop(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := wrapupv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rule).WithStatusSubresource(rule).Build()
	rc := NewRuleCounters(c, c)
	rc.incs <- counterInc{rule: "r", outcome: wrapupv1alpha1.OutcomeFailed}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rc.Start(ctx); close(done) }()
	gomega.NewWithT(t).Eventually(func() int { return len(rc.incs) }, 5*time.Second, time.Millisecond).Should(gomega.BeZero())
	cancel()
	<-done
	got := &wrapupv1alpha1.CompletionRule{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(rule), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Failed != 1 {
		t.Errorf("failed = %d after stop, want 1", got.Status.Failed)
	}
}
