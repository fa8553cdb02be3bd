package pods

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// The llm-d shape on LeaderWorkerSets, as config/samples/leaderworkerset
// ships it: per benchmark, a prefill and a decode LeaderWorkerSet of one
// group each (a leader and a worker of 2 GPUs), a ConfigMap, a Service and a
// guidellm Job, 8 GPUs in all: one node's worth.
const (
	lwsSample     = "config/samples/leaderworkerset/llm-d-pd.yaml"
	lwsSampleRule = "config/samples/benchmarks.yaml"
	// lwsSets are the sample's LeaderWorkerSets.
	lwsPrefill = "llama-70b-pd-prefill"
	lwsDecode  = "llama-70b-pd-decode"
	// lwsPods is a benchmark's pods: two per LeaderWorkerSet and the Job's.
	lwsPods = 5
	// lwsSetLabel names a pod's LeaderWorkerSet (sigs.k8s.io/lws
	// api/leaderworkerset/v1 SetNameLabelKey); lwsWorkerIndexLabel and
	// lwsGroupIndexLabel are set by its Pod webhook.
	lwsSetLabel         = "leaderworkerset.sigs.k8s.io/name"
	lwsWorkerIndexLabel = "leaderworkerset.sigs.k8s.io/worker-index"
	lwsGroupIndexLabel  = "leaderworkerset.sigs.k8s.io/group-index"
)

// lwsTimeout bounds what takes the whole chain with LeaderWorkerSets:
// Kueue, the AppWrapper controller, the LeaderWorkerSet controller and its
// webhooks, the StatefulSet controller (a group's worker StatefulSet only
// once its leader pod exists), the scheduler and kwok; and, on deletion,
// the garbage collector's cascade from a LeaderWorkerSet through its
// StatefulSets and leader pods to the workers.
const lwsTimeout = 3 * time.Minute

