// Package demo tells wrapup's main story on a local control plane with
// Kueue: two llm-d style benchmark AppWrappers (two inference Deployments
// that never finish, a ConfigMap and a guidellm Job) queue for quota that
// fits one; when the first one's Job completes, wrapup finishes it, its
// quota comes back and Kueue admits the second. Run it with `make demo`; it
// is also part of `make test`.
package demo

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

func TestDemo(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "wrapup demo")
}

var start = time.Now()

func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "[%6.2fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

var _ = Describe("wrapup", Ordered, func() {
	var (
		fwk    *framework.Framework
		c      client.Client
		ctx    context.Context
		cancel context.CancelFunc
	)
	BeforeAll(func() {
		ctx, cancel = context.WithCancel(context.Background())
		say("Starting a local control plane: etcd, kube-apiserver and kube-controller-manager (garbage collector),")
		say("with Kueue, the AppWrapper controller and wrapup running against it")
		fwk = &framework.Framework{CRDPaths: []string{framework.KueueCRDs()}}
		cfg := fwk.Init()
		var err error
		c, err = client.New(cfg, client.Options{Scheme: framework.Scheme})
		Expect(err).NotTo(HaveOccurred())
		fwk.StartManager(ctx, cfg, func(ctx context.Context, mgr ctrl.Manager) error {
			if err := framework.SetupKueue(ctx, mgr); err != nil {
				return err
			}
			return gc.Setup(mgr, gc.Options{})
		})
		say("Control plane up")
	})
	AfterAll(func() {
		cancel()
		fwk.Teardown()
		say("Control plane stopped; every process it started has exited")
	})

	It("frees a finished benchmark's quota so that the next queued one starts", func() {
		ns := framework.CreateNamespace(ctx, c, "llm-d", nil)
		Expect(c.Create(ctx, util.MakeResourceFlavor("default-flavor"))).To(Succeed())
		Expect(c.Create(ctx, util.MakeClusterQueue("gpu-pool", "default-flavor", "300m"))).To(Succeed())
		Expect(c.Create(ctx, util.MakeLocalQueue("benchmarks", ns.Name, "gpu-pool"))).To(Succeed())
		say("Kueue: ClusterQueue gpu-pool with quota for one benchmark (300m CPU stands in for the GPUs)")

		rule := util.MakeRule("benchmarks").
			AppWrapperLabels(map[string]string{"llm-d.ai/role": "benchmark"}).
			TriggerKind("batch", "Job", "").
			Message(`'guidellm finished: ' + string(object.status.?succeeded.orValue(0)) + ' pod(s) succeeded'`).
			Obj()
		Expect(c.Create(ctx, rule)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), rule)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(rule.Status.Conditions, wrapupv1alpha1.ConditionReady)).To(BeTrue())
		}, util.Timeout, util.Interval).Should(Succeed(), "the CompletionRule did not become Ready")
		ready := apimeta.FindStatusCondition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady)
		say("CompletionRule %q: Ready=%s: %s", rule.Name, ready.Status, ready.Message)

		submit := func(name string) *awv1beta2.AppWrapper {
			aw := util.MakeAppWrapper(name, ns.Name).
				Label("llm-d.ai/role", "benchmark").
				Label(util.QueueNameLabel, "benchmarks").
				Suspend(true).
				Component(util.MakeDeployment(name+"-prefill", 1), nil).
				Component(util.MakeDeployment(name+"-decode", 1), nil).
				Component(util.MakeConfigMap(name+"-config", map[string]string{"rate": "sweep"}), nil).
				Component(util.MakeJob(name+"-guidellm").Obj(), nil).
				Obj()
			Expect(c.Create(ctx, aw)).To(Succeed())
			return aw
		}

		first := submit("llama-8b-sweep")
		say("Submitted AppWrapper %s: Deployments -prefill and -decode (vLLM), a ConfigMap, Job -guidellm", first.Name)
		util.ExpectWorkloadCondition(ctx, c, first, kueue.WorkloadAdmitted, metav1.ConditionTrue)
		say("Kueue admitted %s", first.Name)
		util.ExpectAppWrapperPhase(ctx, c, client.ObjectKeyFromObject(first), awv1beta2.AppWrapperRunning)

		var pods []*corev1.Pod
		for _, name := range []string{first.Name + "-prefill", first.Name + "-decode"} {
			d := &appsv1.Deployment{}
			Eventually(func() error {
				return c.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: name}, d)
			}, util.Timeout, util.Interval).Should(Succeed(), "the AppWrapper controller did not create %s", name)
			d.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
			pods = append(pods, util.CreatePod(ctx, c, ns.Name, name+"-0", first.Name, d, corev1.PodRunning))
		}
		job := types.NamespacedName{Namespace: ns.Name, Name: first.Name + "-guidellm"}
		Eventually(func() error { return c.Get(ctx, job, &batchv1.Job{}) }, util.Timeout, util.Interval).Should(Succeed())
		util.JobStarted(ctx, c, job)
		say("The AppWrapper controller deployed it: inference pods Running, guidellm driving load")

		second := submit("qwen-32b-sweep")
		util.ExpectWorkloadCondition(ctx, c, second, kueue.WorkloadQuotaReserved, metav1.ConditionFalse)
		say("Submitted AppWrapper %s: waiting, no quota left (its Workload is pending)", second.Name)

		Consistently(func() error {
			return c.Get(ctx, client.ObjectKeyFromObject(first), &awv1beta2.AppWrapper{})
		}, "2s", util.Interval).Should(Succeed())
		say("While guidellm runs, wrapup does nothing; the vLLM servers would run forever")

		util.JobComplete(ctx, c, job)
		completed := time.Now()
		say("guidellm Job Complete")
		since := func() int64 { return time.Since(completed).Milliseconds() }

		var recorded, deleted bool
		Eventually(func(g Gomega) {
			got := &awv1beta2.AppWrapper{}
			err := c.Get(ctx, client.ObjectKeyFromObject(first), got)
			if err == nil && !recorded && got.Labels[wrapupv1alpha1.OutcomeLabel] != "" {
				recorded = true
				say("  +%4dms wrapup recorded the outcome: %s=%s, %q", since(),
					wrapupv1alpha1.OutcomeLabel, got.Labels[wrapupv1alpha1.OutcomeLabel], got.Annotations[wrapupv1alpha1.MessageAnnotation])
			}
			if err == nil && !deleted && !got.DeletionTimestamp.IsZero() {
				deleted = true
				say("  +%4dms wrapup deleted the AppWrapper; its controller tears the components down", since())
			}
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred(), "the finished AppWrapper still exists")
		}, util.LongTimeout, 10*time.Millisecond).Should(Succeed())
		say("  +%4dms AppWrapper %s, its components and pods gone", since(), first.Name)
		for _, p := range pods {
			util.ExpectGone(ctx, c, p, util.LongTimeout)
		}

		util.ExpectWorkloadCondition(ctx, c, second, kueue.WorkloadAdmitted, metav1.ConditionTrue)
		say("  +%4dms Kueue admitted %s: the quota came back without anyone tearing anything down", since(), second.Name)
		util.ExpectAppWrapperPhase(ctx, c, client.ObjectKeyFromObject(second), awv1beta2.AppWrapperRunning)
		say("  +%4dms %s Running", since(), second.Name)

		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rule), rule)).To(Succeed())
			g.Expect(rule.Status.Succeeded).To(Equal(int64(1)))
		}, util.Timeout, util.Interval).Should(Succeed())
		say("CompletionRule %q: succeeded=%d failed=%d matched=%d", rule.Name, rule.Status.Succeeded, rule.Status.Failed, rule.Status.MatchedAppWrappers)
	})
})
