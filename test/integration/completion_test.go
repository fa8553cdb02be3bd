package integration

import (
	"fmt"
	"slices"
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
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

const nsLabel = "wrapup.test/namespace"

// testHold is a finalizer of the spec's own, which keeps an object being
// deleted, whatever the deletion's propagation, until the spec releases
// it.
const testHold = "wrapup.test/hold"

// hold adds testHold to obj.
func hold(obj client.Object) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		obj.SetFinalizers(append(obj.GetFinalizers(), testHold))
		g.Expect(k8sClient.Update(ctx, obj)).To(Succeed())
	}, util.Timeout, util.Interval).Should(Succeed())
}

// release removes testHold from obj, if it is still there.
func release(obj client.Object) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		obj.SetFinalizers(slices.DeleteFunc(obj.GetFinalizers(), func(f string) bool { return f == testHold }))
		g.Expect(client.IgnoreNotFound(k8sClient.Update(ctx, obj))).To(Succeed())
	}, util.Timeout, util.Interval).Should(Succeed())
}

var _ = Describe("Completing AppWrappers", func() {
	var ns *corev1.Namespace
	BeforeEach(func() { ns = specNamespace("wrapup") })

	// makeRule scopes a rule to the spec's namespace.
	makeRule := func(name string) *util.RuleWrapper {
		return util.MakeRule(fmt.Sprintf("%s-%s", ns.Name, name)).NamespaceLabels(map[string]string{nsLabel: ns.Name})
	}
	// benchmarkAppWrapper wraps an inference Deployment, a ConfigMap and the
	// benchmark Job, and waits until the AppWrapper controller runs them.
	benchmarkAppWrapper := func(name string, annotateJob bool) (*awv1beta2.AppWrapper, types.NamespacedName) {
		GinkgoHelper()
		w := util.MakeAppWrapper(name, ns.Name).
			Label("llm-d.ai/role", "benchmark").
			Component(util.MakeDeployment(name+"-inference", 1), nil).
			Component(util.MakeConfigMap(name+"-config", map[string]string{"rate": "10"}), nil)
		if annotateJob {
			w.Trigger(util.MakeJob(name + "-benchmark").Obj())
		} else {
			w.Component(util.MakeJob(name+"-benchmark").Obj(), nil)
		}
		aw := w.Obj()
		return aw, runJob(aw, name+"-benchmark")
	}

	It("records the outcome and deletes the whole AppWrapper when the benchmark Job succeeds", func() {
		rule := createReadyRule(ns, util.MakeRule("benchmarks").
			AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).
			TriggerKind("batch", "Job", "").
			Message(`'benchmark finished: ' + string(object.status.?succeeded.orValue(0)) + ' pod(s) succeeded'`))
		aw, job := benchmarkAppWrapper("run1", false)

		By("playing the Deployment's controller: an inference pod that never finishes")
		deploy := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: "run1-inference"}, deploy)).To(Succeed())
		deploy.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		pod := util.CreatePod(ctx, k8sClient, ns.Name, "run1-inference-0", aw.Name, deploy, corev1.PodRunning)

		By("nothing happening while the Job runs")
		expectNotRecorded(aw)

		By("the Job completing")
		util.JobComplete(ctx, k8sClient, job)

		By("the AppWrapper, its components and their pods going")
		expectEvent(aw, wrapupv1alpha1.OutcomeSucceeded, "TriggerSucceeded", "benchmark finished: 1 pod(s) succeeded")
		expectEvent(aw, "", "Deleted", "")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		for _, obj := range []client.Object{
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "run1-benchmark"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "run1-inference"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "run1-config"}},
			pod,
		} {
			util.ExpectGone(ctx, k8sClient, obj, util.LongTimeout)
		}

		By("the rule counting the success")
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rule), got)).To(Succeed())
			g.Expect(got.Status.Succeeded).To(Equal(int64(1)))
			g.Expect(got.Status.Failed).To(BeZero())
			g.Expect(got.Status.MatchedAppWrappers).To(BeZero())
		}, util.Timeout, util.Interval).Should(Succeed())
	})

	It("takes a Job that its own TTL removes, seen only while it is deleted, as the success it was", func() {
		aw := util.MakeAppWrapper("ttl1", ns.Name).Label("llm-d.ai/role", "benchmark").
			Component(util.MakeDeployment("ttl1-inference", 1), nil).
			Component(util.MakeJob("ttl1-benchmark").Obj(), nil).Obj()
		createRunning(aw)
		job := types.NamespacedName{Namespace: ns.Name, Name: "ttl1-benchmark"}
		j := expectJob(job)
		// The TTL-after-finished controller deletes with Foreground
		// propagation, so the Job is seen being deleted while its pods go.
		// The AppWrapper controller (v1.2.2) then counts it as not
		// deployed and fails the AppWrapper (MissingComponent), and its
		// teardown deletes the Job again with Background propagation,
		// which removes it at once (appwrapper_controller.go, Reconcile
		// and getComponentStatus; resource_management.go,
		// deleteComponents): the spec's finalizer keeps the Job being
		// deleted, so that wrapup is seen to judge that state whenever it
		// reads it.
		hold(j)
		DeferCleanup(func() { release(j) })

		By("the Job completing 10 s ago, and the TTL-after-finished controller deleting it with Foreground propagation, as processJob does")
		util.JobCompleteAt(ctx, k8sClient, job, time.Now().Add(-10*time.Second))
		Expect(k8sClient.Get(ctx, job, j)).To(Succeed())
		Expect(k8sClient.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationForeground),
			client.Preconditions{UID: &j.UID})).To(Succeed())
		Eventually(func(g Gomega) {
			got := &batchv1.Job{}
			g.Expect(k8sClient.Get(ctx, job, got)).To(Succeed())
			g.Expect(got.DeletionTimestamp).NotTo(BeNil())
		}, util.Timeout, util.Interval).Should(Succeed())

		By("a rule for the run's Job, made only now: wrapup sees the Job first while it is deleted")
		createReadyRule(ns, makeRule("ttl").AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).TriggerKind("batch", "Job", ""))
		expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)

		By("the Job gone, the AppWrapper going")
		release(j)
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("reads from the API server the trigger fields its kind's informer, started before the rule, does not keep, and says so on the rule", func() {
		createReadyRule(ns, makeRule("status").AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).TriggerKind("batch", "Job", ""))
		spec := createReadyRule(ns, makeRule("spec").Priority(10).AppWrapperLabels(map[string]string{"reads": "spec"}).TriggerKind("batch", "Job", "").
			Success("object.?status.?succeeded.orValue(0) > 0 && object.spec.parallelism == 1"))
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(spec), got)).To(Succeed())
			c := apimeta.FindStatusCondition(got.Status.Conditions, wrapupv1alpha1.ConditionTriggerCached)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(wrapupv1alpha1.ReasonFieldsReadLive))
			g.Expect(c.Message).To(ContainSubstring("spec"))
		}, util.Timeout, util.Interval).Should(Succeed())

		aw := util.MakeAppWrapper("live1", ns.Name).Label("reads", "spec").Component(util.MakeJob("live1-benchmark").Obj(), nil).Obj()
		job := runJob(aw, "live1-benchmark")
		expectNotRecorded(aw)
		util.JobComplete(ctx, k8sClient, job)
		Expect(expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded).Rule).To(Equal(spec.Name))
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("records the outcome in the run's CompletionRecord, and mirrors it on the AppWrapper's metadata for people", func() {
		rule := createReadyRule(ns, util.MakeRule("status").TriggerKind("batch", "Job", "").
			OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0).
			Message(`'done'`))
		aw, job := benchmarkAppWrapper("run2", false)
		live := &batchv1.Job{}
		Expect(k8sClient.Get(ctx, job, live)).To(Succeed())
		util.JobComplete(ctx, k8sClient, job)
		cr := expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)
		Expect(cr.AppWrapper.UID).To(Equal(aw.UID))
		Expect(cr.Rule).To(Equal(rule.Name))
		Expect(cr.RuleUID).To(Equal(rule.UID))
		Expect(cr.Message).To(Equal("done"))
		Expect(cr.Triggers).To(ConsistOf(And(HaveField("ComponentIndex", int32(2)), HaveField("UID", live.UID), HaveField("Decided", true))))
		Expect(cr.Action.Rule).To(Equal(rule.Name))
		Expect(cr.Action.RuleUID).To(Equal(rule.UID))
		Expect(cr.Action.Action).To(Equal(wrapupv1alpha1.ActionUpdateStatus))
		Expect(cr.Action.DeleteAfter).To(BeNil())
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Succeeded"))
			g.Expect(got.Annotations).To(HaveKeyWithValue(wrapupv1alpha1.RuleAnnotation, ns.Name+"-status"))
			g.Expect(got.Annotations).To(HaveKeyWithValue(wrapupv1alpha1.MessageAnnotation, "done"))
			finished, err := time.Parse(time.RFC3339Nano, got.Annotations[wrapupv1alpha1.FinishedAtAnnotation])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(finished).To(BeTemporally("==", cr.FinishedAt.Time))
			for _, k := range util.LegacyRecordKeys {
				g.Expect(got.Annotations).NotTo(HaveKey(k), "the mirror writes none of an earlier version's record")
			}
		}, util.Timeout, util.Interval).Should(Succeed())

		By("UpdateStatus leaving everything running")
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: "run2-inference"}, &appsv1.Deployment{})).To(Succeed())
		}, util.ConsistentDuration, util.Interval).Should(Succeed())
	})

	It("deletes a run recorded before its rule's action became DeleteAll only the TTL after the change, never at once", func() {
		r := createReadyRule(ns, util.MakeRule("action-change").TriggerKind("batch", "Job", "").
			OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0))
		aw, job := benchmarkAppWrapper("run-action", false)
		util.JobComplete(ctx, k8sClient, job)
		cr := expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)
		Expect(cr.Action.DeleteAfter).To(BeNil(), "UpdateStatus deletes nothing")

		By("the run kept past what would be its TTL (UpdateStatus deletes nothing)")
		expectKept(aw, 7*time.Second)

		By("the admin changing the action to DeleteAll with a TTL of 6 s")
		changed := time.Now()
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
			got.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](6)}
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())

		By("the record stamped with the new action, due 6 s after wrapup saw the change, not 6 s after the run finished")
		var due time.Time
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRecord{}
			g.Expect(k8sClient.Get(ctx, recordKey(aw), got)).To(Succeed())
			g.Expect(got.Action.Action).To(Equal(wrapupv1alpha1.ActionDeleteAll))
			g.Expect(got.Action.Since).NotTo(BeNil())
			g.Expect(got.FinishedAt.Time).To(Equal(cr.FinishedAt.Time), "the run's end is kept")
			// The TTL counts from since (deleteAfter is it, to the second, for people).
			due = got.Action.Since.Add(6 * time.Second)
		}, util.Timeout, util.Interval).Should(Succeed())
		Expect(due).To(BeTemporally(">=", changed.Add(6*time.Second)))

		By("the run deleted no sooner than that")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
		var deleted time.Time
		for _, req := range fwk.AuditedAppWrapperRequests("delete", "system:serviceaccount:"+framework.ControllerNamespace+":"+framework.ControllerServiceAccount, ns.Name) {
			if req.Name == aw.Name {
				deleted = req.Received
			}
		}
		Expect(deleted).NotTo(BeZero(), "no delete request of wrapup's in the audit log")
		// The audit log's times are the API server's, in microseconds.
		Expect(deleted).To(BeTemporally(">=", due), "deleted %s after the change", deleted.Sub(changed))
	})

	It("never deletes MultiKueue's copy of an AppWrapper on a worker cluster, and records its outcome there", func() {
		// What MultiKueue's AppWrapper adapter creates on a worker: the
		// manager's AppWrapper, managedBy cleared, labelled with its origin
		// and its prebuilt Workload. Deleting it would make the manager
		// dispatch the finished run again.
		createReadyRule(ns, util.MakeRule("worker").TriggerKind("batch", "Job", ""))
		name := "run-worker"
		aw := util.MakeAppWrapper(name, ns.Name).
			Label("kueue.x-k8s.io/multikueue-origin", "manager").
			Label("kueue.x-k8s.io/prebuilt-workload-name", "appwrapper-"+name+"-1a2b3").
			Component(util.MakeDeployment(name+"-inference", 1), nil).
			Component(util.MakeJob(name+"-benchmark").Obj(), nil).Obj()
		createRunning(aw)
		job := types.NamespacedName{Namespace: ns.Name, Name: name + "-benchmark"}
		created := expectJob(job)
		util.JobStarted(ctx, k8sClient, job)
		util.JobComplete(ctx, k8sClient, job)

		By("recording the outcome, saying the manager's wrapup finishes it, and deleting nothing")
		expectEvent(aw, wrapupv1alpha1.OutcomeSucceeded, wrapupv1alpha1.ReasonMultiKueueWorker, "the manager cluster's wrapup finishes the AppWrapper")
		expectRecord(aw, wrapupv1alpha1.OutcomeSucceeded)
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Succeeded"))
		}, util.Timeout, util.Interval).Should(Succeed())
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.UID).To(Equal(aw.UID))
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
			// The benchmark Job is the one created at first: it ran once.
			j := &batchv1.Job{}
			g.Expect(k8sClient.Get(ctx, job, j)).To(Succeed())
			g.Expect(j.UID).To(Equal(created.UID))
		}, util.ConsistentDuration, util.Interval).Should(Succeed())
		var events eventsv1.EventList
		Expect(k8sClient.List(ctx, &events, client.InNamespace(ns.Name))).To(Succeed())
		for _, e := range events.Items {
			Expect(e.Reason).NotTo(Equal(wrapupv1alpha1.ReasonDeleted), "Event %s on %s: %s", e.Reason, e.Regarding.Name, e.Note)
		}
	})

	It("never deletes in dry-run mode, and says what it would do", func() {
		createReadyRule(ns, util.MakeRule("dry").TriggerKind("batch", "Job", "").DryRun())
		aw, job := benchmarkAppWrapper("run3", false)
		util.JobComplete(ctx, k8sClient, job)
		expectEvent(aw, "", "WouldDelete", "would delete")
		expectKept(aw, util.ConsistentDuration)
	})

	It("waits ttlSecondsAfterFinished before deleting", func() {
		createReadyRule(ns, util.MakeRule("ttl").TriggerKind("batch", "Job", "").OnSuccess(wrapupv1alpha1.ActionDeleteAll, 4))
		aw, job := benchmarkAppWrapper("run4", false)
		util.JobComplete(ctx, k8sClient, job)
		expectEvent(aw, "", "TriggerSucceeded", "deleted in 4s")
		expectKept(aw, "2s")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("uses the component annotated as the trigger when the rule names no kind", func() {
		createReadyRule(ns, util.MakeRule("annotated").Priority(-100))
		aw, job := benchmarkAppWrapper("run5", true)
		util.JobComplete(ctx, k8sClient, job)
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("lets the highest-priority matching rule decide", func() {
		createReadyRule(ns, util.MakeRule("low").TriggerKind("batch", "Job", "").Priority(1))
		high := createReadyRule(ns, util.MakeRule("high").TriggerKind("batch", "Job", "").Priority(10).OnSuccess(wrapupv1alpha1.ActionUpdateStatus, 0))
		aw, job := benchmarkAppWrapper("run6", false)
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(high), got)).To(Succeed())
			g.Expect(got.Status.MatchedAppWrappers).To(Equal(int32(1)))
		}, util.Timeout, util.Interval).Should(Succeed())
		util.JobComplete(ctx, k8sClient, job)
		expectEvent(aw, "", "TriggerSucceeded", "rule "+high.Name)
		expectKept(aw, util.ConsistentDuration)

		By("the winner counting the outcome, and the loser's counters not moving")
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(high), got)).To(Succeed())
			g.Expect(got.Status.Succeeded).To(Equal(int64(1)))
		}, util.Timeout, util.Interval).Should(Succeed())
		low := &wrapupv1alpha1.CompletionRule{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Name: ns.Name + "-low"}, low)).To(Succeed())
		Expect(low.Status.Succeeded).To(BeZero())
		Expect(low.Status.Failed).To(BeZero())
		Expect(low.Status.MatchedAppWrappers).To(BeZero())
	})

	It("never touches an AppWrapper outside the rule's selectors", func() {
		createReadyRule(ns, util.MakeRule("selective").TriggerKind("batch", "Job", "").
			AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}))

		By("an AppWrapper without the label, in the rule's namespace")
		unlabelled := util.MakeAppWrapper("unlabelled", ns.Name).Component(util.MakeJob("unlabelled-job").Obj(), nil).Obj()
		Expect(k8sClient.Create(ctx, unlabelled)).To(Succeed())

		By("an AppWrapper with the label, in another namespace")
		other := framework.CreateNamespace(ctx, k8sClient, "other", nil)
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, other))).To(Succeed()) })
		elsewhere := util.MakeAppWrapper("elsewhere", other.Name).Label("llm-d.ai/role", "benchmark").
			Component(util.MakeJob("elsewhere-job").Obj(), nil).Obj()
		Expect(k8sClient.Create(ctx, elsewhere)).To(Succeed())

		for _, aw := range []*awv1beta2.AppWrapper{unlabelled, elsewhere} {
			util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
			util.JobComplete(ctx, k8sClient, types.NamespacedName{Namespace: aw.Namespace, Name: aw.Name + "-job"})
		}
		Consistently(func(g Gomega) {
			for _, aw := range []*awv1beta2.AppWrapper{unlabelled, elsewhere} {
				got := &awv1beta2.AppWrapper{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
				g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
				g.Expect(k8sClient.Get(ctx, recordKey(got), &wrapupv1alpha1.CompletionRecord{})).NotTo(Succeed(), "a record of %s", aw.Name)
			}
		}, util.ConsistentDuration, util.Interval).Should(Succeed())
	})

	It("keeps a failed run for onFailure's TTL, then deletes it", func() {
		createReadyRule(ns, util.MakeRule("failure-ttl").TriggerKind("batch", "Job", "").OnFailure(wrapupv1alpha1.ActionDeleteAll, 4))
		aw := util.MakeAppWrapper("run13", ns.Name).
			Annotation(awv1beta2.RetryLimitAnnotation, "0").
			Component(util.MakeDeployment("run13-inference", 1), nil).
			Component(util.MakeJob("run13-benchmark").Obj(), nil).Obj()
		createRunning(aw)
		job := types.NamespacedName{Namespace: ns.Name, Name: "run13-benchmark"}
		expectJob(job)
		failJob(aw, job)
		expectEvent(aw, "", "TriggerFailed", "deleted in 4s")
		Consistently(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
		}, "2s", util.Interval).Should(Succeed())
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("leaves AppWrappers annotated wrapup.dev/ignore alone", func() {
		createReadyRule(ns, util.MakeRule("all").TriggerKind("batch", "Job", ""))
		aw, job := benchmarkAppWrapper("run7", false)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), aw)).To(Succeed())
		aw.Annotations = map[string]string{wrapupv1alpha1.IgnoreAnnotation: "true"}
		Expect(k8sClient.Update(ctx, aw)).To(Succeed())
		util.JobComplete(ctx, k8sClient, job)
		expectNotRecorded(aw)
	})

	It("refuses an ambiguous trigger with a Warning that says why", func() {
		createReadyRule(ns, util.MakeRule("ambiguous").TriggerKind("batch", "Job", ""))
		aw := util.MakeAppWrapper("run8", ns.Name).
			Component(util.MakeJob("first").Obj(), nil).
			Component(util.MakeJob("second").Obj(), nil).Obj()
		createRunning(aw)
		expectEvent(aw, "", "AmbiguousTrigger", "has 2")
		util.JobComplete(ctx, k8sClient, types.NamespacedName{Namespace: ns.Name, Name: "first"})
		expectKept(aw, util.ConsistentDuration)
	})

	It("reports a rule whose expression does not compile, and acts on nothing", func() {
		bad := makeRule("bad").TriggerKind("batch", "Job", "").Success(`object.status.succeeded + 1`).Obj()
		createSpecRule(bad)
		expectRuleReady(bad, metav1.ConditionFalse, wrapupv1alpha1.ReasonInvalidExpression)
		got := &wrapupv1alpha1.CompletionRule{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(bad), got)).To(Succeed())
		Expect(apimeta.FindStatusCondition(got.Status.Conditions, wrapupv1alpha1.ConditionReady).Message).To(ContainSubstring("spec.success"))

		aw, job := benchmarkAppWrapper("run9", false)
		util.JobComplete(ctx, k8sClient, job)
		expectNotRecorded(aw)

		By("fixing the rule")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(bad), got)).To(Succeed())
		got.Spec.Success = `object.status.?succeeded.orValue(0) >= 1`
		Expect(k8sClient.Update(ctx, got)).To(Succeed())
		expectRuleReady(got, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("type-checks expressions against the trigger kind's published schema", func() {
		typo := makeRule("typo").TriggerKind("batch", "Job", "").
			Success(`object.status.succeded > 0`).
			Message(`object.metadata.name + ' done'`).Obj()
		createSpecRule(typo)
		By("the rule still compiling (it runs dynamically typed), with a warning naming the typo")
		expectRuleReady(typo, metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled)
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(typo), got)).To(Succeed())
			g.Expect(got.Status.TypeChecking).NotTo(BeNil())
			g.Expect(got.Status.TypeChecking.Schema).To(Equal("batch/v1, Kind=Job"))
			g.Expect(got.Status.TypeChecking.ExpressionWarnings).To(HaveLen(1))
			g.Expect(got.Status.TypeChecking.ExpressionWarnings[0].FieldRef).To(Equal("spec.success"))
			g.Expect(got.Status.TypeChecking.ExpressionWarnings[0].Warning).To(ContainSubstring("succeded"))
		}, util.Timeout, util.Interval).Should(Succeed())
		expectEvent(typo, "", "TypeCheckWarning", "succeded")

		By("fixing the typo clearing the warning")
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(typo), got)).To(Succeed())
			got.Spec.Success = `object.status.?succeeded.orValue(0) > 0`
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, util.Timeout, util.Interval).Should(Succeed())
		Eventually(func(g Gomega) {
			got := &wrapupv1alpha1.CompletionRule{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(typo), got)).To(Succeed())
			g.Expect(got.Status.TypeChecking).NotTo(BeNil())
			g.Expect(got.Status.TypeChecking.ExpressionWarnings).To(BeEmpty())
		}, util.Timeout, util.Interval).Should(Succeed())
	})

	It("takes a CEL runtime error as not finished, with an Event", func() {
		createReadyRule(ns, util.MakeRule("runtime-error").TriggerKind("batch", "Job", "").
			Success(`object.status.noSuchField == 1`))
		aw, job := benchmarkAppWrapper("run10", false)
		util.JobComplete(ctx, k8sClient, job)
		expectEvent(aw, "", "EvaluationError", "not finished")
		expectKept(aw, util.ConsistentDuration)
	})

	It("finishes a failed AppWrapper once its controller stops retrying", func() {
		createReadyRule(ns, util.MakeRule("failures").TriggerKind("batch", "Job", "").OnFailure(wrapupv1alpha1.ActionDeleteAll, 0))
		aw := util.MakeAppWrapper("run11", ns.Name).
			Annotation(awv1beta2.RetryLimitAnnotation, "0").
			Component(util.MakeDeployment("run11-inference", 1), nil).
			Component(util.MakeJob("run11-benchmark").Obj(), nil).Obj()
		createRunning(aw)
		job := types.NamespacedName{Namespace: ns.Name, Name: "run11-benchmark"}
		expectJob(job)
		failJob(aw, job)
		expectEvent(aw, "", "TriggerFailed", "")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("waits while the AppWrapper controller retries a failed trigger, and evaluates the new one afresh", func() {
		createReadyRule(ns, util.MakeRule("retries").TriggerKind("batch", "Job", ""))
		aw := util.MakeAppWrapper("run12", ns.Name).
			Annotation(awv1beta2.RetryLimitAnnotation, "1").
			// Its controller resets on the first failed pod, without waiting.
			Annotation(awv1beta2.FailureGracePeriodDurationAnnotation, "0s").
			Annotation(awv1beta2.RetryPausePeriodDurationAnnotation, "1s").
			Component(util.MakeJob("run12-benchmark").Obj(), nil).Obj()
		createRunning(aw)
		key := types.NamespacedName{Namespace: ns.Name, Name: "run12-benchmark"}
		first := expectJob(key)
		failJob(aw, key)

		By("the AppWrapper controller re-creating the Job, and wrapup not acting meanwhile")
		second := &batchv1.Job{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key, second)).To(Succeed())
			g.Expect(second.UID).NotTo(Equal(first.UID))
		}, util.LongTimeout, util.Interval).Should(Succeed())
		got := &awv1beta2.AppWrapper{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
		Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
		Expect(recordedOutcome(Default, got)).To(BeEmpty())
		Expect(got.Status.Retries).To(Equal(int32(1)))

		By("the re-created Job succeeding")
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
		util.JobComplete(ctx, k8sClient, key)
		expectEvent(aw, "", "TriggerSucceeded", "")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("never deletes during a retry that starts after its grace period", func() {
		// The AppWrapper controller does not watch Jobs: it may notice the
		// failed Job only on a later pass, possibly after wrapup's (short, in
		// this suite) grace period, so wrapup may record the failure before
		// the retry starts; then the record must go and nothing be deleted.
		// Whichever comes first, the invariant below holds.
		createReadyRule(ns, util.MakeRule("late-retry").TriggerKind("batch", "Job", "").OnFailure(wrapupv1alpha1.ActionDeleteAll, 5))
		aw := util.MakeAppWrapper("run14", ns.Name).
			Annotation(awv1beta2.RetryLimitAnnotation, "1").
			Annotation(awv1beta2.RetryPausePeriodDurationAnnotation, "1s").
			Component(util.MakeJob("run14-benchmark").Obj(), nil).Obj()
		createRunning(aw)
		key := types.NamespacedName{Namespace: ns.Name, Name: "run14-benchmark"}
		first := expectJob(key)
		util.JobFailed(ctx, k8sClient, key)

		By("the retry re-creating the Job, the record going, and nothing deleted")
		Eventually(func(g Gomega) {
			second := &batchv1.Job{}
			g.Expect(k8sClient.Get(ctx, key, second)).To(Succeed())
			g.Expect(second.UID).NotTo(Equal(first.UID))
			got := &awv1beta2.AppWrapper{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)).To(Succeed())
			g.Expect(got.Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
			g.Expect(recordedOutcome(g, got)).To(BeEmpty())
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
		}, util.LongTimeout, util.Interval).Should(Succeed())
		Expect(countEvents(aw, "Deleted")).To(BeZero())

		By("the re-created Job succeeding")
		util.ExpectAppWrapperPhase(ctx, k8sClient, client.ObjectKeyFromObject(aw), awv1beta2.AppWrapperRunning)
		util.JobComplete(ctx, k8sClient, key)
		expectEvent(aw, "", "TriggerSucceeded", "")
		util.ExpectGone(ctx, k8sClient, aw, util.LongTimeout)
	})

	It("reports a trigger kind that is not served", func() {
		r := makeRule("nokind").TriggerKind("example.wrapup.dev", "Missing", "").Success(`true`).Obj()
		createSpecRule(r)
		expectRuleReady(r, metav1.ConditionFalse, wrapupv1alpha1.ReasonTriggerKindNotFound)
	})
})

