package triggers_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
	"github.com/wrapup-dev/wrapup/gc/triggers/triggerstest"
)

// Unit tests of the trigger watches against client-go's fake dynamic
// client and fake discovery: what they do when discovery fails, when a
// kind may not be listed, and when an informer lists.

var jobGK = triggerstest.JobGK

func newWatchesBed(t *testing.T) *triggerstest.Bed { return triggerstest.NewBed(t, triggers.Options{}) }

// A transient discovery error (an API server restarting) says nothing of
// whether a kind is served: the informer keeps running. Only a definite
// "not served" stops it, and tells the rules that claim it.
func TestWatchesRecheckStopsOnlyOnADefiniteAnswer(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.FieldsOf("status"))).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.W.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))

	b.Fail(apierrors.NewServiceUnavailable("restarting"))
	g.Expect(b.W.Recheck("jobs.batch")).To(gomega.BeEmpty())
	b.Fail(errors.New("connection refused"))
	g.Expect(b.W.Recheck("jobs.batch")).To(gomega.BeEmpty())
	g.Expect(b.W.Kinds()).To(gomega.ConsistOf(jobGK), "a failed discovery request stopped the informer")

	b.Fail(nil)
	b.Disc.Lock()
	b.Disc.Resources = nil // the CRD is gone: its group version is not found
	b.Disc.Unlock()
	g.Expect(b.W.Recheck("jobs.batch")).To(gomega.ConsistOf(jobGK))
	g.Expect(b.W.Kinds()).To(gomega.BeEmpty())
	g.Expect(b.W.Kind(jobGK).State).To(gomega.Equal(decision.KindNotServed))
	g.Eventually(b.W.Gone()).Should(gomega.Receive(gomega.HaveField("Object.GetName()", "jobs")))
}

// A CRD event rechecks only the informers of the kinds that CRD serves: a
// CRD of another group costs no discovery request.
func TestWatchesRecheckIsFilteredByCRD(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	before := b.Calls.Load()
	g.Expect(b.W.Recheck("rayjobs.ray.io")).To(gomega.BeEmpty())
	g.Expect(b.Calls.Load()).To(gomega.Equal(before))
}