var _ = Describe("GPUs handed to the next benchmark when its inference servers are LeaderWorkerSets", Ordered, func() {
	var (
		first, next *corev1.Namespace
		node        *corev1.Node
		flavor      *kueue.ResourceFlavor
	)

	BeforeAll(func() {
		// A node and flavor of their own: Kueue's node selector keeps these
		// pods off the other specs' node, and theirs off this one.
		flavor = util.MakeGPUFlavor("lws-h100", framework.GPUNodeLabel, "lws-h100")
		Expect(k8sClient.Create(ctx, flavor)).To(Succeed())
		node = framework.CreateGPUNodes(ctx, k8sClient, "lws-gpu", "lws-h100", 1, nodeGPUs)[0]
		cq := util.MakeGPUClusterQueue("lws-gpus", flavor.Name, "32", nodeGPUs)
		Expect(k8sClient.Create(ctx, cq)).To(Succeed())
		// Each benchmark in a namespace of its own, so that the sample is
		// applied unchanged; both queue to the one ClusterQueue.
		first = framework.CreateNamespace(ctx, k8sClient, "lws-first", nil)
		next = framework.CreateNamespace(ctx, k8sClient, "lws-next", nil)
		var queues []client.Object
		for _, ns := range []*corev1.Namespace{first, next} {
			lq := util.MakeLocalQueue("benchmarks", ns.Name, cq.Name)
			Expect(k8sClient.Create(ctx, lq)).To(Succeed())
			queues = append(queues, lq)
		}
		// The sample's rule, as an admin applies it.
		rule := &wrapupv1alpha1.CompletionRule{}
		readSample(lwsSampleRule, rule)
		Expect(k8sClient.Create(ctx, rule)).To(Succeed())
		DeferCleanup(func() {
			for _, o := range append(queues, rule, first, next, cq, flavor, node) {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed())
			}
		})
	})

	It("admits the sample by its podSets, runs its groups' pods, deletes it when the Job completes, frees the quota only once every pod is gone, and runs the next on the freed GPUs", func() {
		aw := applyLWSSample(first.Name)

		By("Kueue admits it, counting the LeaderWorkerSets' GPUs through the declared podSets")
		wl := util.ExpectWorkloadCondition(ctx, k8sClient, aw, kueue.WorkloadQuotaReserved, metav1.ConditionTrue)
		Expect(wl.Spec.PodSets).To(HaveLen(5), "two pod sets per LeaderWorkerSet and the Job's")
		Expect(admittedGPUs(wl)).To(Equal(int64(nodeGPUs)))

		By("the LeaderWorkerSet controller makes a StatefulSet per group, and kwok runs every pod on the GPU node")
		running := expectLWSPodsRunning(first.Name, aw.Name, node.Name)
		Expect(gpusInUse(node.Name)).To(Equal(int64(nodeGPUs)))
		expectGroups(first.Name)

		// Queued once the first is admitted (Kueue orders Workloads
		// created in the same second by UID).
		second := applyLWSSample(next.Name)
		util.ExpectWorkloadCondition(ctx, k8sClient, second, kueue.WorkloadQuotaReserved, metav1.ConditionFalse)

		By("the guidellm pod succeeds; the Job controller completes the Job; wrapup deletes the AppWrapper")
		complete := util.AwaitJobComplete(ctx, k8sClient, client.ObjectKey{Namespace: first.Name, Name: "llama-70b-pd-guidellm"}, lwsTimeout)

		By("every pod of the first is gone before the AppWrapper and its quota are, and the next's pods run on the freed GPUs")
		var awGone, podsGone, workloadGone, admitted time.Time
		Eventually(func(g Gomega) {
			// The AppWrapper and the quota first, the pods after: a pod
			// listed after either was seen gone was there when it went.
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{})
			gone := apierrors.IsNotFound(err)
			if !gone {
				g.Expect(err).NotTo(HaveOccurred())
			}
			wlGone := false
			if _, err := workloadNamed(first.Name, wl.Name); apierrors.IsNotFound(err) {
				wlGone = true
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			nextWL, err := util.WorkloadFor(ctx, k8sClient, second)
			g.Expect(err).NotTo(HaveOccurred())
			nextAdmitted := nextWL != nil && isTrue(nextWL.Status.Conditions, kueue.WorkloadQuotaReserved)
			var pods corev1.PodList
			g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(first.Name))).To(Succeed())
			now := time.Now()
			if len(pods.Items) > 0 && (gone || wlGone || nextAdmitted) {
				StopTrying("a pod of the first benchmark outlived its AppWrapper or its quota").
					Attach("pods", podNames(pods.Items)).Attach("AppWrapper gone", gone).
					Attach("workload gone", wlGone).Attach("next admitted", nextAdmitted).Now()
			}
			if gone && awGone.IsZero() {
				awGone = now
			}
			if len(pods.Items) == 0 && podsGone.IsZero() {
				podsGone = now
			}
			if wlGone && workloadGone.IsZero() {
				workloadGone = now
			}
			if nextAdmitted && admitted.IsZero() {
				admitted = now
			}
			g.Expect(awGone).NotTo(BeZero(), "wrapup has not deleted the first, or it is still being torn down")
			g.Expect(podsGone).NotTo(BeZero(), "pods of the first: %v", podNames(pods.Items))
			g.Expect(workloadGone).NotTo(BeZero(), "the first's Workload is still there")
			g.Expect(admitted).NotTo(BeZero(), "the next is not admitted yet")
		}, lwsTimeout, 20*time.Millisecond).Should(Succeed())
		Expect(podsGone).NotTo(BeTemporally(">", awGone))
		Expect(podsGone).NotTo(BeTemporally(">", workloadGone))
		Expect(podsGone).NotTo(BeTemporally(">", admitted))
		expectLWSPodsRunning(next.Name, second.Name, node.Name)
		nextRunning := time.Now()
		Expect(gpusInUse(node.Name)).To(Equal(int64(nodeGPUs)))
		expectGroups(next.Name)
		since := func(t time.Time) time.Duration { return t.Sub(complete).Round(10 * time.Millisecond) }
		GinkgoWriter.Printf("LeaderWorkerSet benchmark's pods Running at %s; its Job seen Complete, then its pods all seen gone %s later, "+
			"its AppWrapper %s, its Workload %s, the next admitted %s, and the next benchmark's pods all seen Running %s later\n",
			running.Format(time.RFC3339), since(podsGone), since(awGone), since(workloadGone), since(admitted), since(nextRunning))

		By("the sample's rule decided it, on its Job")
		var records wrapupv1alpha1.CompletionRecordList
		Expect(k8sClient.List(ctx, &records, client.InNamespace(first.Name))).To(Succeed())
		Expect(records.Items).To(ConsistOf(And(
			HaveField("AppWrapper.Name", aw.Name),
			HaveField("Rule", "benchmarks"),
			HaveField("Outcome", wrapupv1alpha1.OutcomeSucceeded),
			HaveField("Message", "benchmark llama-70b-pd-guidellm: 1 succeeded, 0 failed"),
		)))

		By("the next finishes the same way, and the node is free")
		util.ExpectGone(ctx, k8sClient, second, lwsTimeout)
		Eventually(func() int64 { return gpusInUse(node.Name) }, lwsTimeout, util.Interval).Should(BeZero())
		Eventually(func(g Gomega) {
			var sets appsv1.StatefulSetList
			g.Expect(k8sClient.List(ctx, &sets, client.InNamespace(next.Name))).To(Succeed())
			g.Expect(sets.Items).To(BeEmpty())
		}, lwsTimeout, util.Interval).Should(Succeed())
	})

	It("waits, with the sample's podSets, for servers that take their time to stop: the AppWrapper and its quota stay until the last pod is gone", func() {
		ns := lwsNamespace("lws-drain")
		aw := applyDrainingLWSSample(ns.Name, true)
		wl := util.ExpectWorkloadCondition(ctx, k8sClient, aw, kueue.WorkloadQuotaReserved, metav1.ConditionTrue)
		util.ExpectPodsRunning(ctx, k8sClient, ns.Name, aw.Name, node.Name, lwsPods, lwsTimeout)

		By("the Job completes; wrapup deletes the AppWrapper; its LeaderWorkerSets' pods stop in their time, and only then do the AppWrapper and its Workload go")
		util.AwaitJobComplete(ctx, k8sClient, client.ObjectKey{Namespace: ns.Name, Name: "llama-70b-pd-guidellm"}, lwsTimeout)
		heldWhileDraining := false
		Eventually(func(g Gomega) {
			// The AppWrapper and the Workload first, the pods after (as
			// above).
			got := &awv1beta2.AppWrapper{}
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(aw), got)
			gone := apierrors.IsNotFound(err)
			if !gone {
				g.Expect(err).NotTo(HaveOccurred())
			}
			_, err = workloadNamed(ns.Name, wl.Name)
			wlGone := apierrors.IsNotFound(err)
			if !wlGone {
				g.Expect(err).NotTo(HaveOccurred())
			}
			var pods corev1.PodList
			g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns.Name), client.HasLabels{lwsSetLabel})).To(Succeed())
			if len(pods.Items) > 0 && (gone || wlGone) {
				StopTrying("a LeaderWorkerSet's pod outlived its AppWrapper or its quota").
					Attach("pods", podNames(pods.Items)).Attach("AppWrapper gone", gone).Attach("workload gone", wlGone).Now()
			}
			if !gone && got.DeletionTimestamp != nil && !wlGone && len(pods.Items) > 0 {
				heldWhileDraining = true
			}
			g.Expect(gone).To(BeTrue(), "the AppWrapper is still there; pods %v", podNames(pods.Items))
			g.Expect(wlGone).To(BeTrue(), "the Workload is still there")
		}, lwsTimeout, 20*time.Millisecond).Should(Succeed())
		Expect(heldWhileDraining).To(BeTrue(), "the AppWrapper being deleted and its Workload were never seen held while the pods stopped")
	})

	It("without podSets, admits the sample without the LeaderWorkerSets' GPUs and frees its quota while their pods still run (the AppWrapper controller's behaviour the sample's podSets avoid)", func() {
		ns := lwsNamespace("lws-bare")
		aw := applyDrainingLWSSample(ns.Name, false)

		By("Kueue admits it with the Job's pod set alone: none of the LeaderWorkerSets' 8 GPUs")
		wl := util.ExpectWorkloadCondition(ctx, k8sClient, aw, kueue.WorkloadQuotaReserved, metav1.ConditionTrue)
		Expect(wl.Spec.PodSets).To(HaveLen(1))
		Expect(admittedGPUs(wl)).To(BeZero())

		By("the LeaderWorkerSets' pods run without the AppWrapper's label or the admitted flavor's node selector")
		var lwsPodNames []string
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns.Name), client.HasLabels{lwsSetLabel})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(4))
			for _, p := range pods.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				g.Expect(p.Labels).NotTo(HaveKey(awv1beta2.AppWrapperLabel), "pod %s", p.Name)
				g.Expect(p.Spec.NodeSelector).NotTo(HaveKey(framework.GPUNodeLabel), "pod %s", p.Name)
			}
			lwsPodNames = podNames(pods.Items)
		}, lwsTimeout, util.Interval).Should(Succeed())

		By("the Job completes; wrapup deletes the AppWrapper; it and its Workload go while the LeaderWorkerSets' pods still run")
		util.AwaitJobComplete(ctx, k8sClient, client.ObjectKey{Namespace: ns.Name, Name: "llama-70b-pd-guidellm"}, lwsTimeout)
		util.ExpectGone(ctx, k8sClient, aw, lwsTimeout)
		_, err := workloadNamed(ns.Name, wl.Name)
		Eventually(func() bool {
			_, err = workloadNamed(ns.Name, wl.Name)
			return apierrors.IsNotFound(err)
		}, lwsTimeout, util.Interval).Should(BeTrue(), "the Workload is still there: %v", err)
		var left corev1.PodList
		Expect(k8sClient.List(ctx, &left, client.InNamespace(ns.Name), client.HasLabels{lwsSetLabel})).To(Succeed())
		Expect(podNames(left.Items)).NotTo(BeEmpty(), "the LeaderWorkerSets' pods %v stopped before the quota was freed", lwsPodNames)
		GinkgoWriter.Printf("AppWrapper and Workload gone while %d of the LeaderWorkerSets' pods still ran: %v\n", len(left.Items), podNames(left.Items))

		By("the garbage collector takes them down in the end")
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(podNames(pods.Items)).To(BeEmpty())
		}, lwsTimeout, util.Interval).Should(Succeed())
	})
})

