package multikueue

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// The manager's ClusterQueue has quota for one benchmark AppWrapper
// (300m: two inference pods and one benchmark pod at 100m); each worker's
// has room for several.
const (
	managerQuota = "300m"
	workerQuota  = "3"
	// wrapupUser is wrapup's ServiceAccount, as the audit log names it.
	wrapupUser = "system:serviceaccount:" + framework.ControllerNamespace + ":" + framework.ControllerServiceAccount
)

var _ = Describe("AppWrappers that MultiKueue dispatches to worker clusters", func() {
	var (
		ns    string
		rules []*wrapupv1alpha1.CompletionRule
	)

	// onEvery runs f on the manager and on each worker.
	onEvery := func(f func(c *cluster)) {
		for _, c := range append([]*cluster{&manager}, workers...) {
			f(c)
		}
	}

	BeforeEach(func() {
		n := framework.CreateNamespace(ctx, manager.client, "mk", nil)
		ns = n.Name
		rules = nil
		onEvery(func(c *cluster) {
			if c != &manager {
				Expect(c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			}
			quota := workerQuota
			if c == &manager {
				quota = managerQuota
			}
			flavor := util.MakeResourceFlavor(ns)
			Expect(c.client.Create(ctx, flavor)).To(Succeed())
			cq := util.MakeClusterQueue(ns, ns, quota)
			if c == &manager {
				cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: admissionCheck}}}
			}
			Expect(c.client.Create(ctx, cq)).To(Succeed())
			lq := util.MakeLocalQueue("benchmarks", ns, cq.Name)
			Expect(c.client.Create(ctx, lq)).To(Succeed())
			cl := c.client
			DeferCleanup(func() {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
				Expect(client.IgnoreNotFound(cl.Delete(ctx, lq))).To(Succeed())
				Expect(client.IgnoreNotFound(cl.Delete(ctx, cq))).To(Succeed())
				Expect(client.IgnoreNotFound(cl.Delete(ctx, flavor))).To(Succeed())
			})
		})
		DeferCleanup(func() {
			for _, r := range rules {
				onEvery(func(c *cluster) { Expect(client.IgnoreNotFound(c.client.Delete(ctx, r.DeepCopy()))).To(Succeed()) })
			}
		})
	})

	// createRule creates the benchmarks rule (trigger: the Job) on c.
	createRule := func(c *cluster, w *util.RuleWrapper) {
		GinkgoHelper()
		r := w.AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).TriggerKind("batch", "Job", "").Obj()
		r.Name = ns + "-benchmarks"
		Expect(c.client.Create(ctx, r.DeepCopy())).To(Succeed())
		if c == &manager {
			rules = append(rules, r)
		}
	}

	submit := func(name string, annotations map[string]string) *awv1beta2.AppWrapper {
		GinkgoHelper()
		return submitTo(&manager, ns, name, true, annotations)
	}
	dispatched := func(aw *awv1beta2.AppWrapper) *cluster {
		GinkgoHelper()
		return dispatchedTo(aw)
	}
	run := func(w *cluster, aw *awv1beta2.AppWrapper) types.NamespacedName {
		GinkgoHelper()
		return runOn(w, aw, &manager)
	}

	// jobsCreated counts the benchmark Jobs of aw created on every worker.
	jobsCreated := func(aw *awv1beta2.AppWrapper) int {
		n := 0
		for _, w := range workers {
			for _, r := range w.fwk.AuditedRequests("jobs", "create", "", ns) {
				if r.Name == aw.Name+"-guidellm" && r.Succeeded() {
					n++
				}
			}
		}
		return n
	}

	// deletes lists the deletions of aw that user made on c.
	deletes := func(c *cluster, aw *awv1beta2.AppWrapper, user string) []framework.AuditedRequest {
		var out []framework.AuditedRequest
		for _, r := range c.fwk.AuditedAppWrapperRequests("delete", user, ns) {
			if r.Name == aw.Name {
				out = append(out, r)
			}
		}
		return out
	}

	recorded := func(aw *awv1beta2.AppWrapper, outcome wrapupv1alpha1.Outcome) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(manager.client.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			cr := &wrapupv1alpha1.CompletionRecord{}
			key := types.NamespacedName{Namespace: got.Namespace, Name: wrapupv1alpha1.RecordName(got.Name, got.UID)}
			g.Expect(manager.client.Get(ctx, key, cr)).To(Succeed(), "no outcome recorded for the manager's AppWrapper")
			g.Expect(cr.Cleared).To(BeNil())
			g.Expect(cr.Outcome).To(Equal(outcome))
		}, util.LongTimeout, util.Interval).Should(Succeed())
	}

	expectAdmitted := func(c *cluster, aw *awv1beta2.AppWrapper) {
		GinkgoHelper()
		util.ExpectWorkloadCondition(ctx, c.client, aw, kueue.WorkloadAdmitted, metav1.ConditionTrue)
	}

	// expectFinishedEverywhere waits until the manager's AppWrapper, and
	// on worker w its copy, Workload and components, are gone.
	expectFinishedEverywhere := func(w *cluster, aw *awv1beta2.AppWrapper, job types.NamespacedName) {
		GinkgoHelper()
		util.ExpectGone(ctx, manager.client, aw.DeepCopy(), util.LongTimeout)
		util.ExpectGone(ctx, w.client, aw.DeepCopy(), util.LongTimeout)
		util.ExpectGone(ctx, w.client, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name}}, util.LongTimeout)
		util.ExpectGone(ctx, w.client, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: aw.Name + "-prefill"}}, util.LongTimeout)
		Eventually(func(g Gomega) {
			var list kueue.WorkloadList
			g.Expect(w.client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			for _, wl := range list.Items {
				g.Expect(wl.Name).NotTo(HavePrefix("appwrapper-"+aw.Name+"-"), "Workload %s of %s still on %s", wl.Name, aw.Name, w.name)
			}
		}, util.LongTimeout, util.Interval).Should(Succeed())
	}

	It("finishes a benchmark that ran on a worker: the manager's AppWrapper goes, everything on the worker goes, and the next one is admitted", func() {
		createRule(&manager, util.MakeRule(""))
		first := submit("bench-a", nil)
		second := submit("bench-b", nil)
		expectAdmitted(&manager, first)
		w := dispatched(first)
		job := run(w, first)

		By("the second waits for the manager's quota")
		wl, err := util.WorkloadFor(ctx, manager.client, second)
		Expect(err).NotTo(HaveOccurred())
		Expect(wl).NotTo(BeNil())
		Expect(findCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)).To(Or(BeNil(), HaveField("Status", metav1.ConditionFalse)))

		By("explain reads the trigger on the worker, as the controller does")
		live := &batchv1.Job{}
		Expect(w.client.Get(ctx, job, live)).To(Succeed())
		ex, err := view.ExplainWithWorkers(ctx, manager.client, func(_ context.Context, name string) (client.Reader, error) {
			for _, c := range workers {
				if c.name == name {
					return c.client, nil
				}
			}
			return nil, fmt.Errorf("no worker %s", name)
		}, nil, client.ObjectKeyFromObject(first), time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(ex.Verdict).To(Equal(decision.VerdictWaitingForTrigger), ex.String())
		Expect(ex.Worker).NotTo(BeNil(), ex.String())
		Expect(ex.Worker.Cluster).To(Equal(w.name))
		Expect(ex.Trigger.UID).To(Equal(live.UID), ex.String())
		Expect(ex.String()).To(ContainSubstring("Worker:     " + w.name + " (MultiKueue)"))

		util.JobComplete(ctx, w.client, job)
		By("the manager's AppWrapper is recorded and deleted, and the worker's copy, Workload and components follow")
		expectFinishedEverywhere(w, first, job)
		Expect(deletes(&manager, first, wrapupUser)).To(HaveLen(1), "wrapup deletes the manager's AppWrapper once")
		Expect(deletes(w, first, wrapupUser)).To(BeEmpty(), "wrapup never deletes the copy on the worker")

		By("the quota came back on the manager: the second is admitted and dispatched")
		expectAdmitted(&manager, second)
		w2 := dispatched(second)
		run(w2, second)
		Expect(jobsCreated(first)).To(Equal(1), "the benchmark ran once")
	})

	It("records a failure and deletes after onFailure's TTL; with UpdateStatus, records and holds the quota on both clusters", func() {
		createRule(&manager, util.MakeRule("").OnFailure(wrapupv1alpha1.ActionDeleteAll, 5).OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0))
		// The worker's AppWrapper controller fails it at once, without retries.
		now := map[string]string{awv1beta2.FailureGracePeriodDurationAnnotation: "0s", awv1beta2.RetryLimitAnnotation: "0"}
		failing := submit("bench-fail", now)
		expectAdmitted(&manager, failing)
		w := dispatched(failing)
		job := run(w, failing)
		util.JobFailed(ctx, w.client, job)
		recorded(failing, wrapupv1alpha1.OutcomeFailed)
		failedAt := time.Now()
		util.ExpectGone(ctx, manager.client, failing.DeepCopy(), util.LongTimeout)
		Expect(time.Since(failedAt)).To(BeNumerically(">", 3*time.Second), "deleted before onFailure's TTL of 5s")
		Expect(deletes(&manager, failing, wrapupUser)).To(HaveLen(1))
		Expect(deletes(w, failing, wrapupUser)).To(BeEmpty())

		kept := submit("bench-keep", nil)
		expectAdmitted(&manager, kept)
		w = dispatched(kept)
		job = run(w, kept)
		util.JobComplete(ctx, w.client, job)
		recorded(kept, wrapupv1alpha1.OutcomeSucceeded)
		By("UpdateStatus: nothing is deleted, the quota stays held on the manager and on the worker")
		Consistently(func(g Gomega) {
			g.Expect(manager.client.Get(ctx, client.ObjectKeyFromObject(kept), &awv1beta2.AppWrapper{})).To(Succeed())
			g.Expect(w.client.Get(ctx, client.ObjectKeyFromObject(kept), &awv1beta2.AppWrapper{})).To(Succeed())
			for _, c := range []*cluster{&manager, w} {
				wl, err := util.WorkloadFor(ctx, c.client, kept)
				g.Expect(err).NotTo(HaveOccurred())
				if c != &manager {
					wl = workerWorkload(g, c, kept)
				}
				g.Expect(wl).NotTo(BeNil(), "no Workload of %s on %s", kept.Name, c.name)
				q := findCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
				g.Expect(q).NotTo(BeNil())
				g.Expect(q.Status).To(Equal(metav1.ConditionTrue), "quota of %s on %s", kept.Name, c.name)
			}
		}, 8*time.Second, util.Interval).Should(Succeed())
		Expect(deletes(&manager, kept, "")).To(BeEmpty())
		Expect(jobsCreated(failing)).To(Equal(1))
		Expect(jobsCreated(kept)).To(Equal(1))
	})

	Context("with wrapup installed on the manager and on both workers", func() {
		BeforeEach(func() {
			for _, w := range workers {
				stop := startWrapup(*w, false)
				DeferCleanup(stop)
			}
		})

		It("runs each benchmark once and deletes only the manager's AppWrapper, once", func() {
			onEvery(func(c *cluster) { createRule(c, util.MakeRule("")) })
			aw := submit("bench-everywhere", nil)
			expectAdmitted(&manager, aw)
			w := dispatched(aw)
			job := run(w, aw)
			util.JobComplete(ctx, w.client, job)
			expectFinishedEverywhere(w, aw, job)
			Expect(deletes(&manager, aw, wrapupUser)).To(HaveLen(1))
			for _, w := range workers {
				Expect(deletes(w, aw, wrapupUser)).To(BeEmpty(), "wrapup on %s deleted MultiKueue's copy", w.name)
			}
			By("no second run: MultiKueue does not dispatch it again")
			Consistently(func() int { return jobsCreated(aw) }, 5*time.Second, util.Interval).Should(Equal(1))
		})
	})

	It("deletes nothing while wrapup has no Secret for the worker, and finishes the AppWrapper once it has", func() {
		createRule(&manager, util.MakeRule(""))
		aw := submit("bench-nosecret", nil)
		expectAdmitted(&manager, aw)
		w := dispatched(aw)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ControllerNamespace, Name: w.name}}
		Expect(manager.client.Delete(ctx, secret)).To(Succeed())
		DeferCleanup(func() { setWrapupSecret(w, nil) })
		job := run(w, aw)
		// wrapup trusts a Secret it read for WorkerSecretRecheck (1s here):
		// the Secret stays away longer than that before the trigger
		// completes.
		Consistently(func() bool {
			return apierrors.IsNotFound(manager.client.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}))
		}, 2*time.Second, util.Interval).Should(BeTrue())
		util.JobComplete(ctx, w.client, job)
		By("without the Secret, a Warning says so and nothing is deleted")
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(manager.client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			found := false
			for _, e := range list.Items {
				if e.Regarding.Name == aw.Name && e.Reason == wrapupv1alpha1.ReasonWorkerUnreachable && strings.Contains(e.Note, "no kubeconfig Secret") {
					found = true
				}
			}
			g.Expect(found).To(BeTrue(), "no %s Event naming the missing Secret on %s", wrapupv1alpha1.ReasonWorkerUnreachable, aw.Name)
		}, util.LongTimeout, util.Interval).Should(Succeed())
		Consistently(func() error {
			return manager.client.Get(ctx, client.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{})
		}, 5*time.Second, util.Interval).Should(Succeed())
		By("with the Secret back, the AppWrapper is finished")
		setWrapupSecret(w, nil)
		expectFinishedEverywhere(w, aw, job)
		Expect(deletes(&manager, aw, wrapupUser)).To(HaveLen(1))
	})

	It("deletes a recorded success while the worker's API server is down, once, and MultiKueue removes the copy once it is back", func() {
		// The record is final: waiting for the worker would outlast Kueue's
		// workerLostTimeout, after which MultiKueue dispatches the finished
		// run again to another worker.
		createRule(&manager, util.MakeRule("").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 8))
		aw := submit("bench-outage", nil)
		expectAdmitted(&manager, aw)
		w := dispatched(aw)
		job := run(w, aw)
		util.JobComplete(ctx, w.client, job)
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(manager.client.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, string(wrapupv1alpha1.OutcomeSucceeded)))
		}, util.Timeout, util.Interval).Should(Succeed())
		w.fwk.RestartAPIServer(func() {
			By("while the worker is down, the recorded success is deleted at its TTL")
			util.ExpectGone(ctx, manager.client, aw.DeepCopy(), util.LongTimeout)
			Expect(deletes(&manager, aw, wrapupUser)).To(HaveLen(1))
		})
		By("once it is back, the copy there goes too, and the run never ran again")
		expectFinishedEverywhere(w, aw, job)
		Expect(deletes(&manager, aw, wrapupUser)).To(HaveLen(1))
		Expect(jobsCreated(aw)).To(Equal(1))
	})
})