// An AppWrapper that read a kind before its informer listed gets an event
// once it has, however the list's events interleaved with its reconcile.
func TestWatchesAnnounceTheFirstList(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	release := make(chan struct{})
	b.Dyn.PrependReactor("list", "jobs", func(clienttesting.Action) (bool, apiruntime.Object, error) {
		<-release
		return false, nil, nil
	})
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	g.Expect(b.W.Kind(jobGK).State).To(gomega.Equal(decision.KindPending))
	_, synced, err := b.W.Get(jobGK, "ns", "bench", celpolicies.Fields{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(synced).To(gomega.BeFalse())
	waiter := types.NamespacedName{Namespace: "ns", Name: "run"}
	b.W.Wait(jobGK, waiter)
	g.Consistently(b.W.Events(), 200*time.Millisecond).ShouldNot(gomega.Receive())
	g.Expect(syncedSeries("Job.batch")).To(gomega.Equal(ptr.To(0.0)), "wrapup_trigger_informer_synced before the first list")
	close(release)
	g.Eventually(b.W.Events(), 5*time.Second).Should(gomega.Receive(gomega.HaveField("Object.GetName()", "run")))
	g.Expect(b.W.Kind(jobGK).State).To(gomega.Equal(decision.KindWatched))
	g.Expect(syncedSeries("Job.batch")).To(gomega.Equal(ptr.To(1.0)), "wrapup_trigger_informer_synced after the first list")
}

// A relist's delete (a tombstone) of a trigger told while a later watched
// delete of its name waits behind it: a rule that reads more claiming the
// kind then (the informer is not replaced), the later delete is still told. With and without UIDs (the fake API server
// gives none).
func TestWatchesTellOfADeleteBehindARelistsTombstone(t *testing.T) {
	for _, uids := range []bool{true, false} {
		t.Run(fmt.Sprintf("uids=%v", uids), func(t *testing.T) {
			g := gomega.NewWithT(t)
			b := triggerstest.NewBed(t, triggers.Options{EventBuffer: 1})
			ctx := context.Background()
			job := func(owner, rv string) *unstructured.Unstructured {
				var uid types.UID
				if uids {
					uid = types.UID(map[string]string{"b": "0b0b0b0b-0000-4000-8000-000000000001", "c": "0c0c0c0c-0000-4000-8000-000000000002"}[owner])
				}
				return benchJob(owner, rv, uid)
			}
			owner := benchOwner(b)
			_, err := b.Dyn.Resource(triggerstest.JobsGVR).Namespace("ns").Create(ctx, job("b", ""), metav1.CreateOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			nOpened, last := fakeWatches(b)
			watchJobs(g, b, nOpened)
			// b's create fills the channel.
			g.Eventually(func() int { return len(b.W.Events()) }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(1))

			// b deleted while the watch is broken; it expires: the relist
			// finds b gone (a tombstone, whose event waits).
			deleteWhileExpired(g, b, nOpened, last, func() bool { return owner() == "" })
			// The name made again for c, and deleted: its events wait
			// behind the tombstone's.
			last().Add(job("c", "10"))
			g.Eventually(owner, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal("c"))
			last().Delete(job("c", "11"))
			g.Eventually(owner, 5*time.Second, 10*time.Millisecond).Should(gomega.BeEmpty())

			var e event.GenericEvent
			g.Eventually(b.W.Events(), 5*time.Second).Should(gomega.Receive(&e))
			g.Expect(e.Object.GetName()).To(gomega.Equal("b"))
			// The tombstone's event takes its place; c's create waits.
			g.Eventually(func() int { return len(b.W.Events()) }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(1))

			claimSpec(g, b, nOpened)
			var got []string
			for !slices.Contains(got, "c") {
				g.Eventually(b.W.Events(), 5*time.Second).Should(gomega.Receive(&e), "events after the create's: %v", got)
				got = append(got, e.Object.GetName())
			}
		})
	}
}

// watchJobs watches Jobs (a rule reading their status) and waits until
// the informer has listed and opened its first watch.
func watchJobs(g *gomega.WithT, b *triggerstest.Bed, opened func() int) {
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.FieldsOf("status"))).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.W.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))
	g.Eventually(opened, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(1))
}

// claimSpec claims Jobs for a rule that reads their spec too, which the
// running informer drops: it is not replaced (no watch is opened), and the
// spec is not read from it.
func claimSpec(g *gomega.WithT, b *triggerstest.Bed, opened func() int) {
	before := opened()
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs-spec"), jobGK, celpolicies.FieldsOf("status", "spec"))).To(gomega.Succeed())
	g.Expect(b.W.Keeps(jobGK, celpolicies.FieldsOf("status", "spec"))).To(gomega.BeFalse())
	_, _, err := b.W.Get(jobGK, "ns", "bench", celpolicies.FieldsOf("status", "spec"))
	g.Expect(err).To(gomega.MatchError(triggers.ErrFieldsNotKept))
	g.Consistently(opened, 200*time.Millisecond, 10*time.Millisecond).Should(gomega.Equal(before), "a watch opened: the informer was replaced")
}

// deleteWhileExpired deletes the Job bench while the informer's watch is
// broken, and ends that watch as expired: the informer lists again, finds
// bench gone (gone says when its store no longer holds it) and watches
// again.
func deleteWhileExpired(g *gomega.WithT, b *triggerstest.Bed, opened func() int, last func() *watch.RaceFreeFakeWatcher, gone func() bool) {
	g.Expect(b.Dyn.Tracker().Delete(triggerstest.JobsGVR, "ns", "bench")).To(gomega.Succeed())
	expire(last())
	g.Eventually(gone, 10*time.Second, 10*time.Millisecond).Should(gomega.BeTrue())
	g.Eventually(opened, 10*time.Second, 10*time.Millisecond).Should(gomega.Equal(2))
}