// lwsLinger is how long the LeaderWorkerSets' pods of the draining specs
// take to stop once deleted (the bed's kwok stage pod-terminate waits
// lwsLingerAnnotation): long enough that an AppWrapper and a Workload that
// do not wait for them are surely gone first.
const (
	lwsLinger           = 20 * time.Second
	lwsLingerAnnotation = "pod-delete.stage.kwok.x-k8s.io/delay"
)

// lwsNamespace is a namespace of the spec's own with a LocalQueue named as
// the sample's, for the ClusterQueue of the LeaderWorkerSet specs.
func lwsNamespace(prefix string) *corev1.Namespace {
	GinkgoHelper()
	ns := framework.CreateNamespace(ctx, k8sClient, prefix, nil)
	lq := util.MakeLocalQueue("benchmarks", ns.Name, "lws-gpus")
	Expect(k8sClient.Create(ctx, lq)).To(Succeed())
	DeferCleanup(func() {
		for _, o := range []client.Object{lq, ns} {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed())
		}
	})
	return ns
}

// applyDrainingLWSSample creates the LeaderWorkerSet sample in ns with
// servers that take lwsLinger to stop once deleted, as servers draining
// their requests do; without podSets when podSets is false. Its guidellm
// Job runs the sample's 15 s, so that the servers' pods (a chain: the
// leader, then the workers' StatefulSet) run before it completes, however
// busy the machine.
func applyDrainingLWSSample(ns string, podSets bool) *awv1beta2.AppWrapper {
	GinkgoHelper()
	aw := &awv1beta2.AppWrapper{}
	readSample(lwsSample, aw)
	aw.Namespace = ns
	for i := range aw.Spec.Components {
		c := &aw.Spec.Components[i]
		obj := &unstructured.Unstructured{}
		Expect(obj.UnmarshalJSON(c.Template.Raw)).To(Succeed())
		switch obj.GetKind() {
		case "LeaderWorkerSet":
			if !podSets {
				c.DeclaredPodSets = nil
			}
			for _, t := range []string{"leaderTemplate", "workerTemplate"} {
				Expect(unstructured.SetNestedField(obj.Object, lwsLinger.String(), "spec", "leaderWorkerTemplate", t, "metadata", "annotations", lwsLingerAnnotation)).To(Succeed())
			}
		}
		raw, err := obj.MarshalJSON()
		Expect(err).NotTo(HaveOccurred())
		c.Template.Raw = raw
	}
	Expect(k8sClient.Create(ctx, aw)).To(Succeed())
	return aw
}

