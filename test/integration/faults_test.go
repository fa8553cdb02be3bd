package integration

import (
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// restartManager stops wrapup and runs whileDown, then starts a fresh
// wrapup: a controller restart, with every in-memory state lost.
func restartManager(whileDown func()) {
	GinkgoHelper()
	stopWrapup()
	defer startWrapup()
	whileDown()
}

// countEvents counts Events with reason on obj.
func countEvents(obj client.Object, reason string) int {
	GinkgoHelper()
	var list eventsv1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == obj.GetName() && e.Reason == reason {
			n++
		}
	}
	return n
}

// expectActedOnceEach checks in the API server's audit log that wrapup
// deleted each finished AppWrapper in namespace exactly once (one deletion
// that succeeded, by wrapup, and no attempt after it) and recorded its
// outcome once (one create of its CompletionRecord that succeeded, no
// update of it, and no patch of the AppWrapper: a run deleted at once
// gets no mirror of its outcome), and that no one deleted, and wrapup did
// not write, any of untouched. Refused attempts (while the API
// server stops or starts: 429, or 403 before its RBAC is loaded) are
// retries of the same action and are allowed. note, if not nil, describes
// each request in the listing written to the GinkgoWriter.
func expectActedOnceEach(namespace string, finished, untouched []*awv1beta2.AppWrapper, note func(framework.AuditedRequest) string) {
	GinkgoHelper()
	deletes := fwk.AuditedAppWrapperRequests("delete", "", namespace)
	patches := fwk.AuditedAppWrapperRequests("patch", framework.ControllerUser, namespace)
	updates := fwk.AuditedAppWrapperRequests("update", framework.ControllerUser, namespace)
	records := fwk.AuditedRequests("completionrecords", "create", framework.ControllerUser, namespace)
	recordUpdates := fwk.AuditedRequests("completionrecords", "update", framework.ControllerUser, namespace)
	for _, r := range append(append(append([]framework.AuditedRequest{}, deletes...), patches...), updates...) {
		line := r.String()
		if note != nil {
			line += " (" + note(r) + ")"
		}
		GinkgoWriter.Println("audit:", line)
		Expect(r.Code).NotTo(BeZero(), "a request the API server never answered: %s", r)
	}
	Expect(updates).To(BeEmpty(), "wrapup only patches AppWrappers")
	succeeded := func(reqs []framework.AuditedRequest, name string) []framework.AuditedRequest {
		var out []framework.AuditedRequest
		for _, r := range reqs {
			if r.Name == name && r.Succeeded() {
				out = append(out, r)
			}
		}
		return out
	}
	for _, aw := range finished {
		d := succeeded(deletes, aw.Name)
		Expect(d).To(HaveLen(1), "successful deletions of %s", aw.Name)
		Expect(d[0].User).To(Equal(framework.ControllerUser), "%s", d[0])
		for _, r := range deletes {
			if r.Name == aw.Name {
				Expect(r.Received).NotTo(BeTemporally(">", d[0].Received), "a deletion of %s after the one that succeeded: %s", aw.Name, r)
			}
		}
		Expect(succeeded(patches, aw.Name)).To(BeEmpty(), "wrapup's successful patches of %s (the mirror of an AppWrapper deleted at once)", aw.Name)
		name := wrapupv1alpha1.RecordName(aw.Name, aw.UID)
		Expect(succeeded(records, name)).To(HaveLen(1), "wrapup's successful creates of the CompletionRecord of %s", aw.Name)
		Expect(succeeded(recordUpdates, name)).To(BeEmpty(), "wrapup's updates of the CompletionRecord of %s", aw.Name)
	}
	for _, aw := range untouched {
		for _, r := range append(append([]framework.AuditedRequest{}, deletes...), patches...) {
			Expect(r.Name).NotTo(Equal(aw.Name), "a write to %s, which must stay untouched: %s", aw.Name, r)
		}
	}
}