// benchOwner says whose the Job bench is in the watches' store ("" when
// the store does not hold it).
func benchOwner(b *triggerstest.Bed) func() string {
	return func() string {
		obj, _, _ := b.W.Get(jobGK, "ns", "bench", celpolicies.FieldsOf("status"))
		if obj == nil {
			return ""
		}
		return obj.GetLabels()[awv1beta2.AppWrapperLabel]
	}
}

// expire ends w as the API server ends a watch whose resourceVersion is
// too old: the informer lists again.
func expire(w *watch.RaceFreeFakeWatcher) {
	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"})
}

func benchJob(owner, rv string, uid types.UID) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("batch/v1")
	u.SetKind("Job")
	u.SetNamespace("ns")
	u.SetName("bench")
	u.SetResourceVersion(rv)
	u.SetUID(uid)
	u.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: owner})
	return u
}

// fakeWatches makes the bed's watches of Jobs fake ones the test drives.
func fakeWatches(b *triggerstest.Bed) (opened func() int, last func() *watch.RaceFreeFakeWatcher) {
	var mu sync.Mutex
	var ws []*watch.RaceFreeFakeWatcher
	b.Dyn.PrependWatchReactor("jobs", func(clienttesting.Action) (bool, watch.Interface, error) {
		w := watch.NewRaceFreeFake()
		mu.Lock()
		ws = append(ws, w)
		mu.Unlock()
		return true, w, nil
	})
	return func() int { mu.Lock(); defer mu.Unlock(); return len(ws) },
		func() *watch.RaceFreeFakeWatcher { mu.Lock(); defer mu.Unlock(); return ws[len(ws)-1] }
}

// receiveUntil receives events until one for name, and fails after 5 s
// without one.
func receiveUntil(g *gomega.WithT, w *triggers.Watches, name string) {
	var got []string
	var e event.GenericEvent
	for !slices.Contains(got, name) {
		g.Eventually(w.Events(), 5*time.Second).Should(gomega.Receive(&e), "no event for %s; events: %v", name, got)
		got = append(got, e.Object.GetName())
	}
}

// A relist's delete (a tombstone) while the handler waits, and a rule that
// reads more claiming the kind meanwhile: no watch brought the delete; the
// controller had been told of the trigger, and is told of its delete.
func TestWatchesTellOfARelistsDelete(t *testing.T) {
	g := gomega.NewWithT(t)
	b := triggerstest.NewBed(t, triggers.Options{EventBuffer: 1})
	g.Expect(b.Dyn.Tracker().Create(triggerstest.JobsGVR, benchJob("b", "", "0b0b0b0b-0000-4000-8000-000000000001"), "ns")).To(gomega.Succeed())
	opened, last := fakeWatches(b)
	present := func() bool {
		obj, _, _ := b.W.Get(jobGK, "ns", "bench", celpolicies.FieldsOf("status"))
		return obj != nil
	}
	watchJobs(g, b, opened)
	// The create's event fills the channel.
	g.Eventually(func() int { return len(b.W.Events()) }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(1))

	deleteWhileExpired(g, b, opened, last, func() bool { return !present() })

	claimSpec(g, b, opened)
	var e event.GenericEvent
	g.Eventually(b.W.Events(), 5*time.Second).Should(gomega.Receive(&e)) // the create's
	g.Expect(e.Object.GetName()).To(gomega.Equal("b"))
	receiveUntil(g, b.W, "b")
}