// workerWorkload is the Workload on worker c of the copy of aw (named as
// the manager's, as MultiKueue makes it).
func workerWorkload(g Gomega, c *cluster, aw *awv1beta2.AppWrapper) *kueue.Workload {
	cp := &awv1beta2.AppWrapper{}
	g.Expect(c.client.Get(ctx, client.ObjectKeyFromObject(aw), cp)).To(Succeed())
	name := cp.Labels[decision.PrebuiltWorkloadLabel]
	g.Expect(name).NotTo(BeEmpty(), "the copy of %s on %s has no %s label", aw.Name, c.name, decision.PrebuiltWorkloadLabel)
	wl := &kueue.Workload{}
	g.Expect(c.client.Get(ctx, types.NamespacedName{Namespace: aw.Namespace, Name: name}, wl)).To(Succeed(), fmt.Sprintf("Workload %s on %s", name, c.name))
	return wl
}

// submitTo queues on c an llm-d style benchmark AppWrapper: two inference
// Deployments, a ConfigMap and the benchmark Job (the trigger); for
// MultiKueue to dispatch when managed.
func submitTo(c *cluster, ns, name string, managed bool, annotations map[string]string) *awv1beta2.AppWrapper {
	GinkgoHelper()
	w := util.MakeBenchmarkAppWrapper(name, ns, "benchmarks")
	for k, v := range annotations {
		w.Annotation(k, v)
	}
	aw := w.Obj()
	if managed {
		aw.Spec.ManagedBy = ptr.To(kueue.MultiKueueControllerName)
	}
	Expect(c.client.Create(ctx, aw)).To(Succeed())
	return aw
}