// failJob plays the kubelet and the Job controller for a failing Job: its pod
// fails, then the Job is marked Failed.
func failJob(aw *awv1beta2.AppWrapper, key types.NamespacedName) {
	GinkgoHelper()
	job := &batchv1.Job{}
	Expect(k8sClient.Get(ctx, key, job)).To(Succeed())
	job.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	util.CreatePod(ctx, k8sClient, key.Namespace, key.Name+"-"+string(job.UID)[:5], aw.Name, job, corev1.PodFailed)
	util.JobFailed(ctx, k8sClient, key)
}

func expectRuleReady(r *wrapupv1alpha1.CompletionRule, status metav1.ConditionStatus, reason string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		got := &wrapupv1alpha1.CompletionRule{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), got)).To(Succeed())
		c := apimeta.FindStatusCondition(got.Status.Conditions, wrapupv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status), c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
	}, util.Timeout, util.Interval).Should(Succeed())
}

// expectEvent waits for an Event on obj with reason whose note contains text.
func expectEvent(obj client.Object, _ wrapupv1alpha1.Outcome, reason, text string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == obj.GetName() && e.Reason == reason {
				notes = append(notes, e.Note)
				if strings.Contains(e.Note, text) {
					return
				}
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(text)), "no %s Event on %s", reason, obj.GetName())
	}, util.Timeout, util.Interval).Should(Succeed())
}