// A relist that finds a trigger's name made again for another AppWrapper
// (an update to the informer) tells the AppWrapper it was of.
func TestWatchesTellOfARelistsTriggerOfAnotherAppWrapper(t *testing.T) {
	g := gomega.NewWithT(t)
	b := triggerstest.NewBed(t, triggers.Options{})
	g.Expect(b.Dyn.Tracker().Create(triggerstest.JobsGVR, benchJob("a", "", "0a0a0a0a-0000-4000-8000-000000000001"), "ns")).To(gomega.Succeed())
	opened, last := fakeWatches(b)
	watchJobs(g, b, opened)
	var e event.GenericEvent
	g.Eventually(b.W.Events(), 5*time.Second).Should(gomega.Receive(&e))
	g.Expect(b.Dyn.Tracker().Delete(triggerstest.JobsGVR, "ns", "bench")).To(gomega.Succeed())
	g.Expect(b.Dyn.Tracker().Create(triggerstest.JobsGVR, benchJob("c", "", "0c0c0c0c-0000-4000-8000-000000000002"), "ns")).To(gomega.Succeed())
	expire(last())
	receiveUntil(g, b.W, "a")
}

// A trigger the store took, and readers saw, whose create and then a
// relist's update to another AppWrapper's object of its name were both
// not told when a rule that reads more claimed the kind: the first
// AppWrapper is told.
func TestWatchesTellOfATriggerTakenAndReplacedByARelist(t *testing.T) {
	g := gomega.NewWithT(t)
	b := triggerstest.NewBed(t, triggers.Options{EventBuffer: 1})
	ctx := context.Background()
	filler := benchJob("z", "", "0f0f0f0f-0000-4000-8000-000000000001")
	filler.SetName("filler")
	_, err := b.Dyn.Resource(triggerstest.JobsGVR).Namespace("ns").Create(ctx, filler, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	opened, last := fakeWatches(b)
	uid := func() types.UID {
		obj, _, _ := b.W.Get(jobGK, "ns", "bench", celpolicies.FieldsOf("status"))
		if obj == nil {
			return ""
		}
		return obj.GetUID()
	}
	watchJobs(g, b, opened)
	// The filler's create fills the channel.
	g.Eventually(func() int { return len(b.W.Events()) }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(1))
	// bench made for a: the store takes it; its create's event waits.
	g.Expect(b.Dyn.Tracker().Create(triggerstest.JobsGVR, benchJob("a", "", "0a0a0a0a-0000-4000-8000-000000000001"), "ns")).To(gomega.Succeed())
	last().Add(benchJob("a", "5", "0a0a0a0a-0000-4000-8000-000000000001"))
	g.Eventually(uid, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(types.UID("0a0a0a0a-0000-4000-8000-000000000001")))
	// Deleted and made again for c while the watch is broken: the
	// relist's update waits too.
	g.Expect(b.Dyn.Tracker().Delete(triggerstest.JobsGVR, "ns", "bench")).To(gomega.Succeed())
	g.Expect(b.Dyn.Tracker().Create(triggerstest.JobsGVR, benchJob("c", "", "0c0c0c0c-0000-4000-8000-000000000002"), "ns")).To(gomega.Succeed())
	expire(last())
	g.Eventually(uid, 10*time.Second, 10*time.Millisecond).Should(gomega.Equal(types.UID("0c0c0c0c-0000-4000-8000-000000000002")))
	g.Eventually(opened, 10*time.Second, 10*time.Millisecond).Should(gomega.Equal(2))

	claimSpec(g, b, opened)
	receiveUntil(g, b.W, "a")
}

// A trigger's AppWrapper changed and changed back, then the trigger
// deleted, while the handler waits: telling of the first change does not
// forget the version back, and, a rule that reads more claiming the kind,
// the AppWrapper of the deleted trigger is told.
func TestWatchesTellOfATriggerBackToItsAppWrapperThenDeleted(t *testing.T) {
	g := gomega.NewWithT(t)
	b := triggerstest.NewBed(t, triggers.Options{EventBuffer: 1})
	const uid = "0a0a0a0a-0000-4000-8000-000000000001"
	g.Expect(b.Dyn.Tracker().Create(triggerstest.JobsGVR, benchJob("a", "", uid), "ns")).To(gomega.Succeed())
	opened, last := fakeWatches(b)
	owner := benchOwner(b)
	watchJobs(g, b, opened)
	// The create's event fills the channel.
	g.Eventually(func() int { return len(b.W.Events()) }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(1))
	last().Modify(benchJob("b", "5", uid))
	last().Modify(benchJob("a", "6", uid))
	g.Eventually(owner, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal("a"))
	// The create's event taken: the first change's event for a takes its
	// place, and its event for b waits.
	var e event.GenericEvent
	g.Eventually(b.W.Events(), 5*time.Second).Should(gomega.Receive(&e))
	g.Eventually(func() int { return len(b.W.Events()) }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(1))
	last().Delete(benchJob("a", "7", uid))
	g.Eventually(owner, 5*time.Second, 10*time.Millisecond).Should(gomega.BeEmpty())
	g.Expect(b.Dyn.Tracker().Delete(triggerstest.JobsGVR, "ns", "bench")).To(gomega.Succeed())
	g.Eventually(b.W.Events(), 5*time.Second).Should(gomega.Receive(&e))
	g.Expect(e.Object.GetName()).To(gomega.Equal("a"))
	// The first change's event for b takes its place (then it is told of),
	// and the change back's waits.
	g.Eventually(func() int { return len(b.W.Events()) }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(1))

	claimSpec(g, b, opened)
	receiveUntil(g, b.W, "a")
}

// Listing says whether a kind's informer lists, and whether a list of it
// failed meanwhile (what the AppWrapper controller's start waits for).
func TestWatchesListing(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	var fail sync.Mutex // held: the lists fail
	fail.Lock()
	release := make(chan struct{})
	b.Dyn.PrependReactor("list", "jobs", func(clienttesting.Action) (bool, apiruntime.Object, error) {
		if fail.TryLock() {
			fail.Unlock()
			<-release
			return false, nil, nil
		}
		return true, nil, apierrors.NewServiceUnavailable("a conversion webhook is down")
	})
	listing, failed := b.W.Listing(jobGK)
	g.Expect([]bool{listing, failed}).To(gomega.Equal([]bool{false, false}), "no informer")
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	g.Eventually(func() []bool { l, f := b.W.Listing(jobGK); return []bool{l, f} }, 5*time.Second, 10*time.Millisecond).
		Should(gomega.Equal([]bool{true, true}), "a list failed")
	g.Expect(b.W.Kind(jobGK).State).To(gomega.Equal(decision.KindPending))
	fail.Unlock()
	close(release)
	g.Eventually(func() decision.KindState { return b.W.Kind(jobGK).State }, 10*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))
	listing, failed = b.W.Listing(jobGK)
	g.Expect([]bool{listing, failed}).To(gomega.Equal([]bool{false, false}), "listed")
}