// readSample decodes a file of the repository into obj, strictly.
func readSample(path string, obj any) {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), path))
	Expect(err).NotTo(HaveOccurred())
	Expect(yaml.UnmarshalStrict(data, obj)).To(Succeed(), path)
}

// applyLWSSample creates the LeaderWorkerSet sample in ns, as a user
// applies it there.
func applyLWSSample(ns string) *awv1beta2.AppWrapper {
	GinkgoHelper()
	aw := &awv1beta2.AppWrapper{}
	readSample(lwsSample, aw)
	aw.Namespace = ns
	Expect(k8sClient.Create(ctx, aw)).To(Succeed())
	return aw
}

// expectLWSPodsRunning waits until the benchmark's pods are all Running on
// node, and returns when the last of them started. Every pod in ns is the
// benchmark's, and each carries the AppWrapper's label: the AppWrapper
// controller puts it on each declared pod set's template.
func expectLWSPodsRunning(ns, aw, node string) time.Time {
	GinkgoHelper()
	pods, last := util.ExpectPodsRunning(ctx, k8sClient, ns, aw, node, lwsPods, lwsTimeout)
	var all corev1.PodList
	Expect(k8sClient.List(ctx, &all, client.InNamespace(ns))).To(Succeed())
	Expect(all.Items).To(HaveLen(len(pods)), "pods without the AppWrapper's label")
	for _, p := range pods {
		// Kueue's flavor, through the AppWrapper controller's injection.
		Expect(p.Spec.NodeSelector).To(HaveKeyWithValue(framework.GPUNodeLabel, "lws-h100"), "pod %s", p.Name)
	}
	return last
}

