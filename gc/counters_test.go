package gc

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Many outcomes of one rule finished together cost one status write.
func TestRuleCountersBatch(t *testing.T) {
	var updates atomic.Int32
	c, rc, stop := runCounters(t, func(n int32, write func() error) error {
		updates.Store(n)
		return write()
	})
	for i := 0; i < 7; i++ {
		rc.Add(context.Background(), "r", wrapupv1alpha1.OutcomeSucceeded)
	}
	rc.Add(context.Background(), "r", wrapupv1alpha1.OutcomeFailed)
	got := &wrapupv1alpha1.CompletionRule{}
	gomega.NewWithT(t).Eventually(func() int64 {
		if err := c.Get(context.Background(), types.NamespacedName{Name: "r"}, got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Succeeded
	}, 5*time.Second, 20*time.Millisecond).Should(gomega.Equal(int64(7)))
	stop()
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
	rc := newRuleCounters(c, c)
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

// countersWithFaults runs ruleCounters (see runCounters), adds three
// successes of rule "r", and returns the client and a stop function.
func countersWithFaults(t *testing.T, updateFault func(n int32, write func() error) error) (client.Client, func()) {
	t.Helper()
	c, rc, stop := runCounters(t, updateFault)
	for i := 0; i < 3; i++ {
		rc.Add(context.Background(), "r", wrapupv1alpha1.OutcomeSucceeded)
	}
	return c, stop
}

// runCounters runs ruleCounters on a fake client holding rule "r", whose
// status writes (the nth one) go through updateFault first.
func runCounters(t *testing.T, updateFault func(n int32, write func() error) error) (client.Client, *ruleCounters, func()) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := wrapupv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
	var updates atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rule).WithStatusSubresource(rule).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return updateFault(updates.Add(1), func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		}}).Build()
	rc := newRuleCounters(c, c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rc.Start(ctx); close(done) }()
	return c, rc, func() { cancel(); <-done }
}

func succeededCount(t *testing.T, c client.Client) int64 {
	t.Helper()
	got := &wrapupv1alpha1.CompletionRule{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: "r"}, got); err != nil {
		t.Fatal(err)
	}
	return got.Status.Succeeded
}

var errRefused = &url.Error{Op: "Put", URL: "https://127.0.0.1:6443", Err: &net.OpError{Op: "dial", Net: "tcp",
	Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}

var errLost = &url.Error{Op: "Put", URL: "https://127.0.0.1:6443", Err: errors.New("http2: client connection lost")}

// A write the API server did not get (it is down) is made again later.
func TestRuleCountersRetryRefusedWrite(t *testing.T) {
	c, stop := countersWithFaults(t, func(n int32, write func() error) error {
		if n <= 2 {
			return errRefused
		}
		return write()
	})
	defer stop()
	gomega.NewWithT(t).Eventually(func() int64 { return succeededCount(t, c) }, 10*time.Second, 20*time.Millisecond).Should(gomega.Equal(int64(3)))
}

// A write whose response is lost after the server applied it is not
// applied again.
func TestRuleCountersLostResponseApplied(t *testing.T) {
	var settled atomic.Bool
	c, stop := countersWithFaults(t, func(n int32, write func() error) error {
		if n == 1 {
			if err := write(); err != nil {
				return err
			}
			return errLost
		}
		settled.Store(true)
		return write()
	})
	g := gomega.NewWithT(t)
	g.Eventually(func() int64 { return succeededCount(t, c) }, 5*time.Second, 20*time.Millisecond).Should(gomega.Equal(int64(3)))
	// Stopping flushes what is left: it finds the counters as the lost
	// write set them, and writes nothing.
	stop()
	g.Expect(settled.Load()).To(gomega.BeFalse(), "a second status write")
	g.Expect(succeededCount(t, c)).To(gomega.Equal(int64(3)))
}

// A write that failed without a word on whether it was applied, and was
// not, is made again.
func TestRuleCountersLostResponseNotApplied(t *testing.T) {
	c, stop := countersWithFaults(t, func(n int32, write func() error) error {
		if n == 1 {
			return errLost
		}
		return write()
	})
	defer stop()
	gomega.NewWithT(t).Eventually(func() int64 { return succeededCount(t, c) }, 10*time.Second, 20*time.Millisecond).Should(gomega.Equal(int64(3)))
}