// Stopped means stopped: the informer of a kind whose events nobody reads
// any more (the AppWrapper controller stopped first, the events channel
// full) gives them up, and Start returns once its goroutines have. An
// informer left blocked would keep its objects reachable, and a handler
// goroutine, for as long as the process runs.
func TestWatchesStopWithEventsUnread(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	ctx := context.Background()
	for i := range 1100 { // more than the events channel holds
		job := &unstructured.Unstructured{}
		job.SetAPIVersion("batch/v1")
		job.SetKind("Job")
		job.SetNamespace("ns")
		job.SetName(fmt.Sprintf("run-%d-bench", i))
		job.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: fmt.Sprintf("run-%d", i)})
		_, err := b.Dyn.Resource(triggerstest.JobsGVR).Namespace("ns").Create(ctx, job, metav1.CreateOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.W.Kind(jobGK).State }, 10*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))
	g.Eventually(func() int { return len(b.W.Events()) }, 10*time.Second, 10*time.Millisecond).Should(gomega.Equal(cap(b.W.Events())), "the events channel full")

	b.Stop()
	stack := make([]byte, 1<<22)
	stack = stack[:runtime.Stack(stack, true)]
	g.Expect(string(stack)).NotTo(gomega.ContainSubstring("(*Watches).enqueue"), "a handler still blocked once the watches stopped")
}