// dispatchedTo waits until one worker holds MultiKueue's copy of aw, and
// returns that worker.
func dispatchedTo(aw *awv1beta2.AppWrapper) *cluster {
	GinkgoHelper()
	var on *cluster
	Eventually(func(g Gomega) {
		on = nil
		for _, w := range workers {
			cp := &awv1beta2.AppWrapper{}
			err := w.client.Get(ctx, client.ObjectKeyFromObject(aw), cp)
			if apierrors.IsNotFound(err) {
				continue
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(on).To(BeNil(), "copies of %s on two workers", aw.Name)
			on = w
		}
		g.Expect(on).NotTo(BeNil(), "no worker has a copy of %s yet", aw.Name)
	}, util.LongTimeout, 20*time.Millisecond).Should(Succeed())
	return on
}

// runOn plays, on w, the Deployment controller, the Job controller and the
// kubelet for (the copy of) aw: its pods run. It returns the benchmark
// Job's key once home (the cluster aw was submitted to) sees it Running.
func runOn(w *cluster, aw *awv1beta2.AppWrapper, home *cluster) types.NamespacedName {
	GinkgoHelper()
	ns := aw.Namespace
	util.ExpectAppWrapperPhase(ctx, w.client, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
	for _, d := range []string{aw.Name + "-prefill", aw.Name + "-decode"} {
		deploy := &appsv1.Deployment{}
		Eventually(func() error {
			return w.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: d}, deploy)
		}, util.Timeout, 20*time.Millisecond).Should(Succeed())
		deploy.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		util.CreatePod(ctx, w.client, ns, d+"-0", aw.Name, deploy, corev1.PodRunning)
	}
	job := types.NamespacedName{Namespace: ns, Name: aw.Name + "-guidellm"}
	Eventually(func() error { return w.client.Get(ctx, job, &batchv1.Job{}) }, util.Timeout, 20*time.Millisecond).Should(Succeed())
	util.JobStarted(ctx, w.client, job)
	// The manager sees it Running once MultiKueue copied the status.
	util.ExpectAppWrapperPhase(ctx, home.client, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
	return job
}
