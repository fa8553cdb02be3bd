package gc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// Unit tests of the trigger watches against client-go's fake dynamic
// client and fake discovery: what they do when discovery fails, when a
// kind may not be listed, and when an informer lists.

var (
	jobsGVR = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	jobGK   = schema.GroupKind{Group: "batch", Kind: "Job"}
)

type watchesBed struct {
	w         *Watches
	dyn       *dynamicfake.FakeDynamicClient
	disc      *fakediscovery.FakeDiscovery
	mu        sync.Mutex
	discovery error // what discovery answers; nil for the resources
	calls     atomic.Int32
	cancel    context.CancelFunc
}

func newWatchesBed(t *testing.T) *watchesBed {
	t.Helper()
	b := &watchesBed{}
	b.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{jobsGVR: "JobList"})
	b.disc = &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "batch/v1", APIResources: []metav1.APIResource{{Name: "jobs", Kind: "Job", Namespaced: true}},
	}}}}
	b.disc.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		b.calls.Add(1)
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.discovery != nil {
			return true, nil, b.discovery
		}
		return false, nil, nil
	})
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "batch", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, apimeta.RESTScopeNamespace)
	b.w = NewWatches(b.dyn, mapper, b.disc)
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = b.w.Start(ctx) }()
	// Stopped before the next test's bed starts: they share the metrics.
	t.Cleanup(func() { cancel(); <-stopped })
	return b
}

func (b *watchesBed) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.discovery = err
}

// A transient discovery error (an API server restarting) says nothing of
// whether a kind is served: the informer keeps running. Only a definite
// "not served" stops it, and tells the rules that claim it.
func TestWatchesRecheckStopsOnlyOnADefiniteAnswer(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	g.Expect(b.w.Ensure(RuleOwner("jobs"), jobGK, celpolicies.FieldsOf("status"))).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.w.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))

	b.fail(apierrors.NewServiceUnavailable("restarting"))
	g.Expect(b.w.Recheck("jobs.batch")).To(gomega.BeEmpty())
	b.fail(errors.New("connection refused"))
	g.Expect(b.w.Recheck("jobs.batch")).To(gomega.BeEmpty())
	g.Expect(b.w.Kinds()).To(gomega.ConsistOf(jobGK), "a failed discovery request stopped the informer")

	b.fail(nil)
	b.disc.Lock()
	b.disc.Resources = nil // the CRD is gone: its group version is not found
	b.disc.Unlock()
	g.Expect(b.w.Recheck("jobs.batch")).To(gomega.ConsistOf(jobGK))
	g.Expect(b.w.Kinds()).To(gomega.BeEmpty())
	g.Expect(b.w.Kind(jobGK).State).To(gomega.Equal(decision.KindNotServed))
	g.Eventually(b.w.Gone()).Should(gomega.Receive(gomega.HaveField("Object.GetName()", "jobs")))
}