var _ = Describe("Faults", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace("faults") })
	runningJobAppWrapper := func(name string, labels map[string]string) (*awv1beta2.AppWrapper, types.NamespacedName) {
		GinkgoHelper()
		w := util.MakeAppWrapper(name, ns.Name).Component(util.MakeJob(name+"-job").Obj(), nil)
		for k, v := range labels {
			w.Label(k, v)
		}
		aw := w.Obj()
		createRunning(aw)
		job := types.NamespacedName{Namespace: ns.Name, Name: name + "-job"}
		expectJob(job)
		return aw, job
	}
	expectRecorded := func(aw *awv1beta2.AppWrapper) time.Time {
		GinkgoHelper()
		return expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded).FinishedAt.Time
	}

	It("deletes at the TTL, once, when the controller restarts between recording and the TTL", func() {
		const ttl = 6
		createReadyRule(ns, util.MakeRule("restart").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, ttl))
		aw, job := runningJobAppWrapper("restart", nil)
		util.JobComplete(ctx, k8sClient, job)
		finishedAt := expectRecorded(aw)

		restartManager(func() {
			By("nothing acting while the controller is down")
			expectKept(aw, "2s")
		})

		By("the new controller deleting at the recorded time plus the TTL, not earlier")
		var deletionAt time.Time
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)
			if err == nil && got.DeletionTimestamp != nil {
				deletionAt = got.DeletionTimestamp.Time
			}
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred())
		}, util.LongTimeout, 50*time.Millisecond).Should(Succeed())
		if !deletionAt.IsZero() {
			// Timestamps have second precision.
			Expect(deletionAt).To(BeTemporally(">=", finishedAt.Add(ttl*time.Second-time.Second)))
		}
		Expect(countEvents(aw, wrapupv1alpha1.ReasonDeleted)).To(Equal(1))
		Expect(countEvents(aw, wrapupv1alpha1.ReasonTriggerSucceeded)).To(Equal(1), "the outcome is recorded once, not again after the restart")
	})

	It("deletes once when the controller stops right after its delete call, and the restarted one finds the AppWrapper still there", func() {
		createReadyRule(ns, util.MakeRule("afterdelete").TriggerKind("batch", "Job", ""))
		// A finalizer of the test's own keeps the deleted AppWrapper, so
		// that the restarted controller sees it, deletionTimestamp set.
		const hold = "test.wrapup.dev/hold"
		aw := util.MakeAppWrapper("afterdelete", ns.Name).Component(util.MakeJob("afterdelete-job").Obj(), nil).Finalizers(hold).Obj()
		createRunning(aw)
		job := types.NamespacedName{Namespace: ns.Name, Name: "afterdelete-job"}
		expectJob(job)
		util.JobComplete(ctx, k8sClient, job)

		By("waiting for the delete call, then stopping the controller")
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp).NotTo(BeNil())
		}, util.Timeout, 20*time.Millisecond).Should(Succeed())
		restartManager(func() {})

		By("the restarted controller leaving the deleted AppWrapper alone")
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Finalizers).To(ContainElement(hold))
		}, "3s", util.Interval).Should(Succeed())
		expectActedOnceEach(ns.Name, []*awv1beta2.AppWrapper{aw}, nil, nil)
		Expect(countEvents(aw, wrapupv1alpha1.ReasonTriggerSucceeded)).To(Equal(1), "the outcome is recorded once, not again after the restart")

		By("the AppWrapper going once the test lets go of it")
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			got.Finalizers = slices.DeleteFunc(got.Finalizers, func(f string) bool { return f == hold })
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		expectActedOnceEach(ns.Name, []*awv1beta2.AppWrapper{aw}, nil, nil)
	})

	It("finishes a trigger that completed while the controller was down", func() {
		createReadyRule(ns, util.MakeRule("down").TriggerKind("batch", "Job", ""))
		aw, job := runningJobAppWrapper("down", nil)
		restartManager(func() {
			util.JobComplete(ctx, k8sClient, job)
		})
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		Expect(countEvents(aw, wrapupv1alpha1.ReasonDeleted)).To(Equal(1))
	})

	It("cancels a pending deletion when the rule stops matching the AppWrapper", func() {
		const ttl = 4
		r := createReadyRule(ns, util.MakeRule("edited").TriggerKind("batch", "Job", "").
			AppWrapperLabels(map[string]string{"team": "a"}).OnSuccess(wrapupv1alpha1.ActionDeleteAll, ttl))
		aw, job := runningJobAppWrapper("edited", map[string]string{"team": "a"})
		util.JobComplete(ctx, k8sClient, job)
		expectRecorded(aw)

		By("editing the rule's selector while the TTL is pending")
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
			got.Spec.AppWrapperSelector.MatchLabels = map[string]string{"team": "b"}
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		expectKept(aw, (ttl+2)*time.Second)
		Expect(countEvents(aw, wrapupv1alpha1.ReasonDeleted)).To(BeZero())
	})

	It("loses no completion and acts on none twice when the API server restarts while triggers complete", func() {
		errorMark := fwk.Errors.Mark()
		rule := createReadyRule(ns, util.MakeRule("apiserver").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 0))
		const n = 6
		var (
			finished, running []*awv1beta2.AppWrapper
			jobs              []types.NamespacedName
		)
		for i := range n {
			aw, job := runningJobAppWrapper(fmt.Sprintf("done%d", i), nil)
			finished = append(finished, aw)
			jobs = append(jobs, job)
		}
		for i := range 2 {
			aw, _ := runningJobAppWrapper(fmt.Sprintf("running%d", i), nil)
			running = append(running, aw)
		}

		By("completing triggers right before the API server stops, and as it stops")
		for _, job := range jobs[:2] {
			util.JobComplete(ctx, k8sClient, job)
		}
		// These land before the server stops, or are retried until it is
		// back: either way they complete around the outage.
		var completing sync.WaitGroup
		for _, job := range jobs[2:4] {
			completing.Go(func() {
				defer GinkgoRecover()
				util.JobComplete(ctx, k8sClient, job)
			})
		}
		stopping := time.Now()
		fwk.RestartAPIServer(func() {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(running[0]), &awv1beta2.AppWrapper{})).NotTo(Succeed(), "the API server is down")
		})
		back := time.Now()
		completing.Wait()

		By("completing the rest once it is back")
		for _, job := range jobs[4:] {
			util.JobComplete(ctx, k8sClient, job)
		}
		for _, aw := range finished {
			util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		}
		By("the AppWrappers whose trigger runs still being there, untouched")
		Consistently(func(g Gomega) {
			for _, aw := range running {
				got := &awv1beta2.AppWrapper{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
				g.Expect(got.DeletionTimestamp).To(BeNil(), aw.Name)
				g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel), aw.Name)
				g.Expect(recordedOutcome(g, got)).To(BeEmpty(), aw.Name)
			}
		}, util.ConsistentDuration, util.Interval).Should(Succeed())

		By("the audit log: one successful deletion and one outcome record per finished AppWrapper, by wrapup, and nothing else")
		phases := map[string]int{}
		expectActedOnceEach(ns.Name, finished, running, func(r framework.AuditedRequest) string {
			when := "after the restart"
			switch {
			case r.Received.Before(stopping):
				when = "before the stop"
			case r.Received.Before(back):
				when = "while stopping or starting"
			}
			phases[r.Verb+" "+when]++
			return when
		})
		GinkgoWriter.Println("audit: writes by phase:", phases)

		By("the rule counting every completion once")
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), got)).To(Succeed())
			g.Expect(got.Status.Succeeded).To(Equal(int64(n)))
		}, util.LongTimeout, util.Interval).Should(Succeed())
		Consistently(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), got)).To(Succeed())
			g.Expect(got.Status.Succeeded).To(Equal(int64(n)))
		}, util.ConsistentDuration, util.Interval).Should(Succeed())
		// Events are not counted here: they are best effort, and an outage
		// loses some (client-go's recorder drops an Event that the
		// restarting API server refuses with 403 before its RBAC is
		// loaded) while a repeat would only extend the first one's series.

		for _, e := range fwk.Errors.DuringOutage() {
			GinkgoWriter.Println("logged during the outage:", e[:min(len(e), 300)])
		}
		Expect(fwk.Errors.Since(errorMark, wrapupLogger)).To(BeEmpty(), "wrapup logged errors outside the outage")
		Expect(fwk.GarbageCollectorRunning()).To(BeTrue(), "kube-controller-manager survived the outage")
	})

	It("stops watching a trigger kind whose CRD is deleted, reports it, and resumes when it comes back", func() {
		gk := schema.GroupKind{Group: "late.wrapup.dev", Kind: "LateRun"}
		installLateCRDs()
		DeferCleanup(uninstallLateCRDs)
		r := createReadyRule(ns, util.MakeRule("crd-gone").TriggerKind(gk.Group, gk.Kind, "").Success("object.status.?phase.orValue('') == 'Done'"))
		Eventually(func() bool { return informerRunning(gk) }, util.Timeout, util.Interval).Should(BeTrue())

		By("deleting the CRD")
		uninstallLateCRDs()
		expectRuleReady(r, metav1.ConditionFalse, wrapupv1alpha1.ReasonTriggerKindNotFound)
		Expect(informerRunning(gk)).To(BeFalse())

		By("installing it again")
		installLateCRDs()
		expectRuleReady(r, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)
		Expect(informerRunning(gk)).To(BeTrue())
	})
})