// expectGroups checks the groups the LeaderWorkerSet controller made in ns:
// for each set, a leader StatefulSet that the set owns and a worker
// StatefulSet that its leader pod owns (sigs.k8s.io/lws
// pkg/controllers/leaderworkerset_controller.go and pod_controller.go), and
// pods labelled by its webhook (pkg/webhooks/pod_webhook.go), the workers
// told their leader's address.
func expectGroups(ns string) {
	GinkgoHelper()
	var sets appsv1.StatefulSetList
	Expect(k8sClient.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
	owners := map[string]string{}
	for _, s := range sets.Items {
		ref := metav1.GetControllerOf(&s)
		Expect(ref).NotTo(BeNil(), "StatefulSet %s has no controller", s.Name)
		owners[s.Name] = ref.Kind + "/" + ref.Name
	}
	Expect(owners).To(Equal(map[string]string{
		lwsPrefill: "LeaderWorkerSet/" + lwsPrefill, lwsPrefill + "-0": "Pod/" + lwsPrefill + "-0",
		lwsDecode: "LeaderWorkerSet/" + lwsDecode, lwsDecode + "-0": "Pod/" + lwsDecode + "-0",
	}))
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{lwsSetLabel})).To(Succeed())
	workers := map[string]string{}
	for _, p := range pods.Items {
		Expect(p.Labels).To(HaveKeyWithValue(lwsGroupIndexLabel, "0"), "pod %s", p.Name)
		workers[p.Name] = p.Labels[lwsWorkerIndexLabel]
		if p.Labels[lwsWorkerIndexLabel] != "0" {
			Expect(p.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", "LWS_LEADER_ADDRESS")), "worker %s", p.Name)
		}
	}
	Expect(workers).To(Equal(map[string]string{
		lwsPrefill + "-0": "0", lwsPrefill + "-0-1": "1",
		lwsDecode + "-0": "0", lwsDecode + "-0-1": "1",
	}))
}

// admittedGPUs sums the GPUs of a Workload's admission.
func admittedGPUs(wl *kueue.Workload) int64 {
	GinkgoHelper()
	Expect(wl.Status.Admission).NotTo(BeNil())
	var n int64
	for _, a := range wl.Status.Admission.PodSetAssignments {
		n += a.ResourceUsage.Name(util.GPU, resource.DecimalSI).Value()
	}
	return n
}

func workloadNamed(ns, name string) (*kueue.Workload, error) {
	wl := &kueue.Workload{}
	return wl, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wl)
}

func isTrue(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}