// A kind wrapup may not list is not watchable: its owners are told, and
// the state says why, instead of a silent "not synced" forever.
func TestWatchesForbiddenKind(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	b.Dyn.PrependReactor("list", "jobs", func(clienttesting.Action) (bool, apiruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", errors.New("RBAC"))
	})
	owner := types.NamespacedName{Namespace: "ns", Name: "run"}
	g.Expect(b.W.Ensure(triggers.AppWrapperOwner(owner, jobGK), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.W.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindNotWatchable))
	g.Expect(b.W.Kind(jobGK).Message).To(gomega.ContainSubstring("forbidden"))
	g.Eventually(b.W.Events(), 5*time.Second).Should(gomega.Receive(gomega.HaveField("Object.GetName()", "run")))
	g.Expect(b.W.UnwatchableClaims(func(types.NamespacedName) bool { return true })).To(gomega.ConsistOf(gomega.ContainSubstring("ns/run: Job.batch")))
	g.Expect(syncedSeries("Job.batch")).To(gomega.Equal(ptr.To(0.0)), "wrapup_trigger_informer_synced of a kind it may not list: a series at 0, for the alert to see")
}

// A slow discovery request (Ensure of a kind) holds up no reader of the
// caches.
func TestWatchesDiscoveryOutsideTheLock(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.Disc.PrependReactor("get", "resource", func(clienttesting.Action) (bool, apiruntime.Object, error) {
		once.Do(func() { close(started) })
		<-release
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() { done <- b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.Fields{}) }()
	<-started
	read := make(chan struct{})
	go func() {
		b.W.Kind(jobGK)
		_, _, _ = b.W.Get(jobGK, "ns", "x", celpolicies.Fields{})
		b.W.Release(triggers.AppWrapperOwner(types.NamespacedName{Namespace: "ns", Name: "other"}, jobGK))
		close(read)
	}()
	g.Eventually(read, 2*time.Second).Should(gomega.BeClosed(), "readers waited for discovery")
	close(release)
	g.Eventually(done, 5*time.Second).Should(gomega.Receive(gomega.BeNil()))
}

// syncedSeries is the value of wrapup_trigger_informer_synced for kind, or
// nil if it has no series (reading it does not make one).
func syncedSeries(kind string) *float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return nil
	}
	var found *float64
	for _, f := range families {
		if f.GetName() != "wrapup_trigger_informer_synced" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					v := m.GetGauge().GetValue()
					found = &v
				}
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
	b.Fail(apierrors.NewServiceUnavailable("restarting"))
	err := b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.FieldsOf("status"))
	var nf *triggers.KindNotFoundError
	g.Expect(err).To(gomega.HaveOccurred())
	g.Expect(errors.As(err, &nf)).To(gomega.BeFalse(), "a failed discovery request reported the kind as not served: %v", err)
	g.Expect(b.W.Kind(jobGK).State).To(gomega.Equal(decision.KindPending))

	b.Fail(nil)
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.FieldsOf("status"))).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.W.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))

	other := schema.GroupKind{Group: "example.com", Kind: "EvalRun"}
	err = b.W.Ensure(triggers.RuleOwner("evals"), other, celpolicies.Fields{})
	g.Expect(errors.As(err, &nf)).To(gomega.BeTrue(), "a kind the REST mapper does not know: %v", err)
	g.Expect(b.W.Kind(other).State).To(gomega.Equal(decision.KindNotServed))
}