// A CRD event rechecks only the informers of the kinds that CRD serves: a
// CRD of another group costs no discovery request.
func TestWatchesRecheckIsFilteredByCRD(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	g.Expect(b.w.Ensure(RuleOwner("jobs"), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	before := b.calls.Load()
	g.Expect(b.w.Recheck("rayjobs.ray.io")).To(gomega.BeEmpty())
	g.Expect(b.calls.Load()).To(gomega.Equal(before))
}

// An AppWrapper that read a kind before its informer listed gets an event
// once it has, however the list's events interleaved with its reconcile.
func TestWatchesAnnounceTheFirstList(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	release := make(chan struct{})
	b.dyn.PrependReactor("list", "jobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	g.Expect(b.w.Ensure(RuleOwner("jobs"), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	g.Expect(b.w.Kind(jobGK).State).To(gomega.Equal(decision.KindPending))
	_, synced, err := b.w.Get(jobGK, "ns", "bench", celpolicies.Fields{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(synced).To(gomega.BeFalse())
	waiter := types.NamespacedName{Namespace: "ns", Name: "run"}
	b.w.Wait(jobGK, waiter)
	g.Consistently(b.w.Events(), 200*time.Millisecond).ShouldNot(gomega.Receive())
	g.Expect(syncedSeries("Job.batch")).To(gomega.Equal(ptr.To(0.0)), "wrapup_trigger_informer_synced before the first list")
	close(release)
	g.Eventually(b.w.Events(), 5*time.Second).Should(gomega.Receive(gomega.HaveField("Object.GetName()", "run")))
	g.Expect(b.w.Kind(jobGK).State).To(gomega.Equal(decision.KindWatched))
	g.Expect(syncedSeries("Job.batch")).To(gomega.Equal(ptr.To(1.0)), "wrapup_trigger_informer_synced after the first list")
}

// A kind wrapup may not list is not watchable: its owners are told, and
// the state says why, instead of a silent "not synced" forever.
func TestWatchesForbiddenKind(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	b.dyn.PrependReactor("list", "jobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", errors.New("RBAC"))
	})
	owner := types.NamespacedName{Namespace: "ns", Name: "run"}
	g.Expect(b.w.Ensure(AppWrapperOwner(owner), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.w.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindNotWatchable))
	g.Expect(b.w.Kind(jobGK).Message).To(gomega.ContainSubstring("forbidden"))
	g.Eventually(b.w.Events(), 5*time.Second).Should(gomega.Receive(gomega.HaveField("Object.GetName()", "run")))
	g.Expect(b.w.UnwatchableClaims(func(types.NamespacedName) bool { return true })).To(gomega.ConsistOf(gomega.ContainSubstring("ns/run: Job.batch")))
	g.Expect(syncedSeries("Job.batch")).To(gomega.Equal(ptr.To(0.0)), "wrapup_trigger_informer_synced of a kind it may not list: a series at 0, for the alert to see")
}

// A slow discovery request (Ensure of a kind) holds up no reader of the
// caches.
func TestWatchesDiscoveryOutsideTheLock(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.disc.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(started) })
		<-release
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { done <- b.w.Ensure(RuleOwner("jobs"), jobGK, celpolicies.Fields{}) }()
	<-started
	read := make(chan struct{})
	go func() {
		b.w.Kind(jobGK)
		_, _, _ = b.w.Get(jobGK, "ns", "x", celpolicies.Fields{})
		b.w.Release(AppWrapperOwner(types.NamespacedName{Namespace: "ns", Name: "other"}))
		close(read)
	}()
	g.Eventually(read, 2*time.Second).Should(gomega.BeClosed(), "readers waited for discovery")
	close(release)
	g.Eventually(done, 5*time.Second).Should(gomega.Receive(gomega.BeNil()))
}

// TestClaimOwnersOfSeveralKinds: an AppWrapper whose annotated triggers
// are of two kinds owns a watch on each, and each owner names it.
func TestClaimOwnersOfSeveralKinds(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "checker"}}
	aw := util.MakeAppWrapper("run", "ns").Trigger(util.MakeJob("load").Obj()).Trigger(pod).Obj()
	key := types.NamespacedName{Namespace: "ns", Name: "run"}
	job, podOwner := claimOwner(key, aw, schema.GroupKind{Group: "batch", Kind: "Job"}), claimOwner(key, aw, schema.GroupKind{Kind: "Pod"})
	if job != AppWrapperOwner(key) || podOwner == job {
		t.Fatalf("owners %v and %v, want the AppWrapper's own for the first kind and another for the second", job, podOwner)
	}
	for _, o := range []Owner{job, podOwner} {
		if o.Rule != "" || o.AppWrapper != key {
			t.Errorf("owner %v names %v, want %v", o, o.AppWrapper, key)
		}
	}
}

// syncedSeries is the value of wrapup_trigger_informer_synced for kind, or
// nil if it has no series (reading it does not make one).
func syncedSeries(kind string) *float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { informersSyncedGauge.Collect(ch); close(ch) }()
	var found *float64
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "kind" && l.GetValue() == kind {
				v := d.GetGauge().GetValue()
				found = &v
			}
		}
	}
	return found
}

func ptrTo[T any](v T) *T { return &v }

// A failed discovery request while a kind is first claimed (a timeout, an
// API server restarting) is an error to try again on, never "not served":
// a rule would report TriggerKindNotFound and its AppWrappers would wait
// for a CRD that is there. A definite answer is.
func TestWatchesEnsureNotServedOnlyOnADefiniteAnswer(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	b.fail(apierrors.NewServiceUnavailable("restarting"))
	err := b.w.Ensure(RuleOwner("jobs"), jobGK, celpolicies.FieldsOf("status"))
	var nf *KindNotFoundError
	g.Expect(err).To(gomega.HaveOccurred())
	g.Expect(errors.As(err, &nf)).To(gomega.BeFalse(), "a failed discovery request reported the kind as not served: %v", err)
	g.Expect(b.w.Kind(jobGK).State).To(gomega.Equal(decision.KindPending))

	b.fail(nil)
	g.Expect(b.w.Ensure(RuleOwner("jobs"), jobGK, celpolicies.FieldsOf("status"))).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.w.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))

	other := schema.GroupKind{Group: "example.com", Kind: "EvalRun"}
	err = b.w.Ensure(RuleOwner("evals"), other, celpolicies.Fields{})
	g.Expect(errors.As(err, &nf)).To(gomega.BeTrue(), "a kind the REST mapper does not know: %v", err)
	g.Expect(b.w.Kind(other).State).To(gomega.Equal(decision.KindNotServed))
}