// An informer keeps, for as long as it runs, the status and what its
// owners at its start read: a rule that reads more claiming the kind later
// reads the rest from the API server (ErrFieldsNotKept), and the informer
// started once no owner needs the old one keeps what the owners then read.
func TestWatchesKeepWhatTheirStartsOwnersRead(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	g.Expect(b.Dyn.Tracker().Create(triggerstest.JobsGVR, benchJob("run", "", "0a0a0a0a-0000-4000-8000-000000000001"), "ns")).To(gomega.Succeed())
	opened, _ := fakeWatches(b)
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs"), jobGK, celpolicies.FieldsOf("metadata"))).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.W.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))
	g.Expect(b.W.Keeps(jobGK, celpolicies.FieldsOf("metadata", "status"))).To(gomega.BeTrue(), "the status is kept for every owner")
	claimSpec(g, b, opened)
	obj, _, err := b.W.Get(jobGK, "ns", "bench", celpolicies.FieldsOf("status"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(obj).NotTo(gomega.BeNil())

	b.W.Release(triggers.RuleOwner("jobs"))
	b.W.Release(triggers.RuleOwner("jobs-spec"))
	g.Expect(b.W.Kinds()).To(gomega.BeEmpty())
	g.Expect(b.W.Ensure(triggers.RuleOwner("jobs-spec"), jobGK, celpolicies.FieldsOf("spec"))).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.W.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))
	g.Expect(b.W.Keeps(jobGK, celpolicies.FieldsOf("spec", "status"))).To(gomega.BeTrue())
	_, _, err = b.W.Get(jobGK, "ns", "bench", celpolicies.FieldsOf("spec"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
}

// With Options.Known, an informer keeps from its start what the rules
// known then read, whichever owner claims the kind first (here an owner
// that reads only the status, as an AppWrapper's annotated trigger may).
func TestWatchesKeepWhatTheKnownRulesRead(t *testing.T) {
	g := gomega.NewWithT(t)
	b := triggerstest.NewBed(t, triggers.Options{Known: func(gk schema.GroupKind) celpolicies.Fields {
		if gk == jobGK {
			return celpolicies.FieldsOf("spec")
		}
		return celpolicies.Fields{}
	}})
	g.Expect(b.W.Ensure(triggers.AppWrapperOwner(types.NamespacedName{Namespace: "ns", Name: "run"}, jobGK), jobGK, celpolicies.FieldsOf("status"))).To(gomega.Succeed())
	g.Eventually(func() decision.KindState { return b.W.Kind(jobGK).State }, 5*time.Second, 10*time.Millisecond).Should(gomega.Equal(decision.KindWatched))
	g.Expect(b.W.Keeps(jobGK, celpolicies.FieldsOf("spec", "status"))).To(gomega.BeTrue())
	g.Expect(b.W.Keeps(jobGK, celpolicies.FieldsOf("metadata"))).To(gomega.BeFalse())
}

// Keep drops an AppWrapper's claims on the kinds it no longer reads, and
// on every kind with nil, without the AppWrapper remembering them: the
// informer stops with its last owner.
func TestWatchesKeep(t *testing.T) {
	g := gomega.NewWithT(t)
	b := newWatchesBed(t)
	run, other := types.NamespacedName{Namespace: "ns", Name: "run"}, types.NamespacedName{Namespace: "ns", Name: "other"}
	g.Expect(b.W.Ensure(triggers.AppWrapperOwner(run, jobGK), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	g.Expect(b.W.Ensure(triggers.AppWrapperOwner(other, jobGK), jobGK, celpolicies.Fields{})).To(gomega.Succeed())
	b.W.Keep(run, []schema.GroupKind{jobGK})
	g.Expect(b.W.Claimants()).To(gomega.ConsistOf(run, other))
	b.W.Keep(run, nil)
	g.Expect(b.W.Claimants()).To(gomega.ConsistOf(other))
	g.Expect(b.W.Kinds()).To(gomega.ConsistOf(jobGK))
	b.W.Keep(other, []schema.GroupKind{{Kind: "Pod"}})
	g.Expect(b.W.Claimants()).To(gomega.BeEmpty())
	g.Expect(b.W.Kinds()).To(gomega.BeEmpty())
}
